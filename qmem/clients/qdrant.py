"""The runtime's Qdrant client: read-only by construction, three operations and no more.

:class:`ReadOnlyQdrant` can do exactly this, and nothing else exists on the runtime path:

* :meth:`~ReadOnlyQdrant.health` — ``GET /healthz``;
* :meth:`~ReadOnlyQdrant.collection_info` — ``GET /collections/{collection}``;
* :meth:`~ReadOnlyQdrant.search` — ``POST /collections/{collection}/points/search`` (or
  ``…/points/query`` when configured), always with ``with_payload: true`` and
  ``with_vector: false``.

There is no create, index, upsert, delete, scroll, update or generic request method: the
HTTP client is private and every request passes an allowlist of (method, path) built from
the configured collection, so even a bug elsewhere in qmem cannot send anything else.
``POST …/points/search`` is read-only by Qdrant's contract despite the verb; run the
runtime with a Qdrant key that cannot mutate, so the boundary holds twice.

Qdrant's real answers are handled: the ``{"result", "status", "time"}`` envelope,
``{"status": {"error": …}}`` errors, plain-text 401/403 bodies, 404 for a missing
collection, 400/422 validation errors, unnamed (``{"size", "distance"}``) and named
(``{"dense": {…}}``) vector configurations.  Errors (:class:`QdrantError`) carry a
category and never the URL, the key, the query vector or a response body.
"""

from __future__ import annotations

import math
import threading
from urllib.parse import quote

from ..breaker import Breaker, SlowCall
from ..errors import QmemError
from ..valueclass import dataclass
from .transport import HttpClient, Response, TransportError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

__all__ = ["ReadOnlyQdrant", "CollectionInfo", "ScoredPoint", "QdrantError"]


class QdrantError(QmemError):
    """A Qdrant call failed.  ``category``: ``retrieval``, ``timeout``, ``parsing``, ``refused_key``
    (a 401/403: the key is missing or wrong) or ``breaker_open`` (nothing was sent)."""

    category = "retrieval"


@dataclass(frozen=True)
class CollectionInfo:
    dimension: int
    distance: str
    vector_name: str | None  # None: the collection has one unnamed vector
    points_count: int | None
    status: str | None


@dataclass(frozen=True)
class ScoredPoint:
    id: str
    score: float
    payload: Mapping[str, Any]


def _vector_params(params: Any) -> tuple[int, str] | None:
    if isinstance(params, dict) and isinstance(params.get("size"), int) and isinstance(params.get("distance"), str):
        return params["size"], params["distance"]
    return None


def parse_collection_info(result: Any, vector_name: str | None) -> CollectionInfo:
    """Read dimension, distance and the vector to use from ``GET /collections/{c}``'s result."""
    try:
        vectors = result["config"]["params"]["vectors"]
    except (KeyError, TypeError):
        raise QdrantError("Qdrant's collection info has no vector configuration", category="parsing") from None
    unnamed = _vector_params(vectors)
    if unnamed is not None:
        if vector_name is not None:
            raise QdrantError("the collection has one unnamed vector but a vectorName is configured",
                              category="configuration")
        name, (dimension, distance) = None, unnamed
    elif isinstance(vectors, dict) and vectors:
        named = {key: _vector_params(value) for key, value in vectors.items()}
        if vector_name is None:
            if len(named) != 1:
                raise QdrantError("the collection has several named vectors; configure recall.vectorName",
                                  category="configuration")
            vector_name = next(iter(named))
        params = named.get(vector_name)
        if params is None:
            raise QdrantError("the configured vectorName is not a vector of the collection", category="configuration")
        name, (dimension, distance) = vector_name, params
    else:
        raise QdrantError("Qdrant's collection info has no usable vector configuration", category="parsing")
    points = result.get("points_count") if isinstance(result, dict) else None
    status = result.get("status") if isinstance(result, dict) else None
    return CollectionInfo(dimension=dimension, distance=distance, vector_name=name,
                          points_count=points if isinstance(points, int) else None,
                          status=status if isinstance(status, str) else None)


def _point_id(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 0:
        return str(value)
    if isinstance(value, str) and 0 < len(value) <= 64:
        return value
    return None


class ReadOnlyQdrant:
    """Health, collection info and search on one collection; see the module docstring."""

    __slots__ = ("__http", "__allowed", "__collection_path", "__search_path", "__endpoint", "__breaker", "__slow_s")

    def __init__(self, url: str, collection: str, *, api_key: str | None, search_endpoint: str,
                 timeout_s: float, breaker: Breaker | None = None, slow_s: float | None = None) -> None:
        if search_endpoint not in ("search", "query"):
            raise ValueError("search_endpoint must be 'search' or 'query'")
        headers = {"api-key": api_key} if api_key else {}
        self.__http = HttpClient(url, connect_timeout=timeout_s, body_timeout=timeout_s, headers=headers,
                                 service="Qdrant server")
        self.__collection_path = f"/collections/{quote(collection, safe='')}"
        self.__search_path = f"{self.__collection_path}/points/{search_endpoint}"
        self.__endpoint = search_endpoint
        self.__allowed = frozenset({("GET", "/healthz"), ("GET", self.__collection_path),
                                    ("POST", self.__search_path)})
        self.__breaker = breaker
        # An answer slower than this counts toward the breaker like a failure (recall.waitMs): a
        # service that always answers, but too late to be used, must stop costing every turn.
        self.__slow_s = slow_s

    def close(self) -> None:
        self.__http.close()

    def health(self, *, budget: float | None = None) -> bool:
        """True when ``GET /healthz`` answers 200."""
        return self.__call("GET", "/healthz", budget=budget).status == 200

    def collection_info(self, vector_name: str | None = None, *, budget: float | None = None,
                        cancel: threading.Event | None = None) -> CollectionInfo:
        """Dimension, distance and vector name of the collection (``vector_name`` as configured)."""
        response = self.__call("GET", self.__collection_path, budget=budget, cancel=cancel)
        return parse_collection_info(self.__result(response), vector_name)

    def search(self, vector: Sequence[float], *, query_filter: Mapping[str, Any], limit: int,
               vector_name: str | None = None, budget: float | None = None,
               cancel: threading.Event | None = None) -> list[ScoredPoint]:
        """The ``limit`` nearest points that pass ``query_filter``, with payloads, without vectors."""
        if not vector or not all(isinstance(x, float) and math.isfinite(x) for x in vector):
            raise QdrantError("the query vector is empty or not finite", category="parsing")
        if self.__endpoint == "search":
            body: dict[str, Any] = {"vector": {"name": vector_name, "vector": list(vector)} if vector_name
                                    else list(vector)}
        else:
            body = {"query": list(vector)}
            if vector_name:
                body["using"] = vector_name
        body.update(filter=dict(query_filter), limit=int(limit), with_payload=True, with_vector=False)
        result = self.__result(self.__call("POST", self.__search_path, json_body=body, budget=budget, cancel=cancel))
        if self.__endpoint == "query":
            result = result.get("points") if isinstance(result, dict) else None
        if not isinstance(result, list):
            raise QdrantError("Qdrant's search answer has no list of points", category="parsing")
        points = []
        for item in result:
            if not isinstance(item, dict):
                continue
            point_id, score, payload = _point_id(item.get("id")), item.get("score"), item.get("payload")
            if point_id is None or isinstance(score, bool) or not isinstance(score, (int, float)) \
                    or not math.isfinite(score) or not isinstance(payload, dict):
                continue  # not a point qmem can vouch for
            points.append(ScoredPoint(id=point_id, score=float(score), payload=payload))
        return points

    # -- private

    def __call(self, method: str, path: str, *, json_body: Any = None, budget: float | None,
               cancel: threading.Event | None = None) -> Response:
        if (method, path) not in self.__allowed:
            raise QdrantError("that Qdrant request is not allowed on the runtime path")
        breaker = self.__breaker
        if breaker is not None:
            decision = breaker.check()
            if not decision.allowed:
                raise QdrantError("Qdrant is marked unreachable (circuit breaker open)", category="breaker_open")
        watch = SlowCall(breaker, self.__slow_s)
        failure: TransportError | None = None
        try:
            response = self.__http.request(method, path, json_body=json_body, budget=budget, cancel=cancel)
        except TransportError as exc:
            failure = exc
        finally:
            watch.end()
        if failure is not None:
            if failure.kind == "cancelled":
                raise QdrantError(failure.message, category="cancellation") from None  # says nothing about Qdrant
            if failure.kind == "encoding":
                raise QdrantError(failure.message, category="parsing") from None  # nothing was sent
            watch.failed(failure.definitive)
            timeout = failure.kind in ("header_timeout", "body_timeout")
            raise QdrantError(failure.message, category="timeout" if timeout else "retrieval") from None
        watch.succeeded()
        if response.status >= 400:
            raise QdrantError(_error_message(response),
                              category="refused_key" if response.status in (401, 403) else "retrieval")
        return response

    @staticmethod
    def __result(response: Response) -> Any:
        try:
            document = response.json()
        except TransportError:
            raise QdrantError("Qdrant answered with a body that is not JSON", category="parsing") from None
        if not isinstance(document, dict) or "result" not in document:
            raise QdrantError("Qdrant's answer has no result envelope", category="parsing")
        return document["result"]


def _error_message(response: Response) -> str:
    """A one-line reason for a 4xx from Qdrant, without echoing its body."""
    if response.status in (401, 403):
        return f"Qdrant refused the API key ({response.status}; check QMEM_QDRANT_API_KEY)"
    if response.status == 404:
        return "the recall collection does not exist in Qdrant (404)"
    if response.status in (400, 422):
        return f"Qdrant refused the request as invalid ({response.status})"
    return f"Qdrant answered {response.status}"
