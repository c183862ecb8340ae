"""An OpenAI-compatible embeddings client: ``POST {baseUrl}/embeddings``, one text at a time.

:meth:`EmbeddingsClient.embed` sends ``{"model", "input", "encoding_format": "float"}``
with ``Authorization: Bearer $QMEM_EMBEDDING_API_KEY`` when a key is set, and returns
the vector as floats — every element finite, or :class:`EmbeddingError`.  The caller
checks the dimension against the collection before searching.  Errors carry a category
(``embedding``, ``timeout``, ``parsing``, ``refused_key`` for a 401/403, ``breaker_open``) and never the URL,
the key, the text or a body.
"""

from __future__ import annotations

import math
import threading

from ..breaker import Breaker, SlowCall
from ..errors import QmemError
from .transport import HttpClient, TransportError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["EmbeddingsClient", "EmbeddingError"]

MAX_DIMENSION = 65_536


class EmbeddingError(QmemError):
    category = "embedding"


class EmbeddingsClient:
    def __init__(self, base_url: str, model: str, *, api_key: str | None, timeout_s: float,
                 breaker: Breaker | None = None, slow_s: float | None = None) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = HttpClient(base_url, connect_timeout=timeout_s, body_timeout=timeout_s, headers=headers,
                                service="embeddings service")
        self._model = model
        self._breaker = breaker
        self._slow_s = slow_s  # an answer slower than this counts toward the breaker like a failure

    def close(self) -> None:
        self._http.close()

    def embed(self, text: str, *, budget: float | None = None, cancel: threading.Event | None = None) -> list[float]:
        """The embedding of ``text``."""
        breaker = self._breaker
        if breaker is not None and not breaker.check().allowed:
            raise EmbeddingError("the embeddings service is marked unreachable (circuit breaker open)",
                                 category="breaker_open")
        body = {"model": self._model, "input": text, "encoding_format": "float"}
        watch = SlowCall(breaker, self._slow_s)
        failure: TransportError | None = None
        try:
            response = self._http.request("POST", "/embeddings", json_body=body, budget=budget, cancel=cancel)
        except TransportError as exc:
            failure = exc
        finally:
            watch.end()
        if failure is not None:
            if failure.kind == "cancelled":
                raise EmbeddingError(failure.message, category="cancellation") from None
            if failure.kind == "encoding":
                raise EmbeddingError(failure.message, category="parsing") from None  # nothing was sent
            watch.failed(failure.definitive)
            timeout = failure.kind in ("header_timeout", "body_timeout")
            raise EmbeddingError(failure.message, category="timeout" if timeout else "embedding") from None
        watch.succeeded()
        if response.status in (401, 403):
            raise EmbeddingError("the embeddings service refused the key (check QMEM_EMBEDDING_API_KEY)",
                                 category="refused_key")
        if response.status >= 400:
            raise EmbeddingError(f"the embeddings service refused the request ({response.status})")
        try:
            document = response.json()
        except TransportError:
            raise EmbeddingError("the embeddings answer is not JSON", category="parsing") from None
        return _vector(document)


def _vector(document: Any) -> list[float]:
    try:
        data = document["data"]
        items = sorted((item for item in data if isinstance(item, dict)), key=lambda item: item.get("index", 0))
        raw = items[0]["embedding"]
    except (KeyError, TypeError, IndexError, AttributeError):
        raise EmbeddingError("the embeddings answer has no embedding", category="parsing") from None
    if not isinstance(raw, list) or not 0 < len(raw) <= MAX_DIMENSION:
        raise EmbeddingError("the embedding is not a list of numbers", category="parsing")
    vector = []
    for value in raw:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise EmbeddingError("the embedding has a value that is not a finite number", category="parsing")
        vector.append(float(value))
    return vector
