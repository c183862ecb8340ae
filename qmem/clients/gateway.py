"""The Memory Gateway client (DESIGN §6): breaker-gated, bounded retries, typed answers.

Promises:

* Every call first asks the :class:`~qmem.breaker.Breaker`.  While it is open the call
  raises :class:`GatewayUnavailable` (``breaker_open``, ``retry_in_ms``) in microseconds,
  without touching the network.
* Definitive failures (connect, DNS, TLS, header timeout) are not retried and open the
  breaker.  Ambiguous ones (5xx, 429, slow or cut-off bodies) are retried at most
  ``retries`` times, honouring ``Retry-After`` up to ``max_retry_wait_s``; the breaker
  counts the call once, after its retries.  A longer ``Retry-After`` is not worth blocking
  an agent turn for: the call gives up at once, without sleeping, and the breaker stays
  open for the time the gateway asked, so later calls and flushes wait as asked — up to
  :data:`~qmem.clients.transport.MAX_RETRY_AFTER_S` (5 minutes): a gateway asking for more (a year)
  must not switch qmem off.
* A 4xx answer other than 429 closes the breaker: the gateway is alive and said no.  It
  becomes :class:`GatewayRefused` (with the gateway's ``error`` code and a bounded
  detail), :class:`GatewayUnauthorized` or :class:`GatewayDuplicate` (409, with the matched
  id).  A 2xx closes it only when its body keeps the contract (JSON of the expected shape);
  any other body is an ambiguous failure — counted toward the breaker like a 5xx — never data.
* Errors say ``sent`` when any attempt may have reached the gateway: a write that fails
  that way must be retried with the same Idempotency-Key, never reported as lost.
* Nothing the gateway says reaches a caller with a credential in it.  Every answer is read
  through :class:`~qmem.clients.transport.Response`, which redacts qmem's own keys by value; and the
  error types clean the server's words themselves (:func:`~qmem.clients.knownkeys.safe_server_text`:
  keys by value, other credentials by shape, one bounded line) when they are built, so a
  :class:`GatewayRefused`'s ``code``, ``detail``, message and outbox ``reason``, and a
  :class:`GatewayDuplicate`'s ``matched_id``, are safe whichever path raised them.
"""

from __future__ import annotations

import time
from urllib.parse import quote

from ..breaker import Breaker
from ..errors import QmemError
from .knownkeys import safe_server_text
from .transport import HttpClient, Response, TransportError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = [
    "GatewayClient", "GatewayUnavailable", "GatewayRefused", "GatewayUnauthorized", "GatewayDuplicate",
    "GatewayNotFound",
]

MAX_DETAIL_CHARS = 200
MAX_CODE_CHARS = 60
#: A matched id is shown and kept whole up to this length (gateway ids are UUIDs).
MAX_ID_CHARS = 200


class GatewayError(QmemError):
    category = "gateway"


class GatewayUnavailable(GatewayError):
    """The gateway could not be asked or did not answer usefully.

    ``kind`` is the transport kind (``connect``, ``header_timeout``, ``http_status`` …),
    ``breaker_open`` when no request was made because the breaker is open,
    ``not_configured`` when there is no gateway URL.
    """

    def __init__(self, message: str, *, kind: str, sent: bool, breaker_open: bool = False,
                 retry_in_ms: int = 0, status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.sent = sent
        self.breaker_open = breaker_open
        self.retry_in_ms = retry_in_ms
        self.status = status

    def to_json(self) -> dict[str, Any]:
        """The shape tools report: ``error: "gateway_unreachable"`` plus why."""
        return {"error": "gateway_unreachable", "reason": self.kind, "breaker_open": self.breaker_open,
                "retry_in_ms": self.retry_in_ms}


class GatewayRefused(GatewayError):
    """The gateway answered 4xx: it is alive and said no."""

    def __init__(self, message: str, *, status: int, code: str | None = None, detail: str | None = None) -> None:
        # code and detail are the server's words, and the message may quote them: all three are cleaned here.
        super().__init__(safe_server_text(message, 2 * MAX_DETAIL_CHARS))
        self.status = status
        self.code = safe_server_text(code, MAX_CODE_CHARS) or None if code else None
        self.detail = safe_server_text(detail, MAX_DETAIL_CHARS) or None if detail else None

    @property
    def reason(self) -> str:
        """A bounded one-line reason for a failed outbox record."""
        parts = [f"{self.status}", self.code or "refused"]
        if self.detail:
            parts.append(self.detail)
        return " ".join(parts)


class GatewayUnauthorized(GatewayRefused):
    """401/403: the API key is missing, wrong or not allowed."""


class GatewayNotFound(GatewayRefused):
    """404: no such record."""


class GatewayDuplicate(GatewayRefused):
    """409 on create: the gateway already holds a similar record, ``matched_id``."""

    def __init__(self, matched_id: str) -> None:
        matched_id = safe_server_text(matched_id, MAX_ID_CHARS, data=True)  # kept as the record's duplicate_of
        super().__init__(f"the gateway already holds a similar record ({matched_id})", status=409, code="duplicate")
        self.matched_id = matched_id


def _detail(payload: Any) -> tuple[str | None, str | None]:
    """The gateway's ``error`` code and a bounded one-line ``detail``."""
    if not isinstance(payload, dict):
        return None, None
    code = payload.get("error") if isinstance(payload.get("error"), str) else None
    detail = payload.get("detail")
    if isinstance(detail, list):  # FastAPI validation: [{"loc": [...], "msg": "..."}]
        bits = []
        for item in detail[:3]:
            if isinstance(item, dict) and isinstance(item.get("msg"), str):
                loc = item.get("loc")
                field = loc[-1] if isinstance(loc, list) and loc else None
                bits.append(f"{field}: {item['msg']}" if isinstance(field, str) else item["msg"])
        detail = "; ".join(bits) or None
    elif not isinstance(detail, str):
        detail = None
    # Bounded and cleaned before the message quotes them (the error types clean again what they keep).
    if code:
        code = safe_server_text(code, MAX_CODE_CHARS) or None
    if detail:
        detail = safe_server_text(detail, MAX_DETAIL_CHARS) or None
    return code, detail


class GatewayClient:
    """A client of one Memory Gateway.  Times are in seconds."""

    def __init__(self, url: str, api_key: str | None, *, breaker: Breaker, connect_timeout: float,
                 timeout: float, retries: int = 2, max_retry_wait_s: float = 5.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = HttpClient(url, connect_timeout=connect_timeout, body_timeout=timeout, headers=headers,
                                service="Memory Gateway")
        self._attempt_s = 2 * (connect_timeout + timeout)  # an attempt, with its one retry on a fresh connection
        self.breaker = breaker
        self.retries = retries
        self.max_retry_wait_s = max_retry_wait_s
        self._sleep = sleep

    def close(self) -> None:
        self._http.close()

    def lease_s(self, calls: int) -> float:
        """How long to hold records that ``calls`` calls send, so that no flusher sends them meanwhile:
        longer than those calls can take (every attempt timing out, and the waits between retries),
        with 30 s to spare.  A holder that dies is taken over sooner (its process is gone)."""
        longest_call = (self.retries + 1) * self._attempt_s + self.retries * self.max_retry_wait_s
        return calls * longest_call + 30

    # -- the contract

    def status(self) -> dict[str, Any]:
        return self._answer(self._call("GET", "/v1/status"), _is_object,
                            "the Memory Gateway's status answer is not an object")

    def create(self, body: Mapping[str, Any], idempotency_key: str) -> dict[str, Any]:
        response = self._call("POST", "/v1/memories", json_body=dict(body),
                              headers={"Idempotency-Key": idempotency_key})
        if response.status == 409:
            payload = _safe_json(response)
            matched = payload.get("id") if isinstance(payload, dict) else None
            if isinstance(matched, str) and matched:
                raise GatewayDuplicate(matched)
        return self._answer(response, _has_id, "the Memory Gateway accepted the record but its answer has no id")

    def search(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._answer(self._call("POST", "/v1/memories:search", json_body=dict(body)), _lists("results"),
                            "the Memory Gateway's search answer has no results list")

    def get(self, record_id: str) -> dict[str, Any]:
        return self._answer(self._call("GET", f"/v1/memories/{quote(record_id, safe='')}"),
                            lambda record: isinstance(record, dict) and record.get("id") == record_id,
                            "the Memory Gateway answered with another record")

    def export(self, cursor: str | None, limit: int) -> dict[str, Any]:
        return self._answer(self._call("GET", "/v1/memories:export", query={"cursor": cursor, "limit": limit}),
                            _lists("items"), "the Memory Gateway's export answer has no items list")

    def meta(self) -> dict[str, Any]:
        return self._answer(self._call("GET", "/v1/meta"), _is_object,
                            "the Memory Gateway's meta answer is not an object")

    # -- plumbing

    def _answer(self, response: Response, keeps_contract: Callable[[Any], bool], broken: str) -> Any:
        """The JSON of an answer that keeps the contract; the breaker hears how it went.

        A 4xx raises (the breaker was told the gateway is alive).  A 2xx whose body is not
        JSON, or not of the shape ``keeps_contract`` expects, is an ambiguous failure: a
        gateway answering garbage with 200 must trip the breaker as surely as one answering 502.
        """
        payload = self._json(response)
        if not keeps_contract(payload):
            self.breaker.ambiguous_failure()
            raise GatewayUnavailable(broken, kind="protocol", sent=True, status=response.status)
        self.breaker.success()
        return payload

    def _json(self, response: Response) -> Any:
        if response.status >= 400:
            code, detail = _detail(_safe_json(response))
            message = f"the Memory Gateway refused the request ({response.status}{' ' + code if code else ''})"
            if response.status in (401, 403):
                raise GatewayUnauthorized("the Memory Gateway refused the API key (check QMEM_GATEWAY_API_KEY)",
                                          status=response.status, code=code, detail=detail)
            if response.status == 404:
                raise GatewayNotFound("the Memory Gateway has no such record", status=404, code=code, detail=detail)
            raise GatewayRefused(message + (f": {detail}" if detail else ""), status=response.status, code=code,
                                 detail=detail)
        try:
            return response.json()
        except TransportError:
            self.breaker.ambiguous_failure()
            raise GatewayUnavailable(f"the Memory Gateway answered {response.status} with a body that is not JSON",
                                     kind="protocol", sent=True, status=response.status) from None

    def _call(self, method: str, path: str, **kwargs: Any) -> Response:
        """One call: the breaker's leave, then at most ``retries`` retries of ambiguous failures.

        The breaker hears about the *call* once, when it ends: a refusal (alive), one failure
        (so ``breakerTripAfter`` counts calls, not attempts), or a ``Retry-After`` longer than
        this client waits, which holds it open for that long (capped by the transport).  A
        2xx is judged by :meth:`_answer` once its body is read.  ``sent`` on the error is
        true when any attempt may have reached the gateway.
        """
        decision = self.breaker.check()
        if not decision.allowed:
            raise _breaker_open(decision.retry_in_ms, sent=False)
        attempt = 0
        sent = False
        while True:
            try:
                response = self._http.request(method, path, **kwargs)
            except TransportError as exc:
                sent = sent or exc.sent
                if exc.kind in ("cancelled", "encoding"):
                    # Said nothing about the gateway's health: the breaker is not told.
                    raise GatewayUnavailable(exc.message, kind=exc.kind, sent=sent) from None
                wait = exc.retry_after if exc.retry_after is not None else 0.2 * (2 ** attempt)
                if exc.ambiguous and not decision.probe and attempt < self.retries and wait <= self.max_retry_wait_s:
                    self._sleep(wait)
                    attempt += 1
                    decision = self.breaker.check()
                    if not decision.allowed:  # another process opened it meanwhile
                        raise _breaker_open(decision.retry_in_ms, sent=sent) from None
                    continue
                window = self._record_failure(exc, probe=decision.probe)
                raise GatewayUnavailable(exc.message, kind=exc.kind, sent=sent, breaker_open=bool(window),
                                         retry_in_ms=window, status=exc.status) from None
            if not 200 <= response.status < 300:
                self.breaker.success()  # a refusal: alive; a 2xx is judged by its body (_answer)
            return response

    def _record_failure(self, exc: TransportError, *, probe: bool) -> int:
        """Tell the breaker how this call failed; the window it opened in ms (0: still closed)."""
        if exc.definitive or probe:
            window = self.breaker.definitive_failure()
        else:
            window = self.breaker.ambiguous_failure()
        if exc.retry_after is not None and exc.retry_after > self.max_retry_wait_s:
            # The gateway asked for a pause longer than a turn can wait: honour it for everyone.
            window = max(window, self.breaker.hold(int(exc.retry_after * 1000)))
        return window


def _breaker_open(retry_in_ms: int, *, sent: bool) -> GatewayUnavailable:
    return GatewayUnavailable("the Memory Gateway is marked unreachable (circuit breaker open)",
                              kind="breaker_open", sent=sent, breaker_open=True, retry_in_ms=retry_in_ms)


def _is_object(payload: Any) -> bool:
    return isinstance(payload, dict)


def _has_id(payload: Any) -> bool:
    return isinstance(payload, dict) and isinstance(payload.get("id"), str) and bool(payload["id"])


def _lists(key: str) -> Callable[[Any], bool]:
    return lambda payload: isinstance(payload, dict) and isinstance(payload.get(key), list)


def _safe_json(response: Response) -> Any:
    try:
        return response.json()
    except TransportError:
        return None
