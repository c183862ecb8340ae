"""A fake Qdrant REST server (shapes from Qdrant's OpenAPI v1.18 and its sources).

Envelopes (as real Qdrant):

* success: ``{"result": ..., "status": "ok", "time": <seconds>}``;
* error: ``{"status": {"error": "<message>"}, "time": <seconds>}`` with
  404 ``Not found: Collection `x` doesn't exist!``,
  400 ``Wrong input: Vector dimension error: expected dim: N, got M``,
  400 ``Wrong input: Not existing vector name error: <name>``,
  400 ``Format error in JSON body: ...`` (malformed JSON, a value of the wrong
  type such as ``with_vector: "yes"``, a missing required field, an invalid
  filter condition),
  400 ``Content type error`` (a body without ``Content-Type: application/json``),
  422 ``Validation error in JSON body: [limit: value 0 invalid, must be 1 or larger]``,
  409 ``Wrong input: Collection `x` already exists!``.
  (Real Qdrant answers 400, not 422, for dimension / vector-name / type errors;
  422 is only for the validator's range checks.  The fake follows Qdrant.)
* ``GET /healthz`` (also ``/livez``, ``/readyz``): ``text/plain`` body
  ``healthz check passed``; like ``GET /`` it needs no API key.

API keys (``keys={"admin-key": "rw", "read-key": "r"}``; ``None`` = no auth).
The key is read from the ``api-key`` header, else from
``Authorization: Bearer <key>``.  With ``auth_style="current"`` (default,
Qdrant >= 1.9 — what 1.18 does):

* no key -> **401** ``text/plain`` ``Must provide an API key or an Authorization bearer token``;
* unknown key -> **401** ``text/plain`` ``Invalid API key or JWT``;
* a read-only key on a mutation -> **403** JSON envelope
  ``{"status": {"error": "Forbidden: Global manage access is required"}, ...}``.

With ``auth_style="legacy"`` (Qdrant <= 1.8's middleware) every one of these is a
**403** ``text/plain`` answer (``Invalid API key or JWT`` for a read-only key
on a mutation).  A mutation is any request except GET and the read-only POSTs
(``points`` retrieve, ``points/search``, ``points/query``, ``points/scroll``,
``points/count``, ``points/recommend``, ``points/discover``, ``facet`` and
their ``/batch``/``/groups`` forms), exactly Qdrant's list.

Endpoints: ``GET /``, ``GET /collections``, ``GET|PUT|DELETE /collections/{c}``,
``GET /collections/{c}/exists``, ``PUT /collections/{c}/index``,
``DELETE /collections/{c}/index/{field}``, ``PUT /collections/{c}/points``
(upsert, ``{"points": [...]}`` or ``{"batch": {...}}``), ``POST
/collections/{c}/points`` (retrieve), ``GET /collections/{c}/points/{id}``,
``POST /collections/{c}/points/delete``, ``POST|PUT
/collections/{c}/points/payload``, ``POST /collections/{c}/points/search``,
``.../points/query``, ``.../points/scroll``, ``.../points/count``.  Anything
else: 404 with an empty body (actix's default).

Deliberate simplifications:

* Ids: unsigned ints or UUID strings (any form ``uuid.UUID`` parses, echoed
  canonical lower-case).  Ordering for scroll/query-without-vector: ints
  ascending, then UUIDs ascending by value — Qdrant's order.
* Filters: ``must``/``should``/``must_not``/``min_should`` (nested filters
  too) with ``{"key", "match": {"value"|"any"|"except"|"text"}}``,
  ``{"key", "range"}``, ``{"key", "is_empty"|"is_null": true}``,
  ``{"is_empty": {"key"}}``, ``{"is_null": {"key"}}``, ``{"has_id": [...]}``.
  Matching is exact and type-sensitive (``"active "`` != ``"active"``,
  ``1`` != ``true``); an array payload value matches if any element does;
  dotted keys descend into objects.  ``ignore_filter=True`` validates and
  records filters but returns points as if there were none (a leaking server).
* Scores: Cosine (the query is normalized; stored vectors are divided by their
  norm, so vectors added through hooks need not be unit length — vectors
  upserted over HTTP are normalized on write like Qdrant does), Dot, Euclid
  and Manhattan (distances ascending; ``score_threshold`` is then an upper
  bound).  Exact brute force in pure Python; fine for small fixtures.
* ``query``: ``query`` may be a dense vector, ``{"nearest": vector}`` or
  absent (points by id); other query kinds answer 400.
* Performance: vectors are stored by reference (don't mutate a list after
  handing it over) and the JSON text of up to 4096 distinct vector *objects*
  is cached, so a 100,000-point collection built from a small pool of shared
  vector lists scrolls ``with_vector: true`` quickly.
"""

from __future__ import annotations

import bisect
import json
import math
import threading
import time
import uuid
from collections import OrderedDict
from typing import Any, Iterable, Mapping

from .http_fake import FakeServer, RecordedRequest, Response

__all__ = ["FakeQdrant", "QdrantError", "is_read_only_request"]

DISTANCES = ("Cosine", "Euclid", "Dot", "Manhattan")
PAYLOAD_TYPES = ("keyword", "integer", "float", "geo", "text", "bool", "datetime", "uuid")

_READ_ONLY_POST_SUFFIXES = (
    ("points",),
    ("points", "count"),
    ("points", "discover"),
    ("points", "discover", "batch"),
    ("points", "recommend"),
    ("points", "recommend", "batch"),
    ("points", "recommend", "groups"),
    ("points", "scroll"),
    ("points", "search"),
    ("points", "search", "batch"),
    ("points", "search", "groups"),
    ("points", "search", "matrix", "pairs"),
    ("points", "search", "matrix", "offsets"),
    ("points", "query"),
    ("points", "query", "batch"),
    ("points", "query", "groups"),
    ("facet",),
)

_CONDITION_HELP = (
    "Expected some form of condition, which can be a field condition (like "
    '{"key": ..., "match": ... }), or some other mentioned in the documentation: '
    "https://qdrant.tech/documentation/concepts/filtering/#filtering-conditions"
)


def is_read_only_request(method: str, path: str) -> bool:
    """Qdrant's rule: GET, or a POST to one of the read-only patterns."""
    method = method.upper()
    if method in ("GET", "HEAD"):
        return True
    if method != "POST":
        return False
    parts = [p for p in path.split("/") if p]
    if len(parts) < 3 or parts[0] != "collections":
        return False
    return tuple(parts[2:]) in _READ_ONLY_POST_SUFFIXES


class QdrantError(Exception):
    """Raised inside the fake; becomes an error envelope with ``status``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _format_error(msg: str) -> QdrantError:
    return QdrantError(400, f"Format error in JSON body: {msg}")


def _bad_input(msg: str) -> QdrantError:
    return QdrantError(400, f"Wrong input: {msg}")


def _validation_error(msg: str) -> QdrantError:
    return QdrantError(422, f"Validation error in JSON body: [{msg}]")


def _not_found_collection(name: str) -> QdrantError:
    return QdrantError(404, f"Not found: Collection `{name}` doesn't exist!")


# --------------------------------------------------------------------- ids
def parse_point_id(value: Any) -> int | str:
    """Canonical point id: a non-negative int or a canonical UUID string."""
    if isinstance(value, bool):
        raise _format_error(f"value {json.dumps(value)} is not a valid point ID")
    if isinstance(value, int):
        if value < 0:
            raise _format_error(
                f"value {value} is not a valid point ID, valid values are either an "
                "unsigned integer or a UUID"
            )
        return value
    if isinstance(value, str):
        try:
            return str(uuid.UUID(value))
        except ValueError:
            raise _format_error(
                f"value {value} is not a valid point ID, valid values are either an "
                "unsigned integer or a UUID"
            ) from None
    raise _format_error(
        f"value {json.dumps(value)} is not a valid point ID, valid values are either an "
        "unsigned integer or a UUID"
    )


def point_id_sort_key(pid: int | str) -> tuple[int, int]:
    if isinstance(pid, int):
        return (0, pid)
    return (1, uuid.UUID(pid).int)


# ------------------------------------------------------------------ storage
class _Point:
    __slots__ = ("id", "vector", "payload", "version", "norms")

    def __init__(self, pid: int | str, vector: Any, payload: dict[str, Any], version: int) -> None:
        self.id = pid
        self.vector = vector  # list[float] (unnamed) or dict[str, list[float]] (named)
        self.payload = payload
        self.version = version
        self.norms: dict[str, float] = {}

    def vector_for(self, name: str) -> list[float] | None:
        if isinstance(self.vector, dict):
            return self.vector.get(name)
        return self.vector if name == "" else None

    def norm(self, name: str) -> float:
        cached = self.norms.get(name)
        if cached is None:
            vec = self.vector_for(name) or []
            cached = math.sqrt(math.fsum(x * x for x in vec))
            self.norms[name] = cached
        return cached


class _Collection:
    def __init__(self, name: str, vectors: dict[str, dict[str, Any]], named: bool) -> None:
        self.name = name
        self.vectors = vectors  # {"": params} when unnamed
        self.named = named
        self.points: dict[int | str, _Point] = {}
        self.payload_schema: dict[str, str] = {}
        self.status = "green"
        self._sorted: list[int | str] | None = None
        self._sort_keys: list[tuple[int, int]] | None = None

    def vectors_config(self) -> dict[str, Any]:
        if self.named:
            return {n: dict(p) for n, p in self.vectors.items()}
        return dict(self.vectors[""])

    def sorted_ids(self) -> tuple[list[int | str], list[tuple[int, int]]]:
        if self._sorted is None or self._sort_keys is None:
            ids = sorted(self.points, key=point_id_sort_key)
            self._sorted = ids
            self._sort_keys = [point_id_sort_key(i) for i in ids]
        return self._sorted, self._sort_keys

    def invalidate(self) -> None:
        self._sorted = None
        self._sort_keys = None


# ------------------------------------------------------------------ filters
_FILTER_KEYS = ("must", "should", "must_not", "min_should")


def check_filter(flt: Any) -> None:
    """Raise a 400 format error if ``flt`` is not a filter the fake understands."""
    if flt is None:
        return
    if not isinstance(flt, dict):
        raise _format_error("invalid type: expected struct Filter")
    for key in flt:
        if key not in _FILTER_KEYS:
            raise _format_error(
                f"unknown field `{key}`, expected one of `should`, `min_should`, `must`, `must_not`"
            )
    for key in ("must", "should", "must_not"):
        conds = flt.get(key)
        if conds is None:
            continue
        for cond in conds if isinstance(conds, list) else [conds]:
            _check_condition(cond)
    ms = flt.get("min_should")
    if ms is not None:
        if (
            not isinstance(ms, dict)
            or not isinstance(ms.get("conditions"), list)
            or isinstance(ms.get("min_count"), bool)
            or not isinstance(ms.get("min_count"), int)
        ):
            raise _format_error("invalid type: expected struct MinShould")
        for cond in ms["conditions"]:
            _check_condition(cond)


def _check_condition(cond: Any) -> None:
    if not isinstance(cond, dict):
        raise _format_error(_CONDITION_HELP)
    if "key" in cond:
        if not isinstance(cond["key"], str):
            raise _format_error(_CONDITION_HELP)
        match = cond.get("match")
        rng = cond.get("range")
        if match is not None:
            if not isinstance(match, dict) or len(match) != 1:
                raise _format_error(_CONDITION_HELP)
            (mkind, mval), = match.items()
            if mkind == "value":
                if isinstance(mval, float) or not isinstance(mval, (str, int, bool)):
                    raise _format_error(_CONDITION_HELP)
            elif mkind in ("any", "except"):
                if not isinstance(mval, list):
                    raise _format_error(_CONDITION_HELP)
            elif mkind in ("text", "phrase"):
                if not isinstance(mval, str):
                    raise _format_error(_CONDITION_HELP)
            else:
                raise _format_error(_CONDITION_HELP)
        elif rng is not None:
            if not isinstance(rng, dict) or not set(rng) <= {"gt", "gte", "lt", "lte"}:
                raise _format_error(_CONDITION_HELP)
        elif cond.get("is_empty") is not None or cond.get("is_null") is not None:
            pass
        else:
            raise _format_error(_CONDITION_HELP)
        return
    if "is_empty" in cond or "is_null" in cond:
        inner = cond.get("is_empty", cond.get("is_null"))
        if not isinstance(inner, dict) or not isinstance(inner.get("key"), str):
            raise _format_error(_CONDITION_HELP)
        return
    if "has_id" in cond:
        if not isinstance(cond["has_id"], list):
            raise _format_error(_CONDITION_HELP)
        for pid in cond["has_id"]:
            parse_point_id(pid)
        return
    if cond and set(cond) <= set(_FILTER_KEYS):
        check_filter(cond)
        return
    raise _format_error(_CONDITION_HELP)


_MISSING = object()


def _lookup(payload: Mapping[str, Any], key: str) -> Any:
    if key in payload:
        return payload[key]
    node: Any = payload
    for part in key.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return _MISSING
    return node


def _strict_eq(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _values(value: Any) -> list[Any]:
    if value is _MISSING or value is None:
        return []
    if isinstance(value, list):
        return value
    return [value]


def _condition_holds(cond: dict[str, Any], point: _Point) -> bool:
    if "key" in cond:
        raw = _lookup(point.payload, cond["key"])
        match = cond.get("match")
        if match is not None:
            (mkind, mval), = match.items()
            values = _values(raw)
            if mkind == "value":
                return any(_strict_eq(v, mval) for v in values)
            if mkind == "any":
                return any(_strict_eq(v, m) for v in values for m in mval)
            if mkind == "except":
                return bool(values) and any(not any(_strict_eq(v, m) for m in mval) for v in values)
            # text / phrase: substring match on strings
            return any(isinstance(v, str) and mval in v for v in values)
        rng = cond.get("range")
        if rng is not None:
            for v in _values(raw):
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    continue
                if "gt" in rng and rng["gt"] is not None and not v > rng["gt"]:
                    continue
                if "gte" in rng and rng["gte"] is not None and not v >= rng["gte"]:
                    continue
                if "lt" in rng and rng["lt"] is not None and not v < rng["lt"]:
                    continue
                if "lte" in rng and rng["lte"] is not None and not v <= rng["lte"]:
                    continue
                return True
            return False
        if cond.get("is_empty"):
            return raw is _MISSING or raw is None or raw == []
        if cond.get("is_null"):
            return raw is None
        return False
    if "is_empty" in cond:
        raw = _lookup(point.payload, cond["is_empty"]["key"])
        return raw is _MISSING or raw is None or raw == []
    if "is_null" in cond:
        return _lookup(point.payload, cond["is_null"]["key"]) is None
    if "has_id" in cond:
        return point.id in {parse_point_id(p) for p in cond["has_id"]}
    return filter_matches(cond, point)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def filter_matches(flt: Mapping[str, Any] | None, point: _Point) -> bool:
    """Evaluate a (checked) Qdrant filter against one point."""
    if not flt:
        return True
    for cond in _as_list(flt.get("must")):
        if not _condition_holds(cond, point):
            return False
    for cond in _as_list(flt.get("must_not")):
        if _condition_holds(cond, point):
            return False
    should = _as_list(flt.get("should"))
    if should and not any(_condition_holds(c, point) for c in should):
        return False
    ms = flt.get("min_should")
    if ms is not None:
        hits = sum(1 for c in ms["conditions"] if _condition_holds(c, point))
        if hits < ms["min_count"]:
            return False
    return True


# ------------------------------------------------------------------ scoring
def _dot(a: list[float], b: list[float]) -> float:
    return math.fsum(x * y for x, y in zip(a, b))


def _score(distance: str, query: list[float], qnorm: float, point: _Point, name: str) -> float:
    vec = point.vector_for(name)
    assert vec is not None
    if distance == "Cosine":
        n = point.norm(name)
        if n == 0 or qnorm == 0:
            return 0.0
        return _dot(query, vec) / (qnorm * n)
    if distance == "Dot":
        return _dot(query, vec)
    if distance == "Euclid":
        return math.sqrt(math.fsum((x - y) ** 2 for x, y in zip(query, vec)))
    return math.fsum(abs(x - y) for x, y in zip(query, vec))  # Manhattan


def _is_number_list(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in value
    )


def _normalize(vec: list[float]) -> list[float]:
    n = math.sqrt(math.fsum(x * x for x in vec))
    if n == 0:
        return [float(x) for x in vec]
    return [x / n for x in vec]


class FakeQdrant(FakeServer):
    """Qdrant double.  See the module docstring for contract and simplifications.

    Constructor:
        ``keys``: ``{api_key: "rw" | "r"}`` or ``None`` (no auth).
        ``ignore_filter``: evaluate no filter (simulate a leaking server).
        ``auth_style``: ``"current"`` (default) or ``"legacy"``.
        ``version``: reported by ``GET /``.

    Hooks: ``create_collection``, ``drop_collection``, ``add_point``,
    ``add_points``, ``point``, ``points``, ``collection_names``,
    ``payload_schema``, ``set_collection_status``, ``mutations``,
    ``reads``.
    """

    VECTOR_JSON_CACHE_SIZE = 4096

    def __init__(
        self,
        keys: Mapping[str, str] | None = None,
        *,
        ignore_filter: bool = False,
        auth_style: str = "current",
        version: str = "1.18.0",
    ) -> None:
        super().__init__()
        if keys:
            for role in keys.values():
                if role not in ("r", "rw"):
                    raise ValueError("key roles are 'r' or 'rw'")
        if auth_style not in ("current", "legacy"):
            raise ValueError("auth_style is 'current' or 'legacy'")
        self.keys: dict[str, str] = dict(keys or {})
        self.ignore_filter = ignore_filter
        self.auth_style = auth_style
        self.version = version
        self._data_lock = threading.RLock()
        self._collections: dict[str, _Collection] = {}
        self._operation_id = 0
        self._vector_json: OrderedDict[int, tuple[Any, str]] = OrderedDict()

    # ------------------------------------------------------------------ hooks
    def create_collection(
        self,
        name: str,
        size: int = 4,
        distance: str = "Cosine",
        vector_name: str | None = None,
        *,
        vectors: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        """Create a collection: unnamed vector ``size``/``distance``, or one named
        vector ``vector_name``, or several named vectors given as ``vectors``
        (``{"dense": {"size": 4, "distance": "Cosine"}}``)."""
        if distance not in DISTANCES:
            raise ValueError(f"distance must be one of {DISTANCES}")
        with self._data_lock:
            if name in self._collections:
                raise ValueError(f"collection {name} exists")
            if vectors is not None:
                cfg = {n: {"size": int(p["size"]), "distance": p["distance"]} for n, p in vectors.items()}
                self._collections[name] = _Collection(name, cfg, True)
            elif vector_name is not None:
                cfg = {vector_name: {"size": size, "distance": distance}}
                self._collections[name] = _Collection(name, cfg, True)
            else:
                self._collections[name] = _Collection(name, {"": {"size": size, "distance": distance}}, False)

    def drop_collection(self, name: str) -> None:
        with self._data_lock:
            self._collections.pop(name, None)

    def add_point(
        self,
        collection: str,
        point_id: int | str,
        vector: Any,
        payload: Mapping[str, Any] | None = None,
    ) -> None:
        """Insert/replace one point without HTTP.  ``vector`` is a list, or a dict
        for named vectors (a plain list is accepted for a collection with exactly
        one named vector).  Stored by reference, not normalized, not validated
        beyond the dimension."""
        self.add_points(collection, [(point_id, vector, payload)])

    def add_points(
        self, collection: str, points: Iterable[tuple[int | str, Any, Mapping[str, Any] | None]]
    ) -> int:
        """Bulk ``add_point``; returns the number of points added."""
        with self._data_lock:
            coll = self._collections[collection]
            self._operation_id += 1
            version = self._operation_id
            n = 0
            for pid, vector, payload in points:
                pid = parse_point_id(pid)
                if coll.named and not isinstance(vector, dict):
                    if len(coll.vectors) != 1:
                        raise ValueError("named collection: pass a dict of vectors")
                    vector = {next(iter(coll.vectors)): vector}
                for name, vec in (vector.items() if isinstance(vector, dict) else [("", vector)]):
                    params = coll.vectors.get(name)
                    if params is None:
                        raise ValueError(f"no vector named {name!r}")
                    if len(vec) != params["size"]:
                        raise ValueError(f"dimension {len(vec)} != {params['size']}")
                coll.points[pid] = _Point(pid, vector, dict(payload or {}), version)
                n += 1
            coll.invalidate()
            return n

    def point(self, collection: str, point_id: int | str) -> dict[str, Any] | None:
        """``{"id", "vector", "payload", "version"}`` of a stored point, or ``None``."""
        with self._data_lock:
            p = self._collections[collection].points.get(parse_point_id(point_id))
            if p is None:
                return None
            return {"id": p.id, "vector": p.vector, "payload": dict(p.payload), "version": p.version}

    def points(self, collection: str) -> list[dict[str, Any]]:
        """Every stored point, in Qdrant's id order."""
        with self._data_lock:
            coll = self._collections[collection]
            ids, _ = coll.sorted_ids()
            return [
                {"id": p.id, "vector": p.vector, "payload": dict(p.payload), "version": p.version}
                for p in (coll.points[i] for i in ids)
            ]

    def collection_names(self) -> list[str]:
        with self._data_lock:
            return list(self._collections)

    def payload_schema(self, collection: str) -> dict[str, str]:
        """Field -> data type of the payload indexes created so far."""
        with self._data_lock:
            return dict(self._collections[collection].payload_schema)

    def set_collection_status(self, collection: str, status: str) -> None:
        """Force the ``status`` reported by collection info (green/yellow/grey/red)."""
        with self._data_lock:
            self._collections[collection].status = status

    def mutations(self) -> list[RecordedRequest]:
        """Recorded requests that are mutations by Qdrant's rule (whatever their outcome)."""
        return [r for r in self.requests if not is_read_only_request(r.method, r.path)]

    def reads(self) -> list[RecordedRequest]:
        return [r for r in self.requests if is_read_only_request(r.method, r.path)]

    # ------------------------------------------------------------- envelopes
    def _ok(self, result: Any, started: float) -> Response:
        return Response.json({"result": result, "status": "ok", "time": time.perf_counter() - started})

    def _fail(self, status: int, message: str, started: float | None = None) -> Response:
        elapsed = time.perf_counter() - started if started is not None else 0.0
        return Response.json({"status": {"error": message}, "time": elapsed}, status)

    def error_response(self, status: int, message: str) -> Response:
        return self._fail(status, message)

    # ------------------------------------------------------------------- auth
    def _authorize(self, req: RecordedRequest) -> Response | None:
        if not self.keys or req.path in ("/", "/healthz") or req.path.startswith(("/readyz", "/livez")):
            return None
        key = req.header("api-key")
        if key is None:
            auth = req.header("authorization")
            if auth is not None and auth.startswith("Bearer "):
                key = auth[len("Bearer "):]
        denial = 403 if self.auth_style == "legacy" else 401
        if key is None:
            return Response.text("Must provide an API key or an Authorization bearer token", denial)
        role = self.keys.get(key)
        if role is None:
            return Response.text("Invalid API key or JWT", denial)
        if role == "r" and not is_read_only_request(req.method, req.path):
            if self.auth_style == "legacy":
                return Response.text("Invalid API key or JWT", 403)
            return self._fail(403, "Forbidden: Global manage access is required")
        return None

    # ---------------------------------------------------------------- routing
    def handle_request(self, req: RecordedRequest) -> Response:
        started = time.perf_counter()
        denied = self._authorize(req)
        if denied is not None:
            return denied
        parts = [p for p in req.path.split("/") if p]
        method = req.method
        try:
            if not parts:
                if method == "GET":
                    return Response.json({"title": "qdrant - vector search engine", "version": self.version})
                return Response(405)
            if parts[0] in ("healthz", "livez", "readyz") and len(parts) == 1:
                if method == "GET":
                    return Response.text("healthz check passed")
                return Response(405)
            if parts[0] != "collections":
                return Response(404)
            if len(parts) == 1:
                if method != "GET":
                    return Response(405)
                with self._data_lock:
                    names = [{"name": n} for n in self._collections]
                return self._ok({"collections": names}, started)
            name = parts[1]
            rest = tuple(parts[2:])
            body = self._body(req) if method in ("POST", "PUT", "PATCH") else None
            return self._route(method, name, rest, req, body, started)
        except QdrantError as exc:
            return self._fail(exc.status, exc.message, started)

    def _body(self, req: RecordedRequest) -> Any:
        ctype = (req.header("content-type") or "").split(";", 1)[0].strip().lower()
        if ctype != "application/json" and not ctype.endswith("+json"):
            raise QdrantError(400, "Content type error")
        if not req.body:
            raise _format_error("EOF while parsing a value at line 1 column 0")
        try:
            return json.loads(req.body)
        except ValueError as exc:
            raise _format_error(str(exc)) from None

    def _route(
        self,
        method: str,
        name: str,
        rest: tuple[str, ...],
        req: RecordedRequest,
        body: Any,
        started: float,
    ) -> Response:
        if rest == ():
            if method == "GET":
                return self._ok(self._collection_info(name), started)
            if method == "PUT":
                return self._ok(self._create_from_http(name, body), started)
            if method == "DELETE":
                with self._data_lock:
                    existed = self._collections.pop(name, None) is not None
                return self._ok(existed, started)
            return Response(405)
        if rest == ("exists",) and method == "GET":
            with self._data_lock:
                return self._ok({"exists": name in self._collections}, started)
        if rest == ("index",) and method == "PUT":
            return self._ok(self._create_index(name, body, req), started)
        if len(rest) == 2 and rest[0] == "index" and method == "DELETE":
            with self._data_lock:
                coll = self._coll(name)
                coll.payload_schema.pop(rest[1], None)
                return self._ok(self._update_result(req), started)
        if rest == ("points",):
            if method == "PUT":
                return self._ok(self._upsert(name, body, req), started)
            if method == "POST":
                return self._ok(self._retrieve(name, body), started)
            return Response(405)
        if len(rest) == 2 and rest[0] == "points" and method == "GET":
            with self._data_lock:
                coll = self._coll(name)
                pid = parse_point_id(int(rest[1]) if rest[1].isdigit() else rest[1])
                point = coll.points.get(pid)
                if point is None:
                    raise QdrantError(404, f"Not found: No point with id {pid} found")
                return Response.raw_json(
                    '{"result":' + self._record_json(coll, point, True, True)
                    + ',"status":"ok","time":' + repr(time.perf_counter() - started) + "}"
                )
        if rest == ("points", "delete") and method == "POST":
            return self._ok(self._delete_points(name, body, req), started)
        if rest == ("points", "payload") and method in ("POST", "PUT"):
            return self._ok(self._set_payload(name, body, req, overwrite=method == "PUT"), started)
        if rest == ("points", "search") and method == "POST":
            return self._search(name, body, started)
        if rest == ("points", "query") and method == "POST":
            return self._query(name, body, started)
        if rest == ("points", "scroll") and method == "POST":
            return self._scroll(name, body, started)
        if rest == ("points", "count") and method == "POST":
            return self._count(name, body, started)
        return Response(404)

    # ------------------------------------------------------------ collections
    def _coll(self, name: str) -> _Collection:
        coll = self._collections.get(name)
        if coll is None:
            raise _not_found_collection(name)
        return coll

    def _collection_info(self, name: str) -> dict[str, Any]:
        with self._data_lock:
            coll = self._coll(name)
            schema = {}
            for field_name, dtype in coll.payload_schema.items():
                count = sum(
                    1
                    for p in coll.points.values()
                    if _lookup(p.payload, field_name) not in (_MISSING, None)
                )
                schema[field_name] = {"data_type": dtype, "points": count}
            return {
                "status": coll.status,
                "optimizer_status": "ok",
                "indexed_vectors_count": 0,
                "points_count": len(coll.points),
                "segments_count": 1,
                "config": {
                    "params": {
                        "vectors": coll.vectors_config(),
                        "shard_number": 1,
                        "replication_factor": 1,
                        "write_consistency_factor": 1,
                        "on_disk_payload": True,
                    },
                    "hnsw_config": {
                        "m": 16,
                        "ef_construct": 100,
                        "full_scan_threshold": 10000,
                        "max_indexing_threads": 0,
                        "on_disk": False,
                    },
                    "optimizer_config": {
                        "deleted_threshold": 0.2,
                        "vacuum_min_vector_number": 1000,
                        "default_segment_number": 0,
                        "max_segment_size": None,
                        "memmap_threshold": None,
                        "indexing_threshold": 10000,
                        "flush_interval_sec": 5,
                        "max_optimization_threads": None,
                    },
                    "wal_config": {"wal_capacity_mb": 32, "wal_segments_ahead": 0},
                    "quantization_config": None,
                    "strict_mode_config": {"enabled": False},
                },
                "payload_schema": schema,
            }

    def _parse_vector_params(self, params: Any, where: str) -> dict[str, Any]:
        if not isinstance(params, dict) or "size" not in params or "distance" not in params:
            raise _format_error(f"{where}: data did not match any variant of untagged enum VectorsConfig")
        size = params["size"]
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise _format_error(f"{where}: invalid type for `size`, expected u64")
        if size == 0:
            raise _validation_error(f"{where}.size: value 0 invalid, must be 1 or larger")
        if params["distance"] not in DISTANCES:
            raise _format_error(
                f"unknown variant `{params['distance']}`, expected one of "
                "`Cosine`, `Euclid`, `Dot`, `Manhattan`"
            )
        return {"size": size, "distance": params["distance"]}

    def _create_from_http(self, name: str, body: Any) -> bool:
        if not isinstance(body, dict):
            raise _format_error("invalid type: expected struct CreateCollection")
        vectors = body.get("vectors", {})
        if isinstance(vectors, dict) and "size" in vectors:
            cfg = {"": self._parse_vector_params(vectors, "vectors")}
            named = False
        elif isinstance(vectors, dict):
            cfg = {n: self._parse_vector_params(p, f"vectors.{n}") for n, p in vectors.items()}
            named = True
        else:
            raise _format_error("data did not match any variant of untagged enum VectorsConfig")
        with self._data_lock:
            if name in self._collections:
                raise QdrantError(409, f"Wrong input: Collection `{name}` already exists!")
            self._collections[name] = _Collection(name, cfg, named)
        return True

    def _update_result(self, req: RecordedRequest) -> dict[str, Any]:
        self._operation_id += 1
        wait = req.query.get("wait", "false").lower() == "true"
        return {"operation_id": self._operation_id, "status": "completed" if wait else "acknowledged"}

    def _create_index(self, name: str, body: Any, req: RecordedRequest) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise _format_error("invalid type: expected struct CreateFieldIndex")
        field_name = body.get("field_name")
        if field_name is None:
            raise _format_error("missing field `field_name`")
        if not isinstance(field_name, str):
            raise _format_error("invalid type: expected a string for `field_name`")
        schema = body.get("field_schema")
        if isinstance(schema, dict):
            dtype = schema.get("type")
        else:
            dtype = schema if schema is not None else "keyword"
        if dtype not in PAYLOAD_TYPES:
            raise _format_error("data did not match any variant of untagged enum PayloadFieldSchema")
        with self._data_lock:
            coll = self._coll(name)
            coll.payload_schema[field_name] = dtype
            return self._update_result(req)

    # ----------------------------------------------------------------- points
    def _parse_point_vector(self, coll: _Collection, vector: Any, normalize: bool) -> Any:
        if isinstance(vector, dict):
            out: dict[str, list[float]] = {}
            for vname, vec in vector.items():
                if vname not in coll.vectors:
                    raise _bad_input(f"Not existing vector name error: {vname}")
                out[vname] = self._check_dense(coll, vname, vec, normalize)
            if not coll.named:
                return out.get("")
            return out
        if not coll.named:
            return self._check_dense(coll, "", vector, normalize)
        raise _bad_input("Not existing vector name error: ")

    def _check_dense(self, coll: _Collection, vname: str, vec: Any, normalize: bool) -> list[float]:
        if not _is_number_list(vec):
            raise _format_error("data did not match any variant of untagged enum VectorStruct")
        params = coll.vectors[vname]
        if len(vec) != params["size"]:
            raise _bad_input(
                f"Vector dimension error: expected dim: {params['size']}, got {len(vec)}"
            )
        if normalize and params["distance"] == "Cosine":
            return _normalize(vec)
        return vec

    def _upsert(self, name: str, body: Any, req: RecordedRequest) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise _format_error("data did not match any variant of untagged enum PointInsertOperations")
        with self._data_lock:
            coll = self._coll(name)
            staged: list[tuple[int | str, Any, dict[str, Any]]] = []
            if "points" in body:
                pts = body["points"]
                if not isinstance(pts, list):
                    raise _format_error("invalid type: expected a sequence for `points`")
                for p in pts:
                    if not isinstance(p, dict) or "id" not in p:
                        raise _format_error("missing field `id`")
                    if "vector" not in p:
                        raise _format_error("missing field `vector`")
                    payload = p.get("payload") or {}
                    if not isinstance(payload, dict):
                        raise _format_error("invalid type: expected a map for `payload`")
                    staged.append(
                        (parse_point_id(p["id"]), self._parse_point_vector(coll, p["vector"], True), payload)
                    )
            elif "batch" in body and isinstance(body["batch"], dict):
                batch = body["batch"]
                ids = batch.get("ids")
                vectors = batch.get("vectors")
                payloads = batch.get("payloads") or [None] * len(ids or [])
                if not isinstance(ids, list) or vectors is None:
                    raise _format_error("missing field `ids` or `vectors`")
                if isinstance(vectors, dict):
                    per_point = [{n: vectors[n][i] for n in vectors} for i in range(len(ids))]
                else:
                    per_point = list(vectors)
                if len(per_point) != len(ids) or len(payloads) != len(ids):
                    raise _bad_input("number of ids, vectors and payloads differ")
                for pid, vec, payload in zip(ids, per_point, payloads):
                    staged.append(
                        (parse_point_id(pid), self._parse_point_vector(coll, vec, True), dict(payload or {}))
                    )
            else:
                raise _format_error("data did not match any variant of untagged enum PointInsertOperations")
            result = self._update_result(req)
            for pid, vec, payload in staged:
                coll.points[pid] = _Point(pid, vec, payload, result["operation_id"])
            coll.invalidate()
            return result

    def _selected_points(self, coll: _Collection, body: dict[str, Any]) -> list[int | str]:
        if "points" in body:
            if not isinstance(body["points"], list):
                raise _format_error("invalid type: expected a sequence for `points`")
            return [parse_point_id(p) for p in body["points"]]
        if "filter" in body:
            check_filter(body["filter"])
            return [p.id for p in coll.points.values() if filter_matches(body["filter"], p)]
        raise _format_error("data did not match any variant of untagged enum PointsSelector")

    def _delete_points(self, name: str, body: Any, req: RecordedRequest) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise _format_error("data did not match any variant of untagged enum PointsSelector")
        with self._data_lock:
            coll = self._coll(name)
            for pid in self._selected_points(coll, body):
                coll.points.pop(pid, None)
            coll.invalidate()
            return self._update_result(req)

    def _set_payload(self, name: str, body: Any, req: RecordedRequest, overwrite: bool) -> dict[str, Any]:
        if not isinstance(body, dict) or not isinstance(body.get("payload"), dict):
            raise _format_error("missing field `payload`")
        with self._data_lock:
            coll = self._coll(name)
            result = self._update_result(req)
            for pid in self._selected_points(coll, body):
                point = coll.points.get(pid)
                if point is None:
                    continue
                if overwrite:
                    point.payload = dict(body["payload"])
                else:
                    point.payload.update(body["payload"])
                point.version = result["operation_id"]
            return result

    # ------------------------------------------------------------ reading
    @staticmethod
    def _check_with_payload(value: Any) -> Any:
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, list) and all(isinstance(x, str) for x in value):
            return value
        if (
            isinstance(value, dict)
            and len(value) == 1
            and next(iter(value)) in ("include", "exclude")
            and isinstance(next(iter(value.values())), list)
        ):
            return value
        raise _format_error("data did not match any variant of untagged enum WithPayloadInterface")

    @staticmethod
    def _check_with_vector(value: Any) -> Any:
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, list) and all(isinstance(x, str) for x in value):
            return value
        raise _format_error("data did not match any variant of untagged enum WithVector")

    @staticmethod
    def _check_limit(value: Any, default: int | None, field: str = "limit") -> int:
        if value is None:
            if default is None:
                raise _format_error(f"missing field `{field}`")
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _format_error(f"invalid type: expected usize for `{field}`")
        if value < 1 and field == "limit":
            raise _validation_error(f"{field}: value {value} invalid, must be 1 or larger")
        return value

    @staticmethod
    def _select_payload(payload: dict[str, Any], selector: Any) -> dict[str, Any]:
        if selector is True:
            return payload
        if isinstance(selector, list):
            return {k: v for k, v in payload.items() if k in selector}
        if isinstance(selector, dict):
            if "include" in selector:
                return {k: v for k, v in payload.items() if k in selector["include"]}
            return {k: v for k, v in payload.items() if k not in selector["exclude"]}
        return payload

    def _vec_json(self, vec: list[float]) -> str:
        key = id(vec)
        cached = self._vector_json.get(key)
        if cached is not None and cached[0] is vec:
            return cached[1]
        text = json.dumps(vec)
        self._vector_json[key] = (vec, text)
        if len(self._vector_json) > self.VECTOR_JSON_CACHE_SIZE:
            self._vector_json.popitem(last=False)
        return text

    def _vector_output(self, coll: _Collection, point: _Point, selector: Any) -> str:
        if isinstance(point.vector, dict):
            names = list(point.vector) if selector is True else [n for n in selector if n in point.vector]
            return "{" + ",".join(
                json.dumps(n) + ":" + self._vec_json(point.vector[n]) for n in names
            ) + "}"
        if selector is True or "" in selector:
            return self._vec_json(point.vector)
        return "{}"

    def _record_json(
        self,
        coll: _Collection,
        point: _Point,
        with_payload: Any,
        with_vector: Any,
        score: float | None = None,
    ) -> str:
        parts = ['{"id":', json.dumps(point.id)]
        if score is not None:
            parts += [',"version":', str(point.version), ',"score":', repr(float(score))]
        if with_payload:
            parts += [',"payload":', json.dumps(self._select_payload(point.payload, with_payload), ensure_ascii=False, separators=(",", ":"))]
        if with_vector:
            parts += [',"vector":', self._vector_output(coll, point, with_vector)]
        parts.append("}")
        return "".join(parts)

    def _envelope(self, result_json: str, started: float) -> Response:
        return Response.raw_json(
            '{"result":' + result_json + ',"status":"ok","time":' + repr(time.perf_counter() - started) + "}"
        )

    def _resolve_query_vector(self, coll: _Collection, name: str, vec: Any) -> list[float]:
        if name not in coll.vectors:
            raise _bad_input(f"Not existing vector name error: {name}")
        if not _is_number_list(vec):
            raise _format_error("data did not match any variant of untagged enum NamedVectorStruct")
        size = coll.vectors[name]["size"]
        if len(vec) != size:
            raise _bad_input(f"Vector dimension error: expected dim: {size}, got {len(vec)}")
        return vec

    def _ranked(
        self,
        coll: _Collection,
        name: str,
        query: list[float],
        flt: Any,
        limit: int,
        offset: int,
        threshold: float | None,
    ) -> list[tuple[float, _Point]]:
        distance = coll.vectors[name]["distance"]
        qnorm = math.sqrt(math.fsum(x * x for x in query))
        ascending = distance in ("Euclid", "Manhattan")
        scored: list[tuple[float, _Point]] = []
        for point in coll.points.values():
            if point.vector_for(name) is None:
                continue
            if flt and not self.ignore_filter and not filter_matches(flt, point):
                continue
            s = _score(distance, query, qnorm, point, name)
            if threshold is not None and (s > threshold if ascending else s < threshold):
                continue
            scored.append((s, point))
        scored.sort(key=lambda t: (t[0] if ascending else -t[0], point_id_sort_key(t[1].id)))
        return scored[offset: offset + limit]

    def _search(self, name: str, body: Any, started: float) -> Response:
        if not isinstance(body, dict):
            raise _format_error("invalid type: expected struct SearchRequest")
        if "vector" not in body:
            raise _format_error("missing field `vector`")
        limit = self._check_limit(body.get("limit"), None)
        offset = self._check_limit(body.get("offset"), 0, "offset")
        with_payload = self._check_with_payload(body.get("with_payload"))
        with_vector = self._check_with_vector(body.get("with_vector"))
        check_filter(body.get("filter"))
        threshold = body.get("score_threshold")
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))):
            raise _format_error("invalid type: expected f32 for `score_threshold`")
        raw = body["vector"]
        if isinstance(raw, dict) and set(raw) == {"name", "vector"} and isinstance(raw["name"], str):
            vname, vec = raw["name"], raw["vector"]
        elif isinstance(raw, list):
            vname, vec = "", raw
        else:
            raise _format_error("data did not match any variant of untagged enum NamedVectorStruct")
        with self._data_lock:
            coll = self._coll(name)
            query = self._resolve_query_vector(coll, vname, vec)
            hits = self._ranked(coll, vname, query, body.get("filter"), limit, offset, threshold)
            items = [self._record_json(coll, p, with_payload, with_vector, s) for s, p in hits]
        return self._envelope("[" + ",".join(items) + "]", started)

    def _query(self, name: str, body: Any, started: float) -> Response:
        if not isinstance(body, dict):
            raise _format_error("invalid type: expected struct QueryRequest")
        limit = self._check_limit(body.get("limit"), 10)
        offset = self._check_limit(body.get("offset"), 0, "offset")
        with_payload = self._check_with_payload(body.get("with_payload"))
        with_vector = self._check_with_vector(body.get("with_vector"))
        check_filter(body.get("filter"))
        threshold = body.get("score_threshold")
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))):
            raise _format_error("invalid type: expected f32 for `score_threshold`")
        if body.get("prefetch") is not None:
            raise _format_error("prefetch is not supported by the fake")
        using = body.get("using")
        if using is not None and not isinstance(using, str):
            raise _format_error("invalid type: expected a string for `using`")
        vname = using or ""
        raw = body.get("query")
        if isinstance(raw, dict) and set(raw) == {"nearest"}:
            raw = raw["nearest"]
        with self._data_lock:
            coll = self._coll(name)
            if raw is None:
                ids, _ = coll.sorted_ids()
                items = []
                skipped = 0
                for pid in ids:
                    point = coll.points[pid]
                    if body.get("filter") and not self.ignore_filter and not filter_matches(body["filter"], point):
                        continue
                    if skipped < offset:
                        skipped += 1
                        continue
                    items.append(self._record_json(coll, point, with_payload, with_vector, 0.0))
                    if len(items) >= limit:
                        break
            elif _is_number_list(raw):
                query = self._resolve_query_vector(coll, vname, raw)
                hits = self._ranked(coll, vname, query, body.get("filter"), limit, offset, threshold)
                items = [self._record_json(coll, p, with_payload, with_vector, s) for s, p in hits]
            else:
                raise _format_error("Expected some form of vector, id, or a type of query")
        return self._envelope('{"points":[' + ",".join(items) + "]}", started)

    def _scroll(self, name: str, body: Any, started: float) -> Response:
        if not isinstance(body, dict):
            raise _format_error("invalid type: expected struct ScrollRequest")
        limit = self._check_limit(body.get("limit"), 10)
        with_payload = self._check_with_payload(body.get("with_payload", True))
        if with_payload is None:
            with_payload = True
        with_vector = self._check_with_vector(body.get("with_vector"))
        flt = body.get("filter")
        check_filter(flt)
        if body.get("order_by") is not None:
            raise _format_error("order_by is not supported by the fake")
        offset = body.get("offset")
        start_key = point_id_sort_key(parse_point_id(offset)) if offset is not None else None
        with self._data_lock:
            coll = self._coll(name)
            ids, keys = coll.sorted_ids()
            i = 0
            if start_key is not None:
                i = bisect.bisect_left(keys, start_key)
            items: list[str] = []
            next_offset: int | str | None = None
            use_filter = bool(flt) and not self.ignore_filter
            n = len(ids)
            while i < n:
                point = coll.points[ids[i]]
                i += 1
                if use_filter and not filter_matches(flt, point):
                    continue
                if len(items) == limit:
                    next_offset = point.id
                    break
                items.append(self._record_json(coll, point, with_payload, with_vector))
        return self._envelope(
            '{"points":[' + ",".join(items) + '],"next_page_offset":' + json.dumps(next_offset) + "}",
            started,
        )

    def _count(self, name: str, body: Any, started: float) -> Response:
        if not isinstance(body, dict):
            raise _format_error("invalid type: expected struct CountRequest")
        flt = body.get("filter")
        check_filter(flt)
        with self._data_lock:
            coll = self._coll(name)
            if flt and not self.ignore_filter:
                count = sum(1 for p in coll.points.values() if filter_matches(flt, p))
            else:
                count = len(coll.points)
        return self._ok({"count": count}, started)

    def _retrieve(self, name: str, body: Any) -> Any:
        if not isinstance(body, dict) or not isinstance(body.get("ids"), list):
            raise _format_error("missing field `ids`")
        with_payload = self._check_with_payload(body.get("with_payload", True))
        if with_payload is None:
            with_payload = True
        with_vector = self._check_with_vector(body.get("with_vector"))
        with self._data_lock:
            coll = self._coll(name)
            out = []
            for raw in body["ids"]:
                point = coll.points.get(parse_point_id(raw))
                if point is not None:
                    out.append(json.loads(self._record_json(coll, point, with_payload, with_vector)))
            return out
