"""A fake Memory Gateway speaking the contract of DESIGN.md §6.

Contract served (all bodies JSON; errors are ``{"error": "<code>", "detail": ...}``):

``Authorization: Bearer <api_key>``
    Required on every route when ``api_key`` is set; a missing or wrong key
    gets ``401 {"error": "unauthorized", "detail": ...}``.

``GET /v1/status``
    ``200 {"version": "2.12.0", "status": "ok", "records": <live count>}``.

``POST /v1/memories`` (header ``Idempotency-Key`` optional)
    Body ``{text, kind, project_id, agent_id?, scope?, source?, expires_at?,
    supersedes_id?, supersede_reason?, private?}``.  Order of checks:

    1. malformed JSON -> ``400 {"error": "bad_request"}``;
    2. an ``Idempotency-Key`` seen before -> the record created by that key,
       **201 with the same body** (``replay_status`` knob), whatever the new
       body is (the fake does not compare bodies);
    3. validation -> ``422 {"error": "validation_error", "detail": [{"loc":
       ["body", field], "msg": ...}]}``: body not an object, ``text`` not a
       non-empty string, ``kind`` not one of fact/decision/preference/episode,
       ``project_id`` missing/empty, a field of the wrong type,
       ``expires_at`` not RFC 3339, or ``text`` in the ``reject_texts`` knob;
    4. ``supersedes_id`` naming no record (or a soft-deleted one) ->
       ``404 {"error": "not_found"}``;
    5. similarity duplicate -> ``409 {"error": "duplicate", "id": "<matched
       id>", "detail": ...}``.  *Stand-in for the real semantic guardrail:*
       "similar" means the normalized text (casefold, whitespace collapsed,
       stripped) equals that of a live (not superseded, not deleted) record of
       the same ``project_id``; the record being superseded by this request is
       not a duplicate of it.  The ``duplicate_of`` knob forces a 409 for a
       normalized text;
    6. otherwise ``201 {id, text, kind, project_id, agent_id, scope, source,
       expires_at, supersedes_id, supersede_reason, superseded_by: null,
       private, created_at, deleted_at: null}``.  ``id`` is a uuid4 string,
       ``scope`` defaults to ``"project"``, ``private`` to ``false``.  With
       ``supersedes_id`` the target gets ``superseded_by`` = the new id and
       ``supersede_reason`` (an already superseded target is re-pointed).

``POST /v1/memories:search``
    ``{query, kind?, project_id?, scope?, top_k=5 (1..100),
    include_superseded=false, min_score?}`` ->
    ``{"results": [{id, score, text, kind, project_id, scope, agent_id,
    created_at, superseded_by?, private?}]}``.  Score: a deterministic lexical
    stand-in, the Jaccard index of the casefolded ``\\w+`` word sets of query
    and text (0..1, rounded to 4 places); records scoring 0 are not returned;
    the ``scores`` knob (id -> score) overrides it.  Order: score desc, then
    creation order.  Deleted records never appear; superseded ones only with
    ``include_superseded``.  Private records **are** returned, flagged
    ``"private": true`` (the single shared key sees everything; hiding them is
    the client's business).  ``superseded_by``/``private`` are present only
    when set.

``GET /v1/memories/{id}``
    The full record (every key above, ``null`` when unset), also for a
    soft-deleted record (``deleted_at`` set); ``404 {"error": "not_found"}``.

``GET /v1/memories:export?cursor=&limit=``
    ``{"items": [...], "next_cursor": "<opaque>", "has_more": bool}``.
    Every record carries an internal sequence number taken from a global
    counter when it is created *and again whenever it changes* (superseded,
    soft-deleted, made private).  A page holds the records with a sequence
    above the cursor, ascending, at most ``limit`` (default 100, 1..1000,
    else 422).  ``next_cursor`` is **never null**: it is the position after
    the last item of the page (or the given cursor when the page is empty),
    so a puller stores it and later resumes from it to receive exactly the
    records created or changed since; ``has_more`` says whether more items
    were pending when the page was cut.  (Knob ``null_cursor_when_exhausted``
    makes the last page answer ``next_cursor: null`` instead, to test clients
    against that style.)  A changed record moves to the end of the sequence,
    so it is delivered once more, in its new state.  Soft-deleted records are
    tombstones ``{"id", "deleted_at"}`` (knob ``full_tombstones`` gives the
    full record with ``deleted_at``).  A cursor the fake did not issue ->
    ``400 {"error": "invalid_cursor"}``.

``GET /v1/meta``
    ``{"counts": {scope: {kind: n}}, "projects": [...], "agents": [...],
    "superseded": n, "total": n}`` where ``counts``/``total`` cover live
    records (not superseded, not deleted), ``superseded`` counts superseded
    non-deleted records, and ``projects``/``agents`` are the sorted distinct
    non-null values over non-deleted records.

Records never expire (``expires_at`` is stored and echoed only).
"""

from __future__ import annotations

import base64
import re
import threading
import uuid
from datetime import datetime, timezone
from typing import Any, Callable

from .http_fake import FakeServer, RecordedRequest, Response

__all__ = ["FakeGateway", "KINDS", "normalize_text", "lexical_score"]

KINDS = ("fact", "decision", "preference", "episode")

_WORD = re.compile(r"\w+", re.UNICODE)
_ERROR_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    422: "validation_error",
    429: "rate_limited",
    500: "internal_error",
    502: "bad_gateway",
    503: "service_unavailable",
    504: "gateway_timeout",
}


def normalize_text(text: str) -> str:
    """The duplicate key: casefolded, whitespace collapsed, stripped."""
    return " ".join(text.casefold().split())


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.casefold()))


def lexical_score(query: str, text: str) -> float:
    """Jaccard index of the casefolded word sets, rounded to 4 places."""
    q, t = _words(query), _words(text)
    if not q or not t:
        return 0.0
    return round(len(q & t) / len(q | t), 4)


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _parse_rfc3339(value: str) -> bool:
    text = value.strip()
    if not re.match(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}", text):
        return False
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return False
    return dt.tzinfo is not None


class _Invalid(Exception):
    def __init__(self, field: str, msg: str) -> None:
        super().__init__(msg)
        self.field = field
        self.msg = msg


class FakeGateway(FakeServer):
    """The Memory Gateway double (see the module docstring for the contract).

    Constructor knobs:
        ``api_key``: required bearer key (``None`` disables auth).
        ``version``: reported by ``/v1/status`` (default ``"2.12.0"``).
        ``replay_status``: status of an idempotent replay (default 201).
        ``full_tombstones``: export soft-deleted records in full.
        ``null_cursor_when_exhausted``: export's last page has ``next_cursor: null``.
        ``clock``: ``() -> datetime`` used for ``created_at``/``deleted_at``.

    Mutable knobs (plain attributes, set them any time):
        ``reject_texts``: set of texts answered with 422 on store.
        ``duplicate_of``: normalized text -> id answered with 409 on store.
        ``scores``: record id -> score forced in search results.

    Test hooks: ``add_record``, ``soft_delete``, ``set_private``, ``supersede``,
    ``get``, ``records``, ``live_records``, ``count_by_text``,
    ``idempotency_keys``, ``head_cursor``, ``replays``.
    """

    def __init__(
        self,
        api_key: str | None = "test-gateway-key",
        *,
        version: str = "2.12.0",
        replay_status: int = 201,
        full_tombstones: bool = False,
        null_cursor_when_exhausted: bool = False,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        super().__init__()
        self.api_key = api_key
        self.version = version
        self.replay_status = replay_status
        self.full_tombstones = full_tombstones
        self.null_cursor_when_exhausted = null_cursor_when_exhausted
        self.clock = clock
        self.reject_texts: set[str] = set()
        self.duplicate_of: dict[str, str] = {}
        self.scores: dict[str, float] = {}
        self._store_lock = threading.RLock()
        self._records: dict[str, dict[str, Any]] = {}
        self._seq_of: dict[str, int] = {}
        self._created_order: dict[str, int] = {}
        self._seq = 0
        self._idem: dict[str, str] = {}
        self._replays = 0

    # ------------------------------------------------------------------ hooks
    def add_record(
        self,
        text: str,
        kind: str = "fact",
        project_id: str = "proj",
        *,
        agent_id: str | None = None,
        scope: str = "project",
        source: str | None = None,
        expires_at: str | None = None,
        private: bool = False,
        record_id: str | None = None,
        created_at: str | None = None,
        supersedes_id: str | None = None,
        supersede_reason: str | None = None,
    ) -> dict[str, Any]:
        """Insert a record directly (no validation, no duplicate check); return a copy."""
        with self._store_lock:
            rec = self._new_record(
                {
                    "text": text,
                    "kind": kind,
                    "project_id": project_id,
                    "agent_id": agent_id,
                    "scope": scope,
                    "source": source,
                    "expires_at": expires_at,
                    "private": private,
                    "supersedes_id": supersedes_id,
                    "supersede_reason": supersede_reason,
                },
                record_id=record_id,
                created_at=created_at,
            )
            if supersedes_id is not None and supersedes_id in self._records:
                self._mark_superseded(supersedes_id, rec["id"], supersede_reason)
            return dict(rec)

    def soft_delete(self, record_id: str) -> dict[str, Any]:
        """Set ``deleted_at`` (a tombstone from now on) and bump the record's sequence."""
        with self._store_lock:
            rec = self._records[record_id]
            rec["deleted_at"] = _iso(self.clock())
            self._bump(record_id)
            return dict(rec)

    def set_private(self, record_id: str, private: bool = True) -> dict[str, Any]:
        """Change the ``private`` flag and bump the record's sequence."""
        with self._store_lock:
            rec = self._records[record_id]
            rec["private"] = private
            self._bump(record_id)
            return dict(rec)

    def supersede(self, old_id: str, new_id: str, reason: str | None = None) -> None:
        """Mark ``old_id`` as superseded by ``new_id`` (both must exist)."""
        with self._store_lock:
            if new_id not in self._records:
                raise KeyError(new_id)
            self._mark_superseded(old_id, new_id, reason)

    def get(self, record_id: str) -> dict[str, Any] | None:
        with self._store_lock:
            rec = self._records.get(record_id)
            return dict(rec) if rec is not None else None

    @property
    def records(self) -> dict[str, dict[str, Any]]:
        """A copy of every record (deleted ones included), by id, in creation order."""
        with self._store_lock:
            return {rid: dict(rec) for rid, rec in self._records.items()}

    def live_records(self) -> list[dict[str, Any]]:
        """Records neither superseded nor deleted, in creation order."""
        with self._store_lock:
            return [
                dict(r)
                for r in self._records.values()
                if r["deleted_at"] is None and r["superseded_by"] is None
            ]

    def count_by_text(self, include_deleted: bool = False) -> dict[str, int]:
        """Exact text -> number of records with it (to assert "exactly once")."""
        counts: dict[str, int] = {}
        with self._store_lock:
            for rec in self._records.values():
                if rec["deleted_at"] is not None and not include_deleted:
                    continue
                counts[rec["text"]] = counts.get(rec["text"], 0) + 1
        return counts

    @property
    def idempotency_keys(self) -> dict[str, str]:
        """Idempotency-Key -> id of the record it created."""
        with self._store_lock:
            return dict(self._idem)

    @property
    def replays(self) -> int:
        """How many stores were answered from the idempotency table."""
        with self._store_lock:
            return self._replays

    def head_cursor(self) -> str:
        """The export cursor positioned after everything stored so far."""
        with self._store_lock:
            return self._encode_cursor(self._seq)

    # ------------------------------------------------------------- internals
    def _new_record(
        self,
        fields: dict[str, Any],
        *,
        record_id: str | None = None,
        created_at: str | None = None,
    ) -> dict[str, Any]:
        rid = record_id or str(uuid.uuid4())
        if rid in self._records:
            raise ValueError(f"record {rid} exists")
        rec = {
            "id": rid,
            "text": fields["text"],
            "kind": fields["kind"],
            "project_id": fields["project_id"],
            "agent_id": fields.get("agent_id"),
            "scope": fields.get("scope") if fields.get("scope") is not None else "project",
            "source": fields.get("source"),
            "expires_at": fields.get("expires_at"),
            "supersedes_id": fields.get("supersedes_id"),
            "supersede_reason": fields.get("supersede_reason"),
            "superseded_by": None,
            "private": bool(fields.get("private") or False),
            "created_at": created_at or _iso(self.clock()),
            "deleted_at": None,
        }
        self._records[rid] = rec
        self._created_order[rid] = len(self._created_order)
        self._bump(rid)
        return rec

    def _bump(self, rid: str) -> None:
        self._seq += 1
        self._seq_of[rid] = self._seq

    def _mark_superseded(self, old_id: str, new_id: str, reason: str | None) -> None:
        old = self._records[old_id]
        old["superseded_by"] = new_id
        old["supersede_reason"] = reason
        self._bump(old_id)

    @staticmethod
    def _encode_cursor(seq: int) -> str:
        return base64.urlsafe_b64encode(f"seq:{seq}".encode()).decode().rstrip("=")

    @staticmethod
    def _decode_cursor(cursor: str) -> int | None:
        try:
            pad = "=" * (-len(cursor) % 4)
            raw = base64.urlsafe_b64decode(cursor + pad).decode("ascii")
        except (ValueError, UnicodeDecodeError):
            return None
        m = re.fullmatch(r"seq:(\d{1,18})", raw)
        return int(m.group(1)) if m else None

    # ------------------------------------------------------------------ HTTP
    def error_response(self, status: int, message: str, detail: Any = None) -> Response:
        code = _ERROR_CODES.get(status, message.lower().replace(" ", "_"))
        return Response.json({"error": code, "detail": detail if detail is not None else message}, status)

    def _err(self, status: int, error: str, detail: Any = None, **extra: Any) -> Response:
        body: dict[str, Any] = {"error": error, "detail": detail}
        body.update(extra)
        return Response.json(body, status)

    def handle_request(self, req: RecordedRequest) -> Response:
        if self.api_key is not None:
            auth = req.header("authorization") or ""
            if auth != f"Bearer {self.api_key}":
                detail = "missing bearer token" if not auth else "invalid bearer token"
                return self._err(401, "unauthorized", detail)
        path, method = req.path, req.method
        if path == "/v1/status":
            if method != "GET":
                return self._err(405, "method_not_allowed")
            with self._store_lock:
                live = sum(1 for r in self._records.values() if r["deleted_at"] is None)
            return Response.json({"version": self.version, "status": "ok", "records": live})
        if path == "/v1/memories":
            if method != "POST":
                return self._err(405, "method_not_allowed")
            return self._store(req)
        if path == "/v1/memories:search":
            if method != "POST":
                return self._err(405, "method_not_allowed")
            return self._search(req)
        if path == "/v1/memories:export":
            if method != "GET":
                return self._err(405, "method_not_allowed")
            return self._export(req)
        if path == "/v1/meta":
            if method != "GET":
                return self._err(405, "method_not_allowed")
            return self._meta()
        if path.startswith("/v1/memories/"):
            if method != "GET":
                return self._err(405, "method_not_allowed")
            rid = path[len("/v1/memories/"):]
            rec = self.get(rid)
            if rec is None:
                return self._err(404, "not_found", f"no memory {rid}")
            return Response.json(rec)
        return self._err(404, "not_found", "no such route")

    # -- POST /v1/memories
    def _store(self, req: RecordedRequest) -> Response:
        if not req.json_ok:
            return self._err(400, "bad_request", "malformed JSON body")
        body = req.json
        key = req.header("idempotency-key")
        with self._store_lock:
            if key and key in self._idem:
                self._replays += 1
                return Response.json(dict(self._records[self._idem[key]]), self.replay_status)
            try:
                fields = self._validate_store(body)
            except _Invalid as exc:
                return self._err(
                    422, "validation_error", [{"loc": ["body", exc.field], "msg": exc.msg}]
                )
            target_id = fields.get("supersedes_id")
            if target_id is not None:
                target = self._records.get(target_id)
                if target is None or target["deleted_at"] is not None:
                    return self._err(404, "not_found", f"supersedes_id {target_id} not found")
            norm = normalize_text(fields["text"])
            if norm in self.duplicate_of:
                return self._err(
                    409, "duplicate", "similar memory exists", id=self.duplicate_of[norm]
                )
            for rec in self._records.values():
                if (
                    rec["deleted_at"] is None
                    and rec["superseded_by"] is None
                    and rec["project_id"] == fields["project_id"]
                    and rec["id"] != target_id
                    and normalize_text(rec["text"]) == norm
                ):
                    return self._err(409, "duplicate", "similar memory exists", id=rec["id"])
            rec = self._new_record(fields)
            if target_id is not None:
                self._mark_superseded(target_id, rec["id"], fields.get("supersede_reason"))
            if key:
                self._idem[key] = rec["id"]
            return Response.json(dict(rec), 201)

    def _validate_store(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise _Invalid("__root__", "body must be a JSON object")
        text = body.get("text")
        if not isinstance(text, str) or not text.strip():
            raise _Invalid("text", "text must be a non-empty string")
        kind = body.get("kind")
        if kind not in KINDS:
            raise _Invalid("kind", f"kind must be one of {', '.join(KINDS)}")
        project_id = body.get("project_id")
        if not isinstance(project_id, str) or not project_id.strip():
            raise _Invalid("project_id", "project_id is required")
        for name in ("agent_id", "scope", "source", "expires_at", "supersedes_id", "supersede_reason"):
            value = body.get(name)
            if value is not None and not isinstance(value, str):
                raise _Invalid(name, f"{name} must be a string")
        if body.get("scope") is not None and not body["scope"].strip():
            raise _Invalid("scope", "scope must not be empty")
        if body.get("expires_at") is not None and not _parse_rfc3339(body["expires_at"]):
            raise _Invalid("expires_at", "expires_at must be an RFC 3339 date-time")
        private = body.get("private")
        if private is not None and not isinstance(private, bool):
            raise _Invalid("private", "private must be a boolean")
        if text in self.reject_texts:
            raise _Invalid("text", "rejected by the gateway")
        return {
            "text": text,
            "kind": kind,
            "project_id": project_id,
            "agent_id": body.get("agent_id"),
            "scope": body.get("scope"),
            "source": body.get("source"),
            "expires_at": body.get("expires_at"),
            "supersedes_id": body.get("supersedes_id"),
            "supersede_reason": body.get("supersede_reason"),
            "private": private or False,
        }

    # -- POST /v1/memories:search
    def _search(self, req: RecordedRequest) -> Response:
        if not req.json_ok:
            return self._err(400, "bad_request", "malformed JSON body")
        body = req.json
        try:
            if not isinstance(body, dict):
                raise _Invalid("__root__", "body must be a JSON object")
            query = body.get("query")
            if not isinstance(query, str) or not query.strip():
                raise _Invalid("query", "query must be a non-empty string")
            kind = body.get("kind")
            if kind is not None and kind not in KINDS:
                raise _Invalid("kind", f"kind must be one of {', '.join(KINDS)}")
            for name in ("project_id", "scope"):
                if body.get(name) is not None and not isinstance(body[name], str):
                    raise _Invalid(name, f"{name} must be a string")
            top_k = body.get("top_k", 5)
            if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= 100:
                raise _Invalid("top_k", "top_k must be an integer in 1..100")
            include_superseded = body.get("include_superseded", False)
            if not isinstance(include_superseded, bool):
                raise _Invalid("include_superseded", "include_superseded must be a boolean")
            min_score = body.get("min_score")
            if min_score is not None and (
                isinstance(min_score, bool)
                or not isinstance(min_score, (int, float))
                or not 0 <= min_score <= 1
            ):
                raise _Invalid("min_score", "min_score must be a number in 0..1")
        except _Invalid as exc:
            return self._err(422, "validation_error", [{"loc": ["body", exc.field], "msg": exc.msg}])
        hits: list[tuple[float, int, dict[str, Any]]] = []
        with self._store_lock:
            for rec in self._records.values():
                if rec["deleted_at"] is not None:
                    continue
                if rec["superseded_by"] is not None and not include_superseded:
                    continue
                if kind is not None and rec["kind"] != kind:
                    continue
                if body.get("project_id") is not None and rec["project_id"] != body["project_id"]:
                    continue
                if body.get("scope") is not None and rec["scope"] != body["scope"]:
                    continue
                score = self.scores.get(rec["id"])
                if score is None:
                    score = lexical_score(query, rec["text"])
                    if score <= 0:
                        continue
                if min_score is not None and score < min_score:
                    continue
                hits.append((score, self._created_order[rec["id"]], dict(rec)))
        hits.sort(key=lambda h: (-h[0], h[1]))
        results = []
        for score, _, rec in hits[:top_k]:
            item = {
                "id": rec["id"],
                "score": score,
                "text": rec["text"],
                "kind": rec["kind"],
                "project_id": rec["project_id"],
                "scope": rec["scope"],
                "agent_id": rec["agent_id"],
                "created_at": rec["created_at"],
            }
            if rec["superseded_by"] is not None:
                item["superseded_by"] = rec["superseded_by"]
            if rec["private"]:
                item["private"] = True
            results.append(item)
        return Response.json({"results": results})

    # -- GET /v1/memories:export
    def _export(self, req: RecordedRequest) -> Response:
        cursor = req.query.get("cursor")
        start = 0
        if cursor:
            decoded = self._decode_cursor(cursor)
            if decoded is None:
                return self._err(400, "invalid_cursor", "cursor was not issued by this gateway")
            start = decoded
        raw_limit = req.query.get("limit", "100")
        try:
            limit = int(raw_limit)
        except ValueError:
            limit = 0
        if not 1 <= limit <= 1000:
            return self._err(
                422, "validation_error", [{"loc": ["query", "limit"], "msg": "limit must be 1..1000"}]
            )
        with self._store_lock:
            pending = sorted(
                (seq, rid) for rid, seq in self._seq_of.items() if seq > start
            )
            page = pending[:limit]
            items = []
            for _, rid in page:
                rec = self._records[rid]
                if rec["deleted_at"] is not None and not self.full_tombstones:
                    items.append({"id": rid, "deleted_at": rec["deleted_at"]})
                else:
                    items.append(dict(rec))
            has_more = len(pending) > limit
            end = page[-1][0] if page else start
        next_cursor: str | None = self._encode_cursor(end)
        if self.null_cursor_when_exhausted and not has_more:
            next_cursor = None
        return Response.json({"items": items, "next_cursor": next_cursor, "has_more": has_more})

    # -- GET /v1/meta
    def _meta(self) -> Response:
        counts: dict[str, dict[str, int]] = {}
        projects: set[str] = set()
        agents: set[str] = set()
        superseded = 0
        total = 0
        with self._store_lock:
            for rec in self._records.values():
                if rec["deleted_at"] is not None:
                    continue
                projects.add(rec["project_id"])
                if rec["agent_id"] is not None:
                    agents.add(rec["agent_id"])
                if rec["superseded_by"] is not None:
                    superseded += 1
                    continue
                total += 1
                by_kind = counts.setdefault(rec["scope"], {})
                by_kind[rec["kind"]] = by_kind.get(rec["kind"], 0) + 1
        return Response.json(
            {
                "counts": counts,
                "projects": sorted(projects),
                "agents": sorted(agents),
                "superseded": superseded,
                "total": total,
            }
        )

