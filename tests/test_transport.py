"""transport.HttpClient against real loopback servers and every way they misbehave."""

import socket
import ssl
import subprocess
import threading
import unittest
import unittest.mock

from qmem.clients.transport import HttpClient, TransportError, parse_retry_after

from .fakes import FakeGateway, Fault, refused_url

KEY = "test-gateway-key"


class TransportTests(unittest.TestCase):
    def setUp(self):
        self.gateway = FakeGateway(api_key=KEY).start()
        self.addCleanup(self.gateway.stop)

    def client(self, url=None, *, connect=2.0, body=2.0, **kw):
        client = HttpClient(url or self.gateway.url, connect_timeout=connect, body_timeout=body,
                            headers={"Authorization": f"Bearer {KEY}"}, service="Memory Gateway", **kw)
        self.addCleanup(client.close)
        return client

    def fail(self, client, method="GET", path="/v1/status", **kw) -> TransportError:
        with self.assertRaises(TransportError) as caught:
            client.request(method, path, **kw)
        exc = caught.exception
        text = str(exc)
        for leak in ("127.0.0.1", str(self.gateway.port), KEY, "/v1/"):
            self.assertNotIn(leak, text)
        return exc

    def test_answers_and_connection_reuse(self):
        client = self.client()
        for _ in range(5):
            self.assertEqual(client.request("GET", "/v1/status").json()["version"], "2.12.0")
        self.assertEqual(self.gateway.active_connections, 1)

    def test_refused_is_definitive_and_unsent(self):
        exc = self.fail(self.client(refused_url()))
        self.assertEqual((exc.kind, exc.sent, exc.definitive), ("connect", False, True))

    def test_dns_failure(self):
        exc = self.fail(self.client("http://qmem-test.invalid"))
        self.assertEqual((exc.kind, exc.sent), ("dns", False))

    def test_hang_is_a_header_timeout_within_the_connect_deadline(self):
        self.gateway.inject(Fault.hang())
        # A hung server answers only when stopped; the watchdog makes a broken deadline fail, not hang.
        watchdog = threading.Timer(60, self.gateway.stop)
        watchdog.start()
        self.addCleanup(watchdog.cancel)
        exc = self.fail(self.client(connect=0.05))
        self.assertEqual((exc.kind, exc.sent, exc.definitive), ("header_timeout", True, True))

    def test_cancel_ends_a_request_in_flight(self):
        for fault in (Fault.hang(), Fault.stall_body()):
            with self.subTest(fault=fault.kind):
                self.gateway.inject(fault)
                cancel = threading.Event()
                client = self.client(connect=30, body=30)
                count = len(self.gateway.requests)
                threading.Thread(target=lambda: self.gateway.wait_for_requests(count + 1, 10) and cancel.set(),
                                 daemon=True).start()
                exc = self.fail(client, cancel=cancel)
                self.assertEqual(exc.kind, "cancelled")  # not a timeout: the 30 s deadlines did not end it
        self.assertEqual(self.client().request("GET", "/v1/status").status, 200)

    def test_stalled_body_is_an_ambiguous_body_timeout(self):
        self.gateway.inject(Fault.stall_body())
        exc = self.fail(self.client(connect=2.0, body=0.05))
        self.assertEqual((exc.kind, exc.sent, exc.ambiguous), ("body_timeout", True, True))

    def test_cut_off_body_is_an_error_never_empty_success(self):
        self.gateway.inject(Fault.disconnect_mid_body())
        exc = self.fail(self.client())
        self.assertEqual((exc.kind, exc.ambiguous), ("disconnect", True))

    def test_close_without_answer_on_a_fresh_connection(self):
        self.gateway.inject(Fault.close_without_response())
        exc = self.fail(self.client())
        self.assertEqual((exc.kind, exc.sent), ("disconnect", True))

    def test_stale_keep_alive_is_retried_once_on_a_fresh_connection(self):
        client = self.client()
        client.request("GET", "/v1/status")
        self.gateway.inject(Fault.close_without_response())
        self.assertEqual(client.request("GET", "/v1/status").status, 200)
        self.assertEqual(len(self.gateway.requests_to("/v1/status")), 3)

    def test_server_errors_carry_status_and_retry_after(self):
        client = self.client()
        self.gateway.inject(Fault.status(503, retry_after="7"))
        exc = self.fail(client)
        self.assertEqual((exc.kind, exc.status, exc.retry_after, exc.ambiguous), ("http_status", 503, 7.0, True))
        self.gateway.inject(Fault.status(429, retry_after="Wed, 21 Oct 2015 07:28:00 GMT"))
        exc = self.fail(client)
        self.assertEqual((exc.status, exc.retry_after), (429, 0.0))
        self.assertEqual(client.request("GET", "/v1/memories/nope").status, 404)  # 4xx are answers

    def test_redirects_are_not_followed(self):
        other = FakeGateway(api_key=None).start()
        self.addCleanup(other.stop)
        self.gateway.inject(Fault.status(307, headers={"Location": other.url + "/v1/status"}))
        exc = self.fail(self.client())
        self.assertEqual(exc.kind, "redirect")
        self.assertEqual(other.requests, [])  # the credential never went to the other host

    def test_response_size_is_capped(self):
        self.gateway.inject(Fault.status(200, {"blob": "x" * 5000}))
        exc = self.fail(self.client(max_response_bytes=1000))
        self.assertEqual(exc.kind, "too_large")

    def test_json_helper_refuses_non_json(self):
        self.gateway.inject(Fault.status(200, "<html>oops</html>", content_type="text/html"))
        response = self.client().request("GET", "/v1/status")
        with self.assertRaises(TransportError) as caught:
            response.json()
        self.assertEqual(caught.exception.kind, "protocol")
        self.assertNotIn("oops", str(caught.exception))


class DeadlineTests(unittest.TestCase):
    """A server that drips its headers cannot stretch the connect/header deadline."""

    def test_slow_drip_headers_hit_the_total_deadline(self):
        listener = socket.create_server(("127.0.0.1", 0))
        self.addCleanup(listener.close)
        stop = threading.Event()
        self.addCleanup(stop.set)

        def serve():
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 1000:
                    if stop.wait(0.01):  # the server is slow on purpose: one byte per 10 ms
                        return
                    try:
                        conn.sendall(bytes([byte]))
                    except OSError:
                        return

        threading.Thread(target=serve, daemon=True).start()
        client = HttpClient(f"http://127.0.0.1:{listener.getsockname()[1]}", connect_timeout=0.2, body_timeout=5,
                            service="service")
        with self.assertRaises(TransportError) as caught:
            client.request("GET", "/")
        client.close()
        # Per-read timeouts alone would never fire (a byte every 10 ms) and the drip would end, after
        # ~10 s, in a cut-off answer: only the total deadline gives a header timeout.
        self.assertEqual(caught.exception.kind, "header_timeout")


class NameResolutionTests(unittest.TestCase):
    """A lookup that never returns (a name server that does not answer) is bounded by the deadline.

    The system resolver is replaced by one that blocks until the test ends: no name server is
    needed, and nothing leaves the machine."""

    def setUp(self):
        self.release = threading.Event()
        self.addCleanup(self.release.set)
        real = socket.getaddrinfo
        self.lookups = []

        def hanging(host, *args, **kwargs):
            if host == "hangs.invalid":
                self.lookups.append(host)
                self.release.wait(60)
                raise socket.gaierror("released")
            return real(host, *args, **kwargs)

        patcher = unittest.mock.patch("socket.getaddrinfo", hanging)
        patcher.start()
        self.addCleanup(patcher.stop)

    def request(self, **kwargs):
        box = []

        def run():
            try:
                HttpClient("http://hangs.invalid:9", connect_timeout=0.2, body_timeout=0.2).request("GET", "/", **kwargs)
            except TransportError as exc:
                box.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join(30)  # a watchdog far above the 0.2 s deadline: without the bound the lookup holds it for 60 s
        self.assertFalse(thread.is_alive(), "the lookup was not bounded by the deadline")
        return box[0]

    def test_a_hanging_lookup_ends_at_the_deadline_as_a_dns_failure(self):
        error = self.request()
        self.assertEqual((error.kind, error.sent, error.definitive), ("dns", False, True))
        self.assertEqual(self.lookups, ["hangs.invalid"])

    def test_a_hanging_lookup_ends_at_the_budget_and_at_a_cancel(self):
        self.assertEqual(self.request(budget=0.05).kind, "dns")
        cancel = threading.Event()
        cancel.set()
        self.assertEqual(self.request(cancel=cancel).kind, "cancelled")

    def test_an_address_needs_no_lookup(self):
        with FakeGateway() as gateway, HttpClient(gateway.url, connect_timeout=2, body_timeout=2) as client:
            self.assertEqual(client.request("GET", "/v1/status").status, 401)  # answered: no key was sent
        self.assertEqual(self.lookups, [])  # the hanging resolver was never asked


class TlsTests(unittest.TestCase):
    def test_untrusted_certificate_is_refused(self):
        import shutil
        import tempfile
        from pathlib import Path

        if shutil.which("openssl") is None:
            self.skipTest("openssl is not installed, so no self-signed certificate can be made")
        tmp = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, tmp, True)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                        "/CN=127.0.0.1", "-keyout", str(tmp / "k.pem"), "-out", str(tmp / "c.pem")],
                       check=True, capture_output=True, timeout=60)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tmp / "c.pem", tmp / "k.pem")
        listener = socket.create_server(("127.0.0.1", 0))
        self.addCleanup(listener.close)
        got_request = threading.Event()

        def serve():
            conn, _ = listener.accept()
            try:
                with context.wrap_socket(conn, server_side=True) as tls:
                    if tls.recv(100):
                        got_request.set()
            except (ssl.SSLError, OSError):
                pass

        threading.Thread(target=serve, daemon=True).start()
        client = HttpClient(f"https://127.0.0.1:{listener.getsockname()[1]}", connect_timeout=5, body_timeout=5,
                            headers={"Authorization": "Bearer secret-key"}, service="Memory Gateway")
        with self.assertRaises(TransportError) as caught:
            client.request("GET", "/v1/status")
        client.close()
        self.assertEqual((caught.exception.kind, caught.exception.sent), ("tls", False))
        self.assertFalse(got_request.is_set())  # the key never crossed an unverified connection


class RetryAfterTests(unittest.TestCase):
    def test_forms_and_cap(self):
        self.assertEqual(parse_retry_after("5"), 5.0)
        self.assertEqual(parse_retry_after("99999"), 300.0)
        self.assertEqual(parse_retry_after("Thu, 01 Jan 2099 00:00:00 GMT", now=4070908800 - 10), 10.0)
        self.assertEqual(parse_retry_after("Thu, 01 Jan 1970 00:00:00 GMT"), 0.0)
        for bad in (None, "", "soon", "-1", "1.5"):
            self.assertIsNone(parse_retry_after(bad), bad)


if __name__ == "__main__":
    unittest.main()
