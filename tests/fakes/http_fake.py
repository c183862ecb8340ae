"""A loopback HTTP test double with request recording and fault injection.

:class:`FakeServer` is the base of every fake in this package.  It listens on
``127.0.0.1`` on an ephemeral port, serves each connection on its own daemon
thread (HTTP/1.1, keep-alive, ``Content-Length`` framed answers), records every
request it receives, and can be told to misbehave in precise, deterministic
ways through a FIFO queue of :class:`Fault` specs.

Nothing here sleeps to synchronise.  Every "hang" blocks on the server's stop
event, so a client-side socket timeout fires on its own schedule and
:meth:`FakeServer.stop` releases every blocked handler at once.  Tests that need
to know that a request has arrived use :meth:`FakeServer.wait_for_requests`
(a :class:`threading.Condition`), never a sleep.

Fault semantics (one fault is consumed per matching request):

``status``
    Answer with the given status, body and headers (``Retry-After`` etc.).
``hang``
    Read the request, then send nothing until ``stop()``: the client's
    connect/header timeout must fire.
``stall_body``
    Send the status line and headers with a ``Content-Length``, write part of
    the body, then block until ``stop()``: the client's body timeout must fire.
``disconnect_mid_body``
    Send the headers with ``Content-Length: N``, fewer than N body bytes, then
    close the socket (FIN): the client sees an incomplete read.
``close_without_response``
    Read the request and close the socket (FIN) without a byte of answer.
``reset``
    Read the request and abort the connection (RST, ``SO_LINGER`` 0).
``delay_headers``
    Send nothing until the test sets the given :class:`threading.Event` (or
    until ``stop()``), then answer normally.
``delay``
    Send nothing for ``seconds`` (or until ``stop()``), then answer normally:
    a slow service, for tests of what "slow" costs and for the benchmarks.

``when="before"`` (the default) applies the fault instead of the real handler:
the fake's state does not change.  ``when="after"`` runs the real handler first
(state changes, e.g. the gateway stores the record) and then applies the fault
to the delivery of the answer: ``status`` replaces the real answer,
``stall_body``/``disconnect_mid_body`` truncate the *real* body, ``hang``,
``close_without_response`` and ``reset`` lose it.  This is how tests produce
ambiguous failures where the write did happen.
"""

from __future__ import annotations

import email.utils
import http
import http.server
import json
import socket
import struct
import threading
import time
import traceback
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

__all__ = [
    "Fault",
    "FakeServer",
    "RecordedRequest",
    "Response",
    "refused_url",
    "unused_port",
]

FAULT_KINDS = (
    "status",
    "hang",
    "stall_body",
    "disconnect_mid_body",
    "close_without_response",
    "reset",
    "delay_headers",
    "delay",
)



def unused_port() -> int:
    """Return a TCP port on 127.0.0.1 on which nothing listens.

    The port is obtained by binding a socket to port 0 and closing it without
    ``listen()``; a connection attempt to it is refused.  (Another process could
    in principle take the port meanwhile; on a test machine that is negligible.)
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
    finally:
        sock.close()


def refused_url(path: str = "") -> str:
    """An ``http://127.0.0.1:PORT`` URL (plus ``path``) whose connection is refused."""
    return f"http://127.0.0.1:{unused_port()}{path}"


@dataclass(frozen=True)
class Fault:
    """One fault spec.  Build it with the class methods, e.g. ``Fault.status(503)``.

    Common keyword arguments of every constructor:

    ``when``
        ``"before"`` (default) or ``"after"`` the real handler (see module doc).
    ``path``
        Only requests whose path starts with this prefix consume the fault.
    ``method``
        Only requests with this HTTP method (case-insensitive) consume it.
    ``times``
        How many matching requests consume it (default 1); ``None`` = every
        matching request until :meth:`FakeServer.clear_faults`.
    """

    kind: str
    when: str = "before"
    path: str | None = None
    method: str | None = None
    times: int | None = 1
    status_code: int = 200
    body: bytes | None = None
    content_type: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    sent_bytes: int | None = None
    event: threading.Event | None = field(default=None, compare=False)
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}")
        if self.when not in ("before", "after"):
            raise ValueError("when must be 'before' or 'after'")
        if self.times is not None and self.times < 1:
            raise ValueError("times must be >= 1 or None")

    # -- constructors -----------------------------------------------------
    @classmethod
    def status(
        cls,
        code: int,
        body: Any = None,
        *,
        retry_after: str | int | None = None,
        content_type: str | None = None,
        headers: Mapping[str, str] | None = None,
        when: str = "before",
        path: str | None = None,
        method: str | None = None,
        times: int | None = 1,
    ) -> Fault:
        """An answer with status ``code``.

        ``body``: ``None`` lets the fake build its own error envelope for the
        code (gateway ``{"error": ...}``, Qdrant ``{"status": {"error": ...}}``,
        OpenAI ``{"error": {"message": ...}}``); ``bytes``/``str`` are sent as
        is; anything else is JSON-encoded.  ``retry_after`` becomes a
        ``Retry-After`` header (seconds or an HTTP date, sent verbatim).
        """
        hdrs = dict(headers or {})
        if retry_after is not None:
            hdrs["Retry-After"] = str(retry_after)
        raw, ctype = _encode_body(body, content_type)
        return cls(
            kind="status",
            when=when,
            path=path,
            method=method,
            times=times,
            status_code=code,
            body=raw,
            content_type=ctype,
            headers=tuple(hdrs.items()),
        )

    @classmethod
    def hang(cls, **common: Any) -> Fault:
        """Read the request and never answer until ``stop()``."""
        return cls(kind="hang", **common)

    @classmethod
    def stall_body(cls, body: Any = None, *, sent_bytes: int | None = None, status: int = 200,
                   content_type: str | None = None, **common: Any) -> Fault:
        """Headers + part of the body, then block until ``stop()``.

        With ``when="before"`` the answer is ``status`` with ``body`` (default:
        a small JSON document); with ``when="after"`` it is the real answer.
        ``sent_bytes`` (default: half the body) body bytes are written.
        """
        return cls._partial_body("stall_body", body, sent_bytes, status, content_type, common)

    @classmethod
    def disconnect_mid_body(cls, body: Any = None, *, sent_bytes: int | None = None, status: int = 200,
                            content_type: str | None = None, **common: Any) -> Fault:
        """Headers with ``Content-Length: N``, fewer than N bytes, then close."""
        return cls._partial_body("disconnect_mid_body", body, sent_bytes, status, content_type, common)

    @classmethod
    def _partial_body(cls, kind: str, body: Any, sent_bytes: int | None, status: int, content_type: str | None,
                      common: dict[str, Any]) -> Fault:
        raw, ctype = _encode_body(body, content_type)
        return cls(kind=kind, status_code=status, body=raw, content_type=ctype, sent_bytes=sent_bytes, **common)

    @classmethod
    def close_without_response(cls, **common: Any) -> Fault:
        """Read the request and close the connection without answering."""
        return cls(kind="close_without_response", **common)

    @classmethod
    def reset(cls, **common: Any) -> Fault:
        """Read the request and abort the connection with a TCP RST."""
        return cls(kind="reset", **common)

    @classmethod
    def delay_headers(cls, event: threading.Event, **common: Any) -> Fault:
        """Send nothing until ``event`` is set (or ``stop()``), then answer normally."""
        return cls(kind="delay_headers", event=event, **common)

    @classmethod
    def delay(cls, seconds: float, **common: Any) -> Fault:
        """Answer normally after ``seconds`` (``stop()`` ends the wait at once)."""
        return cls(kind="delay", seconds=float(seconds), **common)

    def matches(self, method: str, path: str) -> bool:
        if self.method is not None and self.method.upper() != method.upper():
            return False
        if self.path is not None and not path.startswith(self.path):
            return False
        return True


def _encode_body(body: Any, content_type: str | None) -> tuple[bytes | None, str | None]:
    if body is None:
        return None, content_type
    if isinstance(body, bytes):
        return body, content_type or "application/octet-stream"
    if isinstance(body, str):
        return body.encode("utf-8"), content_type or "text/plain; charset=utf-8"
    return json.dumps(body).encode("utf-8"), content_type or "application/json"


@dataclass
class Response:
    """An HTTP answer computed by a fake's handler."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(
        cls, obj: Any, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> Response:
        hdrs = {"Content-Type": "application/json"}
        hdrs.update(headers or {})
        body = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        return cls(status, body, hdrs)

    @classmethod
    def raw_json(
        cls, text: str, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> Response:
        """A JSON answer whose text the caller already encoded (fast paths)."""
        hdrs = {"Content-Type": "application/json"}
        hdrs.update(headers or {})
        return cls(status, text.encode("utf-8"), hdrs)

    @classmethod
    def text(
        cls, text: str, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> Response:
        hdrs = {"Content-Type": "text/plain; charset=utf-8"}
        hdrs.update(headers or {})
        return cls(status, text.encode("utf-8"), hdrs)


@dataclass
class RecordedRequest:
    """One request as the fake received it.

    ``headers`` has lower-cased names (the last value wins for repeated
    headers; ``header_list`` keeps them all).  ``query`` maps each parameter to
    its last value.  ``json`` is the parsed body, or ``None`` when the body is
    empty or not valid JSON (see ``json_ok``).  ``fault`` names the fault kind
    applied to this request, if any; ``status`` is the status line actually
    sent (``None`` when no status line was sent).
    """

    method: str
    path: str
    target: str
    query: dict[str, str]
    headers: dict[str, str]
    header_list: list[tuple[str, str]]
    body: bytes
    json: Any
    json_ok: bool
    index: int
    fault: str | None = None
    fault_when: str | None = None
    status: int | None = None

    def header(self, name: str, default: str | None = None) -> str | None:
        return self.headers.get(name.lower(), default)


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, fake: FakeServer) -> None:
        self.fake = fake
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Connection errors are the normal result of fault injection and of
        # clients giving up; anything else is worth a look in fake.errors.
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError, OSError)):
            return
        self.fake._note_error(traceback.format_exc())


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer
    _aborted = False

    # -- lifecycle --------------------------------------------------------
    def setup(self) -> None:
        super().setup()
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        if not self.server.fake._register_connection(self.connection):
            self._aborted = True

    def handle(self) -> None:
        if self._aborted:
            return
        super().handle()

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.server.fake._unregister_connection(self.connection)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        return

    # -- dispatch ---------------------------------------------------------
    def do_GET(self) -> None:
        self._dispatch()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_GET

    def _read_body(self) -> bytes:
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            chunks = []
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    raise ValueError("truncated chunked body")
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while True:  # trailers
                        trailer = self.rfile.readline(65537)
                        if trailer in (b"\r\n", b"\n", b""):
                            break
                    break
                data = self.rfile.read(size)
                if len(data) < size:
                    raise ValueError("truncated chunk")
                chunks.append(data)
                self.rfile.readline(3)
            return b"".join(chunks)
        length = self.headers.get("Content-Length")
        if not length:
            return b""
        n = int(length)
        if n < 0:
            raise ValueError("negative Content-Length")
        data = self.rfile.read(n)
        if len(data) < n:
            raise ValueError("truncated body")
        return data

    def _dispatch(self) -> None:
        fake = self.server.fake
        try:
            body = self._read_body()
        except ValueError:
            self.close_connection = True
            self._write_response(Response.text("bad request framing", 400))
            return
        req = fake._record(self.command, self.path, self.headers.items(), body)
        fault = fake._take_fault(req)
        if fault is not None:
            req.fault = fault.kind
            req.fault_when = fault.when
        if fault is not None and fault.when == "before":
            if fault.kind == "delay":
                if fake._stop_event.wait(fault.seconds):
                    self._drop(req)
                    return
            elif fault.kind == "delay_headers":
                if not fake._wait_for(fault.event):
                    self._drop(req)
                    return
            else:
                self._apply_fault(fault, req, None)
                return
        response = fake._safe_handle(req)
        if fault is not None and fault.when == "after":
            if fault.kind == "delay":
                if fake._stop_event.wait(fault.seconds):
                    self._drop(req)
                    return
            elif fault.kind == "delay_headers":
                if not fake._wait_for(fault.event):
                    self._drop(req)
                    return
            else:
                self._apply_fault(fault, req, response)
                return
        req.status = response.status
        self._write_response(response, head_only=self.command == "HEAD")
        fake._note_response()

    # -- faults -----------------------------------------------------------
    def _apply_fault(self, fault: Fault, req: RecordedRequest, real: Response | None) -> None:
        fake = self.server.fake
        kind = fault.kind
        if kind == "status":
            if fault.body is None:
                resp = fake.error_response(fault.status_code, _reason(fault.status_code))
            else:
                resp = Response(
                    fault.status_code,
                    fault.body,
                    {"Content-Type": fault.content_type or "application/octet-stream"},
                )
            for name, value in fault.headers:
                resp.headers[name] = value
            req.status = resp.status
            self._write_response(resp)
            fake._note_response()
            return
        if kind == "hang":
            fake._stop_event.wait()
            self._drop(req)
            return
        if kind == "close_without_response":
            self._drop(req)
            return
        if kind == "reset":
            self.close_connection = True
            try:
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.connection.close()
            except OSError:
                pass
            return
        if kind in ("stall_body", "disconnect_mid_body"):
            if real is None:
                body = fault.body if fault.body is not None else _default_stall_body()
                real = Response(
                    fault.status_code,
                    body,
                    {"Content-Type": fault.content_type or "application/json"},
                )
            sent = fault.sent_bytes if fault.sent_bytes is not None else len(real.body) // 2
            # always fewer bytes than announced: at most N-1 of an N-byte body
            # (an empty body is announced as one byte)
            sent = max(0, min(sent, len(real.body) - 1))
            declared = max(len(real.body), 1)
            req.status = real.status
            self.close_connection = True
            try:
                head = self._head_bytes(real.status, real.headers, declared, close=True)
                self.wfile.write(head + real.body[:sent])
                self.wfile.flush()
            except OSError:
                return
            if kind == "stall_body":
                fake._stop_event.wait()
            self._drop(req)
            return
        raise AssertionError(f"unhandled fault kind {kind}")

    def _drop(self, req: RecordedRequest) -> None:
        """Close the connection without (the rest of) an answer (FIN)."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # -- writing ----------------------------------------------------------
    def _head_bytes(
        self, status: int, headers: Mapping[str, str], length: int, *, close: bool
    ) -> bytes:
        lines = [f"HTTP/1.1 {status} {_reason(status)}"]
        names = {k.lower() for k in headers}
        for name, value in headers.items():
            if name.lower() in ("content-length", "connection"):
                continue
            lines.append(f"{name}: {value}")
        if "date" not in names:
            lines.append(f"Date: {email.utils.formatdate(usegmt=True)}")
        lines.append(f"Content-Length: {length}")
        if close:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _write_response(self, resp: Response, head_only: bool = False) -> None:
        try:
            head = self._head_bytes(
                resp.status, resp.headers, len(resp.body), close=self.close_connection
            )
            # One write: head and body in the same segment(s), no Nagle stall.
            self.wfile.write(head if head_only else head + resp.body)
            self.wfile.flush()
        except OSError:
            self.close_connection = True


def _reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _default_stall_body() -> bytes:
    return json.dumps({"padding": "x" * 256}).encode("utf-8")


class FakeServer:
    """Base class: a loopback HTTP server with recording and fault injection.

    Subclasses implement :meth:`handle_request` (and optionally
    :meth:`error_response` for the error envelope of ``Fault.status`` answers
    without an explicit body).

    Public API::

        srv = SomeFake(...).start()     # or: with SomeFake(...) as srv:
        srv.url                          # "http://127.0.0.1:PORT"
        srv.requests                     # snapshot list of RecordedRequest
        srv.wait_for_requests(n, timeout=2.0) -> bool
        srv.wait_for_responses(n, timeout=2.0) -> bool
        srv.inject(Fault.status(503, retry_after="2"), Fault.hang(), ...)
        srv.faults                       # pending faults (snapshot)
        srv.clear_faults(); srv.clear()  # clear() forgets recorded requests
        srv.errors                       # tracebacks of handler exceptions
        srv.stop()
    """

    #: how long stop() waits, in total, for handler threads to finish
    stop_join_timeout = 2.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._requests: list[RecordedRequest] = []
        self._request_counter = 0
        self._responses = 0
        self._faults: list[list[Any]] = []  # [Fault, remaining or None]
        self._errors: list[str] = []
        self._stop_event = threading.Event()
        self._conns: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self._httpd: _HTTPServer | None = None
        self._serve_thread: threading.Thread | None = None
        self._port: int | None = None

    # -- lifecycle --------------------------------------------------------
    def start(self) -> FakeServer:
        if self._httpd is not None or self._stop_event.is_set():
            raise RuntimeError("a FakeServer can be started once")
        self._httpd = _HTTPServer(self)
        self._port = int(self._httpd.server_address[1])
        self._serve_thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.01},  # bounds stop() latency
            name=f"{type(self).__name__}:{self._port}",
            daemon=True,
        )
        self._serve_thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, release every blocked fault, close every connection.

        Returns within a few tens of milliseconds in the normal case; handler
        threads are daemons and are joined with a bounded total timeout.
        """
        with self._lock:
            httpd = self._httpd
            self._httpd = None
            self._stop_event.set()
            conns = list(self._conns)
            threads = list(self._threads)
            self._cond.notify_all()
        if httpd is None:
            return
        httpd.shutdown()
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        httpd.server_close()
        deadline = time.monotonic() + self.stop_join_timeout
        if self._serve_thread is not None:
            self._serve_thread.join(max(0.0, deadline - time.monotonic()))
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("server not started")
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def stopped(self) -> bool:
        return self._stop_event.is_set()

    @property
    def active_connections(self) -> int:
        """Connections whose handler thread has not finished yet (0 after stop())."""
        with self._lock:
            return len(self._conns)

    # -- recording --------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def requests_to(self, path: str, method: str | None = None) -> list[RecordedRequest]:
        """Recorded requests whose path starts with ``path`` (and method matches)."""
        return [
            r
            for r in self.requests
            if r.path.startswith(path) and (method is None or r.method == method.upper())
        ]

    def clear(self) -> None:
        """Forget recorded requests and the response counter (not the faults)."""
        with self._lock:
            self._requests.clear()
            self._responses = 0

    def wait_for_requests(self, n: int, timeout: float = 2.0) -> bool:
        """Block until at least ``n`` requests were recorded (since the last clear).

        A request is recorded as soon as its headers and body were read, before
        any fault or handler runs.  Returns ``False`` on timeout or stop.
        """
        with self._cond:
            return self._cond.wait_for(
                lambda: len(self._requests) >= n or self._stop_event.is_set(), timeout
            ) and len(self._requests) >= n

    def wait_for_responses(self, n: int, timeout: float = 2.0) -> bool:
        """Block until at least ``n`` complete answers were written (since the last clear)."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._responses >= n or self._stop_event.is_set(), timeout
            ) and self._responses >= n

    @property
    def errors(self) -> list[str]:
        """Tracebacks of exceptions raised by handlers (answered with 500)."""
        with self._lock:
            return list(self._errors)

    # -- faults -----------------------------------------------------------
    def inject(self, *faults: Fault) -> None:
        """Append faults to the FIFO queue."""
        with self._lock:
            for fault in faults:
                if not isinstance(fault, Fault):
                    raise TypeError("inject() takes Fault instances")
                self._faults.append([fault, fault.times])

    @property
    def faults(self) -> list[Fault]:
        with self._lock:
            return [entry[0] for entry in self._faults]

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    # -- for subclasses ---------------------------------------------------
    def handle_request(self, req: RecordedRequest) -> Response:
        """Compute the answer to ``req``.  Runs on the connection's thread."""
        return Response.text("not found", 404)

    def error_response(self, status: int, message: str) -> Response:
        """The answer to ``Fault.status(code)`` without an explicit body."""
        return Response.json({"error": message}, status)

    # -- internals --------------------------------------------------------
    def _register_connection(self, conn: socket.socket) -> bool:
        with self._lock:
            if self._stop_event.is_set():
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return False
            self._conns.add(conn)
            self._threads.add(threading.current_thread())
            return True

    def _unregister_connection(self, conn: socket.socket) -> None:
        with self._lock:
            self._conns.discard(conn)
            self._threads.discard(threading.current_thread())

    def _record(
        self, method: str, target: str, header_items: Iterable[tuple[str, str]], body: bytes
    ) -> RecordedRequest:
        split = urllib.parse.urlsplit(target)
        path = urllib.parse.unquote(split.path)
        query = dict(urllib.parse.parse_qsl(split.query, keep_blank_values=True))
        header_list = [(k.lower(), v) for k, v in header_items]
        headers = dict(header_list)
        parsed: Any = None
        ok = False
        if body:
            try:
                parsed = json.loads(body)
                ok = True
            except ValueError:
                parsed = None
        with self._cond:
            self._request_counter += 1
            req = RecordedRequest(
                method=method.upper(),
                path=path,
                target=target,
                query=query,
                headers=headers,
                header_list=header_list,
                body=body,
                json=parsed,
                json_ok=ok,
                index=self._request_counter,
            )
            self._requests.append(req)
            self._cond.notify_all()
        return req

    def _note_response(self) -> None:
        with self._cond:
            self._responses += 1
            self._cond.notify_all()

    def _note_error(self, text: str) -> None:
        with self._lock:
            self._errors.append(text)

    def _take_fault(self, req: RecordedRequest) -> Fault | None:
        with self._lock:
            for i, entry in enumerate(self._faults):
                fault, remaining = entry
                if fault.matches(req.method, req.path):
                    if remaining is not None:
                        remaining -= 1
                        if remaining <= 0:
                            del self._faults[i]
                        else:
                            entry[1] = remaining
                    return fault
        return None

    def _safe_handle(self, req: RecordedRequest) -> Response:
        try:
            return self.handle_request(req)
        except Exception:  # a bug in a fake must surface, not hang the client
            self._note_error(traceback.format_exc())
            return self.error_response(500, "fake handler error")

    def _wait_for(self, event: threading.Event | None) -> bool:
        """Wait until ``event`` is set (True) or the server stops (False)."""
        if event is None:
            self._stop_event.wait()
            return False
        # Two events cannot be waited on together; a short bounded wait per
        # turn keeps stop() prompt without the test ever sleeping.
        while not self._stop_event.is_set():
            if event.wait(0.01):
                return not self._stop_event.is_set()
        return False

