"""Issue 12 item 6: a command waiting on the network says so on a terminal, and says why it stopped."""

import io
import os
import pty
import subprocess
import sys
import threading
import unittest

from qmem.clients import progressline, transport
from qmem.clients.progressline import ProgressLine
from qmem.clients.transport import HttpClient, TransportError

from .fakes import FakeGateway, Fault, refused_url
from .support import GatewayTestCase


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
        progressline.set_wait_observer(ProgressLine(self.stream, quiet_s=0.05, every_s=0.05))
        self.addCleanup(progressline.set_wait_observer, None)
        self.client = HttpClient(self.gateway.url, connect_timeout=5, body_timeout=5, service="Memory Gateway")
        self.addCleanup(self.client.close)

    def test_a_slow_answer_gets_one_line_naming_the_service_and_its_timeout(self):
        release = threading.Event()
        self.gateway.inject(Fault.delay_headers(release))
        releaser = threading.Thread(target=lambda: (self.stream.written.wait(60), release.set()))
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
        # A quiet period no answer outlasts, however loaded the machine: the line is never due.
        progressline.set_wait_observer(ProgressLine(self.stream, quiet_s=3600))
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


class CommandOnATerminalTests(GatewayTestCase):
    def test_store_says_what_it_waits_for_then_why_it_queued(self):
        self.configure(connectTimeoutMs=60_000)
        release = threading.Event()
        self.gateway.inject(Fault.delay_headers(release, path="/v1/memories"))
        master, slave = pty.openpty()
        self.addCleanup(os.close, master)
        proc = subprocess.Popen([sys.executable, "-m", "qmem.local", "store", "--project", "p", "--text", "slow"],
                                cwd=self.home, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=slave)
        os.close(slave)
        seen = b""
        while b"waiting for the Memory Gateway" not in seen:  # the line appears after a quiet second
            chunk = os.read(master, 1024)
            self.assertTrue(chunk, "stderr closed before the wait line")
            seen += chunk
        release.set()
        out, _ = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0)
        self.assertIn("shared through the Memory Gateway", out.decode())
        self.assertNotIn(str(self.gateway.port).encode(), seen)
        self.assertIn(b"gives up after 62 s", seen)

    def test_no_line_off_a_terminal(self):
        release = threading.Event()
        self.gateway.inject(Fault.delay_headers(release, path="/v1/memories"))
        slow_server = threading.Timer(1.5, release.set)  # a gateway slower than the quiet second, not a sync
        slow_server.start()
        self.addCleanup(slow_server.cancel)
        result = self.run_module("qmem.local", "store", "--project", "p", "--text", "quiet")
        self.assertEqual(result.code, 0, result.stderr)
        self.assertNotIn("waiting for", result.stderr)


if __name__ == "__main__":
    unittest.main()
