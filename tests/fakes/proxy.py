"""A one-shot TCP proxy that delivers a request, loses the answer, then refuses connections.

:class:`CommitThenRefuseProxy` listens on ``127.0.0.1``.  Its first connection is relayed
to the target: the whole request (headers and ``Content-Length`` body) reaches the target,
which commits it and answers; the proxy reads that answer completely, stops listening, and
only then closes the client's connection without a byte of the answer.  Every later
connection attempt is refused (nothing listens any more).  That is the worst case for a
write: it happened, the client cannot know, and its retry cannot get through.

No sleeps: the relay runs on one thread; :meth:`wait_done` blocks on an event.
"""

from __future__ import annotations

import socket
import threading

__all__ = ["CommitThenRefuseProxy"]


def _read_message(sock: socket.socket) -> bytes:
    """One HTTP message (head + Content-Length body) from ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


class CommitThenRefuseProxy:
    def __init__(self, target_port: int) -> None:
        self._target_port = target_port
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(1)
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.relayed_answer = b""
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._serve_once, name="commit-then-refuse", daemon=True)

    def start(self) -> "CommitThenRefuseProxy":
        self._thread.start()
        return self

    def _serve_once(self) -> None:
        try:
            client, _ = self._listener.accept()
        except OSError:
            self._done.set()
            return
        try:
            request = _read_message(client)
            with socket.create_connection(("127.0.0.1", self._target_port)) as upstream:
                upstream.sendall(request)
                self.relayed_answer = _read_message(upstream)
        finally:
            self._listener.close()  # first: the client's retry must find nobody listening
            client.close()
            self._done.set()

    def wait_done(self, timeout: float = 10.0) -> bool:
        return self._done.wait(timeout)

    def stop(self) -> None:
        self._listener.close()
        self._thread.join(5)
