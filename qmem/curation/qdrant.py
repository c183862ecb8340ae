"""The admin CLI's two Qdrant clients, each able to do its own job and nothing else.

* :class:`SourceProjection` is the Hermes source as the importer sees it: collection
  info (``GET /collections/{c}``) and scroll (``POST /collections/{c}/points/scroll``).
  No mutation method exists on it, so the source is never modified by qmem; give it a
  read-only key (``QMEM_SOURCE_QDRANT_API_KEY``) so that this holds twice.
* :class:`AdminQdrant` is the destination as ``init`` and an approved import see it:
  collection info, create the collection, create a keyword index, and upsert points with
  ``wait=true``.  There is no delete, reset, payload update or generic request.

The technique is :class:`qmem.clients.qdrant.ReadOnlyQdrant`'s: the HTTP client is private to a
channel whose allowlist of (method, path) is fixed when the client is built, so not even a
bug elsewhere can send another request.  Neither client uses the runtime's circuit
breakers: an operator wants the real answer, and an admin run should not make the
agent's recall fail fast.

Errors (:class:`AdminQdrantError`, category ``source`` or ``destination``) are one line
naming the side and, for a refused key, the variable to check; never the URL, the key, a
request or a response body.  Scroll pages are parsed with ``NaN``/``Infinity`` (which
Python's ``json`` would otherwise accept) turned into :data:`NON_FINITE`, a value every
check of :mod:`qmem.curation.hermespoint` rejects, so such a point is rejected rather than
imported.  The scroll also checks that ids only move forward in Qdrant's order, which
guarantees it ends and that no point is read twice, in constant memory.
"""

from __future__ import annotations

import json
from urllib.parse import quote

from ..clients.transport import HttpClient, Response, TransportError
from ..errors import QmemError
from ..valueclass import dataclass
from .hermespoint import parse_source_id

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from typing import Any

__all__ = []

#: Scroll pages carry whole vectors: allow larger answers than the transport's default.
MAX_PAGE_BYTES = 64 * 1024 * 1024

_SIDES = {
    "source": ("the Hermes source Qdrant", "QMEM_SOURCE_QDRANT_API_KEY"),
    "destination": ("the destination Qdrant", "QMEM_ADMIN_QDRANT_API_KEY"),
}


class AdminQdrantError(QmemError):
    """A request to the source (``category="source"``) or the destination failed."""

    category = "destination"


class _NonFinite:
    """``NaN``, ``Infinity`` or ``-Infinity`` in a source page: not a JSON number, so refused."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<non-finite number>"


NON_FINITE = _NonFinite()


def _non_finite(_constant: str) -> _NonFinite:
    return NON_FINITE


def parse_page(body: bytes) -> Any:
    """A scroll answer's JSON; ``NaN``/``Infinity`` become :data:`NON_FINITE`.  ValueError if not JSON."""
    # parse_constant is consulted only for those three literals, so the C parser keeps its speed.
    return json.loads(body, parse_constant=_non_finite)


@dataclass(frozen=True)
class VectorParams:
    dimension: int
    distance: str


@dataclass(frozen=True)
class CollectionLayout:
    """What ``GET /collections/{c}`` says about a collection's shape."""

    vectors: Mapping[str | None, VectorParams]  # None: the collection's one unnamed vector
    points: int | None
    indexes: Mapping[str, str]  # payload field -> data type ("keyword", …)

    @property
    def named(self) -> bool:
        return None not in self.vectors

    def to_json(self) -> dict[str, Any]:
        return {
            "vectors": [{"name": name, "dimension": p.dimension, "distance": p.distance}
                        for name, p in self.vectors.items()],
            "points": self.points,
            "indexes": dict(sorted(self.indexes.items())),
        }


def _vector_params(value: Any) -> VectorParams | None:
    if isinstance(value, dict):
        size, distance = value.get("size"), value.get("distance")
        if type(size) is int and size > 0 and isinstance(distance, str):
            return VectorParams(size, distance)
    return None


def parse_collection_layout(result: Any, *, side: str = "destination") -> CollectionLayout:
    """Read vectors, point count and payload indexes from a collection-info result."""
    try:
        vectors = result["config"]["params"]["vectors"]
    except (KeyError, TypeError):
        raise AdminQdrantError(f"{_SIDES[side][0]} sent collection info without a vector configuration",
                               category=side) from None
    unnamed = _vector_params(vectors)
    if unnamed is not None:
        layout: dict[str | None, VectorParams] = {None: unnamed}
    elif isinstance(vectors, dict) and vectors:
        layout = {}
        for name, params in vectors.items():
            parsed = _vector_params(params)
            if parsed is None:
                raise AdminQdrantError(f"{_SIDES[side][0]} sent a vector configuration qmem cannot read",
                                       category=side)
            layout[name] = parsed
    else:
        raise AdminQdrantError(f"{_SIDES[side][0]} sent a vector configuration qmem cannot read", category=side)
    points = result.get("points_count")
    indexes = {}
    schema = result.get("payload_schema")
    if isinstance(schema, dict):
        for name, info in schema.items():
            if isinstance(name, str) and isinstance(info, dict) and isinstance(info.get("data_type"), str):
                indexes[name] = info["data_type"]
    return CollectionLayout(vectors=layout, points=points if type(points) is int else None, indexes=indexes)


# --- the allowlisted channel -------------------------------------------------------------------

class _Channel:
    """An HTTP client that sends only the (method, path) pairs it was built with."""

    __slots__ = ("__http", "__allowed", "__side")

    def __init__(self, url: str, *, side: str, api_key: str | None, allowed: frozenset[tuple[str, str]],
                 connect_timeout: float, body_timeout: float, max_response_bytes: int) -> None:
        headers = {"api-key": api_key} if api_key else {}
        self.__http = HttpClient(url, connect_timeout=connect_timeout, body_timeout=body_timeout, headers=headers,
                                 service=_SIDES[side][0].removeprefix("the "), max_response_bytes=max_response_bytes)
        self.__allowed = allowed
        self.__side = side

    def send(self, method: str, path: str, *, json_body: Any = None, query: Mapping[str, str] | None = None,
             missing_ok: bool = False) -> Response | None:
        """The answer; None for a 404 when ``missing_ok``; AdminQdrantError otherwise."""
        side = self.__side
        if (method, path) not in self.__allowed:
            raise AdminQdrantError(f"that request is not allowed towards {_SIDES[side][0]}", category=side)
        try:
            response = self.__http.request(method, path, json_body=json_body, query=query)
        except TransportError as exc:
            raise AdminQdrantError(exc.message, category=side) from None
        if response.status == 404 and missing_ok:
            return None
        if response.status >= 400:
            raise AdminQdrantError(_refusal(response.status, side), category=side)
        return response

    def close(self) -> None:
        self.__http.close()


def _refusal(status: int, side: str) -> str:
    """A one-line reason for a 4xx, without echoing the body."""
    name, variable = _SIDES[side]
    if status == 401:
        return f"{name} refused the API key (401); check {variable}"
    if status == 403:
        if side == "destination":
            return f"{name} refused the request (403); {variable} must be a key with write access"
        return f"{name} refused the request (403); check {variable}"
    if status == 404:
        return f"{name} has no such collection (404)"
    if status == 409:
        return f"{name} reports a conflict (409): the collection was created meanwhile"
    if status in (400, 422):
        return f"{name} refused the request as invalid ({status})"
    return f"{name} answered {status}"


def _result(response: Response, side: str) -> Any:
    try:
        document = response.known.redact_document(json.loads(response.body) if response.body else None)
    except ValueError:
        raise AdminQdrantError(f"{_SIDES[side][0]} answered with a body that is not JSON", category=side) from None
    if not isinstance(document, dict) or "result" not in document:
        raise AdminQdrantError(f"{_SIDES[side][0]}'s answer has no result envelope", category=side)
    return document["result"]


def _collection_path(collection: str) -> str:
    return f"/collections/{quote(collection, safe='')}"


# --- the source ----------------------------------------------------------------------------------

class SourceProjection:
    """Collection info and scroll on the Hermes source collection; see the module docstring."""

    __slots__ = ("__channel", "__info_path", "__scroll_path")

    def __init__(self, url: str, collection: str, *, api_key: str | None, connect_timeout: float,
                 body_timeout: float) -> None:
        self.__info_path = _collection_path(collection)
        self.__scroll_path = self.__info_path + "/points/scroll"
        self.__channel = _Channel(url, side="source", api_key=api_key,
                                  allowed=frozenset({("GET", self.__info_path), ("POST", self.__scroll_path)}),
                                  connect_timeout=connect_timeout, body_timeout=body_timeout,
                                  max_response_bytes=MAX_PAGE_BYTES)

    def close(self) -> None:
        self.__channel.close()

    def collection_info(self) -> CollectionLayout | None:
        """The source collection's layout, or None when it does not exist."""
        response = self.__channel.send("GET", self.__info_path, missing_ok=True)
        if response is None:
            return None
        return parse_collection_layout(_result(response, "source"), side="source")

    def points(self, *, vector_name: str | None, payload_fields: Sequence[str], page_size: int) -> Iterator[Any]:
        """Every point of the collection, in Qdrant's order, with the listed payload fields and one vector.

        Only ``payload_fields`` are asked for (the allowlist is applied at the source too);
        the importer still drops anything else that arrives.
        """
        body: dict[str, Any] = {"limit": page_size, "with_payload": list(payload_fields),
                                "with_vector": [vector_name] if vector_name is not None else True}
        offset: Any = None
        offset_key: tuple[int, int] | None = None
        last_key: tuple[int, int] | None = None
        while True:
            if offset is not None:
                body["offset"] = offset
            response = self.__channel.send("POST", self.__scroll_path, json_body=body)
            assert response is not None
            try:
                document = response.known.redact_document(parse_page(response.body))
            except ValueError:
                raise AdminQdrantError("the Hermes source Qdrant sent a page that is not JSON",
                                       category="source") from None
            result = document.get("result") if isinstance(document, dict) else None
            page = result.get("points") if isinstance(result, dict) else None
            if not isinstance(page, list):
                raise AdminQdrantError("the Hermes source Qdrant sent a scroll answer without points",
                                       category="source")
            for point in page:
                parsed = parse_source_id(point.get("id")) if isinstance(point, dict) else None
                if parsed is not None:  # an invalid id is the importer's to reject, not an order problem
                    key = parsed[1]
                    if (last_key is not None and key <= last_key) or (offset_key is not None and key < offset_key):
                        raise _out_of_order()
                    last_key = key
                yield point
            offset = result.get("next_page_offset")
            if offset is None:
                return
            parsed = parse_source_id(offset)
            if parsed is None:
                raise AdminQdrantError("the Hermes source Qdrant sent an invalid next page offset", category="source")
            # Each page must move forward: this is what makes the scroll end.
            if (last_key is not None and parsed[1] <= last_key) or (offset_key is not None and parsed[1] <= offset_key):
                raise _out_of_order()
            offset_key = parsed[1]


def _out_of_order() -> AdminQdrantError:
    return AdminQdrantError("the Hermes source Qdrant's scroll went backwards or repeated a point; "
                            "nothing was planned", category="source")


# --- the destination -----------------------------------------------------------------------------

class AdminQdrant:
    """Collection info, create collection, create keyword index, upsert: the destination, nothing more."""

    __slots__ = ("__channel", "__collection_path", "__index_path", "__points_path")

    def __init__(self, url: str, collection: str, *, api_key: str | None, connect_timeout: float,
                 body_timeout: float) -> None:
        self.__collection_path = _collection_path(collection)
        self.__index_path = self.__collection_path + "/index"
        self.__points_path = self.__collection_path + "/points"
        allowed = frozenset({("GET", self.__collection_path), ("PUT", self.__collection_path),
                             ("PUT", self.__index_path), ("PUT", self.__points_path)})
        self.__channel = _Channel(url, side="destination", api_key=api_key, allowed=allowed,
                                  connect_timeout=connect_timeout, body_timeout=body_timeout,
                                  max_response_bytes=MAX_PAGE_BYTES)

    def close(self) -> None:
        self.__channel.close()

    def collection_info(self) -> CollectionLayout | None:
        """The destination collection's layout, or None when it does not exist."""
        response = self.__channel.send("GET", self.__collection_path, missing_ok=True)
        if response is None:
            return None
        return parse_collection_layout(_result(response, "destination"))

    def create_collection(self, *, dimension: int, distance: str, vector_name: str | None) -> None:
        params = {"size": dimension, "distance": distance}
        vectors = {vector_name: params} if vector_name is not None else params
        response = self.__channel.send("PUT", self.__collection_path, json_body={"vectors": vectors})
        assert response is not None
        if _result(response, "destination") is not True:
            raise AdminQdrantError("the destination Qdrant did not confirm creating the collection")

    def create_keyword_index(self, field_name: str) -> None:
        self.__write(self.__index_path, {"field_name": field_name, "field_schema": "keyword"})

    def upsert(self, points: Sequence[Mapping[str, Any]]) -> None:
        """Write ``points`` (``{"id", "vector", "payload"}``) and return once Qdrant has applied them."""
        self.__write(self.__points_path, {"points": list(points)})

    def __write(self, path: str, body: Mapping[str, Any]) -> None:
        response = self.__channel.send("PUT", path, json_body=body, query={"wait": "true"})
        assert response is not None
        result = _result(response, "destination")
        if not isinstance(result, dict) or result.get("status") != "completed":
            raise AdminQdrantError("the destination Qdrant did not confirm the write as completed")
