"""What the local index holds about one record, and how what is learned merges into it.

No SQLite and no files.  A :class:`Record` is one row of the index as callers see it;
an :class:`Observation` is something learned about a gateway record (from the gateway's own
answer, a session file, a search result, ``pull``); an :class:`Outcome` is what the gateway
said about one outbox record.  :func:`merge_observation` is the one rule for learning: full
text is never replaced by partial text, the gateway's own answer beats hearsay, and
supersession or deletion, once known, sticks.  Text SQLite cannot store (a lone surrogate)
is refused here, before any I/O.  The times the index compares (:data:`TIME_FIELDS`) are
kept in one form (:func:`stored_time`), whatever form they were learned in.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime, timezone

from ..errors import InputError
from ..records import canonical_time, format_utc, is_local_id, normalize_text
from ..valueclass import dataclass, fields, replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, TypeVar

__all__ = [
    "RECORD_COLUMNS", "Record", "Observation", "Outcome", "observation_from_record", "merge_observation",
    "storable_text", "content_hash", "utc_now",
]

#: Record states.  ``synced``: confirmed by the gateway to this qmem; ``observed``: seen in
#: a session file or a search answer; ``pending``/``failed``/``duplicate``: outbox records.
STATES = ("pending", "synced", "observed", "failed", "duplicate")


def _encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def storable_text(value: Any, what: str) -> str:
    """``value`` if it is text SQLite can store, else InputError naming ``what``."""
    if not isinstance(value, str):
        raise InputError(f"{what} must be text")
    if not _encodable(value):
        raise InputError(f"{what} is not valid Unicode text (it holds a lone surrogate code point)")
    return value


def utc_now() -> str:
    """The current time in the one form qmem writes (:func:`qmem.records.format_utc`)."""
    return format_utc(datetime.now(timezone.utc))


#: The times a record carries that the index compares (expiry, recency, deletion).
TIME_FIELDS = ("created_at", "expires_at", "deleted_at")


def stored_time(value: str | None) -> str | None:
    """A time as the index stores it: in the one form of :func:`qmem.records.format_utc`
    when it is an RFC 3339 time (``t``, ``z``, offsets and fractions included), else as
    given — a value that is no time is kept, and never counts as past."""
    if value is None or _CANONICAL_TIME.fullmatch(value):
        return value
    return canonical_time(value) or value


_CANONICAL_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")


def content_hash(text: str) -> str:
    from hashlib import sha256  # here, not at the top: only writes hash text, and a find writes nothing

    return sha256(normalize_text(text).encode("utf-8")).hexdigest()


@functools.lru_cache(maxsize=1)
def this_machine() -> str:
    """The provenance name of this machine (its host name)."""
    import socket  # here, not at the top: only writes name the machine, and a find writes nothing

    return socket.gethostname() or "unknown"


@dataclass(frozen=True)
class Record:
    """One row of the index, as callers see it."""

    id: str
    text: str
    state: str
    coverage: str
    local_id: str | None = None
    kind: str | None = None
    project_id: str | None = None
    scope: str | None = None
    agent_id: str | None = None
    source: str | None = None
    created_at: str | None = None
    expires_at: str | None = None
    supersedes_id: str | None = None
    supersede_reason: str | None = None
    superseded_by: str | None = None
    private: bool = False
    deleted_at: str | None = None
    reason: str | None = None
    duplicate_of: str | None = None
    machine: str | None = None
    session_file: str | None = None
    tool: str | None = None
    content_hash: str = ""
    learned_at: str = ""
    attempts: int = 0

    @property
    def pending(self) -> bool:
        return self.state == "pending"

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: the gateway's field names plus qmem's local state."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["provenance"] = {"machine": out.pop("machine"), "session_file": out.pop("session_file"),
                             "tool": out.pop("tool")}
        return out


#: The fields of a :class:`Record`, in order: also the index's column names.
RECORD_COLUMNS = tuple(f.name for f in fields(Record))


@dataclass(frozen=True)
class Observation:
    """Something learned about a gateway record; ``None`` means "not known here".

    ``state`` is ``synced`` when the gateway itself just said it to this qmem (a store,
    get, enrich or pull answer) and ``observed`` when it comes from a session file or a
    search result.  ``coverage`` is ``partial`` when ``text`` may be an excerpt.
    """

    id: str
    text: str | None = None
    coverage: str = "full"
    state: str = "observed"
    kind: str | None = None
    project_id: str | None = None
    scope: str | None = None
    agent_id: str | None = None
    source: str | None = None
    created_at: str | None = None
    expires_at: str | None = None
    supersedes_id: str | None = None
    supersede_reason: str | None = None
    superseded_by: str | None = None
    private: bool | None = None
    deleted_at: str | None = None
    machine: str | None = None
    session_file: str | None = None
    tool: str | None = None


if TYPE_CHECKING:  # a name for the annotations below, never needed at run time
    _Timed = TypeVar("_Timed", Record, Observation)


def with_stored_times(item: _Timed) -> _Timed:
    """``item`` (a :class:`Record` or :class:`Observation`) with its :data:`TIME_FIELDS` as stored."""
    changes = {}
    for name in TIME_FIELDS:
        value = getattr(item, name)
        stored = stored_time(value)
        if stored != value:
            changes[name] = stored
    return replace(item, **changes) if changes else item


@dataclass(frozen=True)
class Outcome:
    """What the gateway said about one outbox record."""

    local_id: str
    state: str  # "synced" | "duplicate" | "failed" | "pending" (transient: stays queued)
    gateway_record: Mapping[str, Any] | None = None
    matched_id: str | None = None
    reason: str | None = None
    attempted: bool = True  # False: released untouched (the run stopped before sending it)

    @classmethod
    def synced(cls, local_id: str, gateway_record: Mapping[str, Any]) -> "Outcome":
        return cls(local_id, "synced", gateway_record=gateway_record)

    @classmethod
    def duplicate(cls, local_id: str, matched_id: str) -> "Outcome":
        return cls(local_id, "duplicate", matched_id=matched_id,
                   reason=f"the gateway already holds a similar record ({matched_id})")

    @classmethod
    def failed(cls, local_id: str, reason: str) -> "Outcome":
        return cls(local_id, "failed", reason=reason)

    @classmethod
    def transient(cls, local_id: str, reason: str) -> "Outcome":
        return cls(local_id, "pending", reason=reason)

    @classmethod
    def unsent(cls, local_id: str) -> "Outcome":
        """Claimed but not sent (the run stopped first): released as it was."""
        return cls(local_id, "pending", attempted=False)


def observation_from_record(record: Mapping[str, Any], *, coverage: str, state: str, tool: str | None = None,
                            session_file: str | None = None, machine: str | None = None,
                            fallback: Mapping[str, Any] | None = None) -> Observation | None:
    """An Observation of a gateway record (a dict in the gateway's shape), or None.

    None when the id is missing, too long or a local id (those are outbox records, not
    gateway records), or when a field holds text that cannot be stored (a lone surrogate).
    ``fallback`` fills text and metadata the record does not carry,
    e.g. a store call's own arguments.
    """
    record_id = record.get("id")
    if not isinstance(record_id, str) or not record_id or len(record_id) > 128 or is_local_id(record_id):
        return None
    extra = fallback or {}

    def pick(name: str, *, own_only: bool = False) -> str | None:
        for source in (record,) if own_only else (record, extra):
            value = source.get(name)
            if isinstance(value, str) and value:
                return value
        return None

    private = record.get("private")
    obs = Observation(
        id=record_id, text=pick("text"), coverage=coverage, state=state,
        kind=pick("kind"), project_id=pick("project_id"), scope=pick("scope"), agent_id=pick("agent_id"),
        source=pick("source"), created_at=pick("created_at", own_only=True), expires_at=pick("expires_at"),
        supersedes_id=pick("supersedes_id"), supersede_reason=pick("supersede_reason"),
        superseded_by=pick("superseded_by", own_only=True), private=private if isinstance(private, bool) else None,
        deleted_at=pick("deleted_at", own_only=True), machine=machine, session_file=session_file, tool=tool,
    )
    return obs if storable_observation(obs) else None


def storable_observation(obs: Observation) -> bool:
    """False if a text field holds a lone surrogate, which SQLite cannot store."""
    return all(_encodable(value) for value in (getattr(obs, f.name) for f in fields(obs)) if isinstance(value, str))


_MERGED_FIELDS = ("kind", "project_id", "scope", "agent_id", "source", "created_at", "expires_at",
                  "supersedes_id", "supersede_reason")
_STICKY_FIELDS = ("superseded_by", "deleted_at")
_PROVENANCE_FIELDS = ("machine", "session_file", "tool")
_COVERAGE_RANK = {"partial": 0, "full": 1}


def merge_observation(existing: Record | None, obs: Observation, now: str) -> Record | None:
    """The record after learning ``obs``, or None when nothing changes.

    Rules: full text beats partial text, and among equals the gateway's own answer
    (``synced``) or a longer excerpt wins; metadata fills gaps, and the gateway's own
    answer overrides; ``superseded_by`` and ``deleted_at`` never go back to unknown;
    a synced record never becomes merely observed; local outbox states are kept.
    """
    authoritative = obs.state == "synced"
    obs = with_stored_times(obs)
    if existing is None:
        if obs.text is None:
            text, coverage = "", "partial"
        else:
            text, coverage = obs.text, obs.coverage if obs.text else "partial"
        values = {name: getattr(obs, name) for name in _MERGED_FIELDS + _STICKY_FIELDS + _PROVENANCE_FIELDS}
        return Record(id=obs.id, text=text, state=obs.state, coverage=coverage,
                      private=bool(obs.private), content_hash=content_hash(text), learned_at=now, **values)

    changes: dict[str, Any] = {}
    if obs.text:
        old_rank, new_rank = _COVERAGE_RANK[existing.coverage], _COVERAGE_RANK[obs.coverage]
        longer_excerpt = obs.coverage == "partial" and len(obs.text) > len(existing.text)
        better = new_rank > old_rank or (
            new_rank == old_rank and obs.text != existing.text
            and (authoritative or not existing.text or longer_excerpt)
        )
        if better and existing.state not in ("pending", "failed", "duplicate"):
            changes.update(text=obs.text, coverage=obs.coverage, content_hash=content_hash(obs.text))
    for name in _MERGED_FIELDS:
        value = getattr(obs, name)
        current = getattr(existing, name)
        if value is not None and value != current and (authoritative or current is None):
            changes[name] = value
    for name in _STICKY_FIELDS:
        value = getattr(obs, name)
        if value is not None and getattr(existing, name) is None:
            changes[name] = value
    for name in _PROVENANCE_FIELDS:
        value = getattr(obs, name)
        if value is not None and getattr(existing, name) is None:
            changes[name] = value
    if obs.private is not None and obs.private != existing.private and (authoritative or not existing.private):
        changes["private"] = obs.private
    if authoritative and existing.state == "observed":
        changes["state"] = "synced"
    if not changes:
        return None
    changes["learned_at"] = now
    return replace(existing, **changes)


_GATEWAY_FILLED = ("created_at", "kind", "project_id", "scope", "agent_id", "superseded_by")


def accepted_fields(mine: Record, gateway_record: Mapping[str, Any], now: str) -> dict[str, Any]:
    """The fields outbox record ``mine`` takes once the gateway accepted it as ``gateway_record``.

    It takes the gateway's id and, when the answer carries it, the gateway's text (else it
    keeps its own); it is ``synced`` with full text and no reason; metadata the gateway
    filled in (its time, a supersession it knows of …) is taken.
    """
    text = gateway_record.get("text") if isinstance(gateway_record.get("text"), str) else None
    text = text or mine.text
    changes: dict[str, Any] = {"id": str(gateway_record["id"]), "text": text, "state": "synced",
                               "coverage": "full", "reason": None, "learned_at": now}
    if text != mine.text:
        changes["content_hash"] = content_hash(text)
    for name in _GATEWAY_FILLED:
        value = gateway_record.get(name)
        if isinstance(value, str) and value:
            changes[name] = stored_time(value) if name in TIME_FIELDS else value
    return changes
