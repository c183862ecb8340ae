"""HTTP for qmem's clients: two deadlines, bounded answers, redacted errors.

Promises:

* **Two phases, two deadlines.**  Resolving the name (on a thread the caller stops waiting
  for at the deadline: the C resolver takes no timeout), connecting, sending the request and receiving the
  response headers must finish within ``connect_timeout`` — if not, the failure is
  *definitive* (nobody is answering).  Reading the body must then finish within
  ``body_timeout`` — if not, the failure is *ambiguous* (the server is alive but slow).
  Both are total deadlines, enforced on every read, so a server that drips bytes cannot
  stretch them.
* **A body that does not complete is an error**, never an empty success.  Bodies larger
  than ``max_response_bytes`` are refused.
* **Connections are reused** per client (one origin), with a small pool for threads.
* **TLS is verified** with the system's trust store; **redirects are never followed**, so
  a credential header never reaches another host.
* **Errors carry a category and a phase, never the URL, headers, body or key.**
  :class:`TransportError` says what happened and whether the request may have been
  delivered (``sent``), which is what decides between "safe to say it failed" and
  "retry with the same Idempotency-Key".
* **What a server says comes back without qmem's keys.**  :meth:`Response.json` and
  :meth:`Response.text` are the ways into an answer, and both replace every configured
  credential's value, in each form a server can echo it, and every 12-character piece of one, with
  ``[redacted]`` — a record's own text losing only whole keys
  (:mod:`qmem.clients.knownkeys`: the process environment's keys plus the key this client sends),
  before a caller can show, return or store any of it.  ``Response.body`` is the raw
  answer, for a parser with needs of its own, which then redacts with ``Response.known``.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import socket
import ssl
import threading
import time
from urllib.parse import urlencode, urlsplit

from ..errors import QmemError, one_line
from ..valueclass import dataclass, field
from .knownkeys import KnownKeys, known_keys
from .progressline import wait_observer

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["HttpClient", "Response", "TransportError"]

MAX_RESPONSE_BYTES = 16 * 1024 * 1024
MAX_RETRY_AFTER_S = 300.0

#: TransportError kinds.  Definitive: nothing answered.  Ambiguous: something answered badly.
DEFINITIVE_KINDS = frozenset({"connect", "dns", "tls", "header_timeout"})
AMBIGUOUS_KINDS = frozenset({"body_timeout", "disconnect", "http_status"})


class TransportError(QmemError):
    """A request failed.  ``kind`` is one of:

    ``dns``, ``connect``, ``tls`` (nothing was sent); ``header_timeout`` (sent, no answer
    in time); ``body_timeout``, ``disconnect`` (an answer started and did not complete);
    ``http_status`` (a 5xx or 429 answer, see ``status`` and ``retry_after``);
    ``redirect``, ``too_large``, ``protocol`` (an answer qmem will not use);
    ``encoding`` (the request itself could not be encoded: nothing was sent); ``cancelled``.
    """

    category = "transport"

    def __init__(self, message: str, *, kind: str, sent: bool, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.sent = sent
        self.status = status
        self.retry_after = retry_after

    @property
    def definitive(self) -> bool:
        """Nobody answered: the service is down or unreachable."""
        return self.kind in DEFINITIVE_KINDS

    @property
    def ambiguous(self) -> bool:
        """Something answered badly or slowly: worth a bounded retry."""
        return self.kind in AMBIGUOUS_KINDS


_NO_KEYS = KnownKeys(())


@dataclass(frozen=True)
class Response:
    """One answer.  Read it with :meth:`json` or :meth:`text`, which redact qmem's keys."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)  # lower-cased names
    body: bytes = b""  # raw: whoever parses it directly redacts with ``known``
    known: KnownKeys = field(default=_NO_KEYS, repr=False)

    def json(self) -> Any:
        """The decoded JSON body, every string redacted; TransportError(kind="protocol") if it is not JSON."""
        try:
            document = json.loads(self.body.decode("utf-8")) if self.body else None
        except (UnicodeDecodeError, ValueError):
            raise TransportError(f"the service answered {self.status} with a body that is not JSON",
                                 kind="protocol", sent=True, status=self.status) from None
        return self.known.redact_document(document)

    def text(self, limit: int = 300) -> str:
        """The body as bounded, single-line, redacted text (for services that answer plain text)."""
        text = self.known.redact(self.body[: limit * 4].decode("utf-8", "replace"))
        return one_line(text, limit)


def parse_retry_after(value: str | None, *, now: float | None = None, cap: float = MAX_RETRY_AFTER_S) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta-seconds or HTTP date), capped."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), cap)
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if moment is None or moment.tzinfo is None:
        return None
    delay = moment.timestamp() - (time.time() if now is None else now)
    return min(max(delay, 0.0), cap)


# --- deadline-aware sockets --------------------------------------------------------------

class _Cancelled(Exception):
    """The caller's cancel event was set while a request was in flight."""


#: With a cancel event, a blocking read wakes at least this often to look at it.
CANCEL_POLL_S = 0.1


class _Deadline:
    """A per-connection deadline (and optional cancel event) that every read and write honours."""

    def __init__(self) -> None:
        self.at: float | None = None
        self.cancel: threading.Event | None = None

    def remaining(self) -> float | None:
        if self.cancel is not None and self.cancel.is_set():
            raise _Cancelled()
        if self.at is None:
            return None if self.cancel is None else CANCEL_POLL_S
        left = self.at - time.monotonic()
        if left <= 0:
            raise socket.timeout("deadline reached")
        return left if self.cancel is None else min(left, CANCEL_POLL_S)


def _with_deadline(deadline: _Deadline, operation: Any) -> Any:
    """Run a blocking socket operation, waking to honour the deadline and the cancel event."""
    while True:
        try:
            return operation(deadline.remaining())
        except socket.timeout:
            if deadline.cancel is None:
                raise
            deadline.remaining()  # raises once cancelled or out of time; otherwise wait again


class _DeadlineSocket(socket.socket):
    deadline: _Deadline

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:  # type: ignore[override]
        def read(timeout: float | None) -> int:
            self.settimeout(timeout)
            return socket.socket.recv_into(self, buffer, nbytes, flags)
        return _with_deadline(self.deadline, read)

    def sendall(self, data: Any, flags: int = 0) -> None:  # type: ignore[override]
        self.settimeout(self.deadline.remaining())
        super().sendall(data, flags)


class _DeadlineSSLSocket(ssl.SSLSocket):
    deadline: _Deadline

    def recv_into(self, buffer: Any, nbytes: int | None = None, flags: int = 0) -> int:  # type: ignore[override]
        def read(timeout: float | None) -> int:
            self.settimeout(timeout)
            return ssl.SSLSocket.recv_into(self, buffer, nbytes, flags)  # type: ignore[arg-type]
        return _with_deadline(self.deadline, read)

    def sendall(self, data: Any, flags: int = 0) -> None:  # type: ignore[override]
        self.settimeout(self.deadline.remaining())
        super().sendall(data, flags)


def _is_address(host: str) -> bool:
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
            return True
        except (OSError, ValueError):
            continue
    return False


def _resolve(host: str, port: int, deadline: _Deadline) -> list[Any]:
    """``getaddrinfo`` within the deadline.

    The C resolver takes no timeout, and a name server that never answers would hold the
    caller for as long as the system's resolver likes (retries included), outside every
    deadline here.  So a name is looked up on a daemon thread, and the caller waits for it
    only as long as the deadline (and the cancel event) allow; a lookup that outlives it is
    left to finish on its own.  An address needs no lookup and gets no thread.
    """
    if _is_address(host):
        return socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST)
    done = threading.Event()
    box: list[Any] = []

    def lookup() -> None:
        try:
            box.append(socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM))
        except BaseException as exc:  # handed to the waiting caller
            box.append(exc)
        done.set()

    threading.Thread(target=lookup, name="qmem-dns", daemon=True).start()
    try:
        _with_deadline(deadline, lambda timeout: done.wait(timeout) or _raise_timeout())
    except socket.timeout:
        raise TransportError("the service's host name could not be resolved in time", kind="dns",
                             sent=False) from None
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]


def _raise_timeout() -> None:
    raise socket.timeout("lookup still running")


def _connect(host: str, port: int, deadline: _Deadline) -> _DeadlineSocket:
    """Resolve and connect within the deadline, trying each address like create_connection."""
    try:
        infos = _resolve(host, port, deadline)
    except (socket.gaierror, UnicodeError):
        # UnicodeError: a host name IDNA cannot encode; to the caller it is a name that does not resolve.
        raise TransportError("the service's host name could not be resolved", kind="dns", sent=False) from None
    last: OSError | None = None
    for family, kind, proto, _, address in infos:
        sock = _DeadlineSocket(family, kind, proto)
        sock.deadline = deadline
        try:
            sock.settimeout(deadline.remaining() if deadline.cancel is None else
                            (max(deadline.at - time.monotonic(), 0.001) if deadline.at else None))
            sock.connect(address)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except OSError as exc:
            sock.close()
            last = exc
    raise last if last is not None else OSError("no address to connect to")


class _Connection(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, deadline: _Deadline, tls: ssl.SSLContext | None) -> None:
        super().__init__(host, port)
        self._deadline = deadline
        self._tls = tls

    def connect(self) -> None:
        sock = _connect(self.host, self.port, self._deadline)
        if self._tls is not None:
            try:
                sock = self._tls.wrap_socket(sock, server_hostname=self.host)  # type: ignore[assignment]
            except ssl.SSLError:
                raise TransportError("the TLS handshake with the service failed (certificate not trusted?)",
                                     kind="tls", sent=False) from None
            sock.deadline = self._deadline
        self.sock = sock


def _tls_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.sslsocket_class = _DeadlineSSLSocket
    return context


# --- the client --------------------------------------------------------------------------

class HttpClient:
    """Requests to one origin (``base_url``), with pooled keep-alive connections.

    ``connect_timeout`` and ``body_timeout`` are in seconds.  ``headers`` are sent with
    every request (an ``Authorization`` header lives here, never in a message).  The
    ``service`` name ("Memory Gateway", "Qdrant server" …) is the only identity errors mention.
    """

    def __init__(self, base_url: str, *, connect_timeout: float, body_timeout: float,
                 headers: Mapping[str, str] | None = None, service: str = "service",
                 max_response_bytes: int = MAX_RESPONSE_BYTES, pool_size: int = 4) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("base_url must be an http(s) URL")
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._prefix = parts.path.rstrip("/")
        self._tls = _tls_context() if parts.scheme == "https" else None
        self.connect_timeout = connect_timeout
        self.body_timeout = body_timeout
        self.service = service
        self.max_response_bytes = max_response_bytes
        self._headers = {"Accept": "application/json", "User-Agent": "qmem", **(headers or {})}
        self._own_keys = tuple(_credentials_in(self._headers))
        self._pool: list[tuple[_Connection, _Deadline]] = []
        self._pool_size = pool_size
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, []
        for conn, _ in pool:
            conn.close()

    def __enter__(self) -> "HttpClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _take(self) -> tuple[_Connection, _Deadline, bool]:
        with self._lock:
            if self._pool:
                conn, deadline = self._pool.pop()
                return conn, deadline, True
        deadline = _Deadline()
        return _Connection(self._host, self._port, deadline, self._tls), deadline, False

    def _give_back(self, conn: _Connection, deadline: _Deadline) -> None:
        deadline.at = None
        deadline.cancel = None
        with self._lock:
            if len(self._pool) < self._pool_size:
                self._pool.append((conn, deadline))
                return
        conn.close()

    def request(self, method: str, path: str, *, json_body: Any = None, query: Mapping[str, Any] | None = None,
                headers: Mapping[str, str] | None = None, budget: float | None = None,
                cancel: threading.Event | None = None) -> Response:
        """Send one request and read the whole answer.

        Returns any answer with a status below 500 except 429 (callers interpret 4xx);
        raises :class:`TransportError` for everything else.  A reused keep-alive
        connection that the server closed meanwhile is retried once on a fresh one,
        which is safe because that request never reached the server.  ``budget`` (seconds)
        caps both deadlines for this request, for callers with a time budget of their own;
        setting ``cancel`` ends the request within about 0.1 s (TransportError kind ``cancelled``).
        """
        target = self._prefix + path
        if query:
            target += "?" + urlencode({k: v for k, v in query.items() if v is not None})
        body = None
        all_headers = dict(self._headers)
        if json_body is not None:
            try:
                body = json.dumps(json_body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            except (UnicodeError, ValueError):
                raise TransportError(f"the request to the {self.service} could not be encoded", kind="encoding",
                                     sent=False) from None
            all_headers["Content-Type"] = "application/json"
        all_headers.update(headers or {})
        observer = wait_observer()
        if observer is None:
            return self._send(method, target, body, all_headers, budget, cancel)
        with observer(self.service, self.connect_timeout + self.body_timeout if budget is None else budget):
            return self._send(method, target, body, all_headers, budget, cancel)

    def _send(self, method: str, target: str, body: bytes | None, all_headers: Mapping[str, str],
              budget: float | None, cancel: threading.Event | None) -> Response:
        for attempt in (1, 2):
            conn, deadline, reused = self._take()
            deadline.cancel = cancel
            try:
                return self._exchange(conn, deadline, method, target, body, all_headers, budget)
            except _Cancelled:
                conn.close()
                raise TransportError(f"the request to the {self.service} was cancelled", kind="cancelled",
                                     sent=True) from None
            except _StaleConnection:
                conn.close()
                if attempt == 2 or not reused:
                    # A fresh connection closed without an answer: the request may have been handled.
                    raise TransportError(f"the {self.service} closed the connection without answering",
                                         kind="disconnect", sent=True) from None
            except TransportError as exc:
                conn.close()
                if attempt == 2 and not exc.sent:
                    # The first attempt's bytes went out on the stale connection: whatever the fresh
                    # one says, the request may have been delivered once.
                    exc.sent = True
                raise
            except BaseException:
                conn.close()
                raise
        raise AssertionError("unreachable")

    def _exchange(self, conn: _Connection, deadline: _Deadline, method: str, target: str, body: bytes | None,
                  headers: Mapping[str, str], budget: float | None = None) -> Response:
        service = self.service
        started = time.monotonic()
        connect_timeout = self.connect_timeout if budget is None else min(self.connect_timeout, budget)
        deadline.at = started + connect_timeout
        sent = False
        try:
            if conn.sock is None:
                conn.connect()
            conn.request(method, target, body=body, headers=dict(headers))
            sent = True
            raw = conn.getresponse()
        except TransportError:
            raise
        except (socket.timeout, TimeoutError):
            if sent:
                raise TransportError(f"the {service} did not answer within {connect_timeout:g} s",
                                     kind="header_timeout", sent=True) from None
            raise TransportError(f"could not connect to the {service} within {connect_timeout:g} s",
                                 kind="connect", sent=False) from None
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            # On a reused keep-alive connection this usually means the server had closed it
            # while idle; request() retries once on a fresh connection.
            raise _StaleConnection() from None
        except ConnectionRefusedError:
            raise TransportError(f"the {service} refused the connection", kind="connect", sent=False) from None
        except (UnicodeError, ValueError):
            if sent:
                raise TransportError(f"the {service} sent a malformed answer", kind="protocol", sent=True) from None
            # A header value http.client will not encode (a credential with a newline or non-Latin-1
            # character): nothing was sent, and the service's health is unknown.
            raise TransportError(f"the request to the {self.service} could not be encoded (check the API key "
                                 f"variable for stray characters)", kind="encoding", sent=False) from None
        except ssl.SSLError:
            raise TransportError(f"the TLS connection to the {service} failed", kind="tls", sent=sent) from None
        except http.client.HTTPException:
            raise TransportError(f"the {service} sent a malformed answer", kind="protocol", sent=True) from None
        except OSError as exc:
            raise TransportError(f"could not reach the {service} ({exc.__class__.__name__})",
                                 kind="connect" if not sent else "disconnect", sent=sent) from None

        body_timeout = self.body_timeout
        if budget is not None:
            body_timeout = max(min(body_timeout, budget - (time.monotonic() - started)), 0.001)
        deadline.at = time.monotonic() + body_timeout
        status = raw.status
        response_headers = {name.lower(): value for name, value in raw.getheaders()}
        def abandon() -> None:
            # The response holds its own reference to the socket: close both, or the socket
            # lingers until garbage collection.
            raw.close()
            conn.close()

        try:
            length = raw.length
            if length is not None and length > self.max_response_bytes:
                raise TransportError(f"the {service}'s answer is too large", kind="too_large", sent=True,
                                     status=status)
            data = self._read_body(raw, status)
        except (TransportError, _Cancelled):
            abandon()
            raise
        except (socket.timeout, TimeoutError):
            abandon()
            raise TransportError(f"the {service}'s answer did not complete within {body_timeout:g} s",
                                 kind="body_timeout", sent=True, status=status) from None
        except (http.client.IncompleteRead, ConnectionError, OSError, http.client.HTTPException):
            abandon()
            raise TransportError(f"the {service}'s answer was cut off", kind="disconnect", sent=True,
                                 status=status) from None
        if raw.will_close:
            conn.close()
        else:
            self._give_back(conn, deadline)
        if 300 <= status < 400:
            raise TransportError(f"the {service} answered with a redirect, which qmem does not follow "
                                 f"(configure the final address)", kind="redirect", sent=True, status=status)
        if status >= 500 or status == 429:
            raise TransportError(f"the {service} answered {status}", kind="http_status", sent=True, status=status,
                                 retry_after=parse_retry_after(response_headers.get("retry-after")))
        return Response(status=status, headers=response_headers, body=data,
                        known=known_keys(extra=self._own_keys))


    def _read_body(self, raw: http.client.HTTPResponse, status: int) -> bytes:
        if raw.length is not None and not raw.chunked:
            # A Content-Length already checked against the cap: one read, and read() without
            # an amount raises IncompleteRead when fewer bytes arrive.
            return raw.read()
        # read(amt) returns a short read at EOF instead of raising, so completeness is
        # checked here: a Content-Length not fully received is a cut-off answer.
        chunks: list[bytes] = []
        total = 0
        while True:
            piece = raw.read(min(1 << 16, self.max_response_bytes + 1 - total))
            if not piece:
                break
            chunks.append(piece)
            total += len(piece)
            if total > self.max_response_bytes:
                raise TransportError(f"the {self.service}'s answer is too large", kind="too_large", sent=True,
                                     status=status)
        if raw.length:  # bytes announced but never received
            raise http.client.IncompleteRead(b"".join(chunks), raw.length)
        return b"".join(chunks)


#: Request headers whose value is (or ends with) a credential.
_CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key"})


def _credentials_in(headers: Mapping[str, str]) -> list[str]:
    """The credential values this client sends: ``api-key: K`` gives K, ``Authorization: Bearer K`` gives K."""
    values = []
    for name, value in headers.items():
        if name.lower() in _CREDENTIAL_HEADERS:
            scheme, _, credential = value.strip().partition(" ")
            values.append(credential.strip() if name.lower().endswith("authorization") and credential.strip()
                          else value.strip())
    return values


class _StaleConnection(Exception):
    """A kept-alive connection the server had closed: nothing was delivered."""
