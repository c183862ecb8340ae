"""Issue 12 item 6: a command waiting on the network says so on a terminal, and says why it stopped."""

import io
import threading
import unittest

from qmem import transport
from qmem.transport import HttpClient, TransportError
from qmem.waitline import WaitLine

from .fakes import FakeGateway, Fault, refused_url


class RecordingStream(io.StringIO):
    """A terminal stand-in that lets a test wait for the first write instead of sleeping."""

    def __init__(self) -> None:
        super().__init__()
        self.written = threading.Event()

    def write(self, text: str) -> int:
        count = super().write(text)
        self.written.set()
        return count


class WaitLineTests(unittest.TestCase):
    def setUp(self):
        self.gateway = FakeGateway(api_key=None).start()
        self.addCleanup(self.gateway.stop)
        self.stream = RecordingStream()
        transport.set_wait_observer(WaitLine(self.stream, quiet_s=0.05, every_s=0.05))
        self.addCleanup(transport.set_wait_observer, None)
        self.client = HttpClient(self.gateway.url, connect_timeout=5, body_timeout=5, service="Memory Gateway")
        self.addCleanup(self.client.close)

    def test_a_slow_answer_gets_one_line_naming_the_service_and_its_timeout(self):
        release = threading.Event()
        self.gateway.inject(Fault.delay_headers(release))
        releaser = threading.Thread(target=lambda: (self.stream.written.wait(10), release.set()))
        releaser.start()
        self.assertEqual(self.client.request("GET", "/v1/status").status, 200)
        releaser.join()
        output = self.stream.getvalue()
        self.assertIn("waiting for the Memory Gateway:", output)
        self.assertIn("gives up after 10 s", output)  # connect + body timeouts
        self.assertTrue(output.endswith("\n"))
        self.assertEqual(output.count("\n"), 1)  # one line, rewritten in place
        self.assertNotIn(str(self.gateway.port), output)

    def test_a_quick_answer_prints_nothing(self):
        transport.set_wait_observer(WaitLine(self.stream))  # the real quiet second: far above a loopback answer
        self.client.request("GET", "/v1/status")
        self.assertEqual(self.stream.getvalue(), "")

    def test_the_error_names_the_real_cause(self):
        # (DNS failures are named too, but resolving a name would leave 127.0.0.1.)
        for url, fragment in ((refused_url(), "refused the connection"),):
            client = HttpClient(url, connect_timeout=5, body_timeout=5, service="Memory Gateway")
            self.addCleanup(client.close)
            with self.subTest(fragment=fragment), self.assertRaises(TransportError) as caught:
                client.request("GET", "/v1/status")
            self.assertIn(fragment, caught.exception.message)


if __name__ == "__main__":
    unittest.main()
