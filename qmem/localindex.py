"""The local index: one SQLite file that answers searches when the gateway cannot.

Promises:

* **One file**, WAL mode, a busy timeout so that the host bridge and the CLIs can use
  it at once, and ``PRAGMA user_version`` migrations applied in one transaction (a big
  index shows ``progress(done, total)`` while v3 re-indexes it).
* **A file that is not qmem's is never written.**  qmem's index carries ``PRAGMA
  application_id`` 0x716D656D ("qmem"); ownership is decided on a read-only connection
  before any pragma that writes (:mod:`qmem.indexschema`).  A non-SQLite file, a damaged
  one, someone else's database or one made by a newer qmem raises
  :class:`~qmem.errors.CorruptIndexError` (or :class:`~qmem.errors.LocalIndexError`)
  saying how to recover; the file is left exactly as it was.  Every write is one
  transaction, so a full or read-only disk leaves nothing half-written.
* **A read-only index still answers.**  When the file or its directory cannot be written,
  the index opens read-only (``read_only`` is true): searches, status and the outbox
  report work; every write raises ``LocalIndexError`` ("… is read-only; nothing was
  written") before touching the file.
* **Records** are what qmem has learned about gateway records (from its own answers,
  session files, ``pull``) plus the outbox's local records.  Learning merges: full text
  is never replaced by partial text, and supersession or deletion, once known, sticks.
* **find** treats the user's words as data (:mod:`qmem.lexical`): each word is a quoted
  FTS5 string, so quotes, ``*``, ``:``, ``NEAR``, ``AND/OR/NOT``, parentheses and control
  characters are matched literally or dropped and never raise.  English stopwords are
  left out unless the query has nothing else; words match by their Porter stem, accents
  ignored.  Records with every word come first (by bm25), then the answer is filled up to
  ``limit`` with records that have any of the words (by bm25); it is *partial* only when
  no result has every word, and ``more`` says whether results were left out.  Only when
  no record has any word exactly are words tried as prefixes.  Equal scores keep the
  order in which records were first learned.  Superseded, private, deleted and expired
  records are hidden unless asked for; ``project``, ``kind`` and ``scope`` match exactly.
* **Text that cannot be stored is input, not a crash.**  A lone surrogate in a query,
  filter or id raises :class:`~qmem.errors.InputError`.
"""

from __future__ import annotations

import functools
import socket
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from datetime import datetime, timezone
from hashlib import sha256
from pathlib import Path
from typing import Any

from .errors import CorruptIndexError, InputError, LocalIndexError
from .indexschema import (
    APPLICATION_ID, MIGRATIONS, RECOVERY, SCHEMA_VERSION, check_ownership, has_log_content, migrate,
    newer_schema_error, read_only_uri,
)
from .lexical import MAX_QUERY_TERMS, MAX_TERM_CHARS, STOPWORDS, QueryTerms, match_expression, query_terms
from .records import KINDS, is_local_id, normalize_text

__all__ = [
    "SCHEMA_VERSION",
    "APPLICATION_ID",
    "Record",
    "Observation",
    "FindResult",
    "IndexStatus",
    "LocalIndex",
    "QueryTerms",
    "STOPWORDS",
    "MAX_QUERY_TERMS",
    "MAX_TERM_CHARS",
    "query_terms",
    "match_expression",
    "merge_observation",
    "observation_from_record",
    "content_hash",
    "utc_now",
]

#: Record states.  ``synced``: confirmed by the gateway to this qmem; ``observed``: seen in
#: a session file or a search answer; ``pending``/``failed``/``duplicate``: outbox records.
STATES = ("pending", "synced", "observed", "failed", "duplicate")

MAX_FIND_LIMIT = 1000

_MIGRATIONS = MIGRATIONS  # the name older tests and tools used


def _encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _text_argument(value: Any, what: str) -> str:
    """``value`` if it is text SQLite can store, else InputError naming ``what``."""
    if not isinstance(value, str):
        raise InputError(f"{what} must be text")
    if not _encodable(value):
        raise InputError(f"{what} is not valid Unicode text (it holds a lone surrogate code point)")
    return value


def utc_now() -> str:
    """The current time as RFC 3339 UTC with seconds, the form qmem writes."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def content_hash(text: str) -> str:
    return sha256(normalize_text(text).encode("utf-8")).hexdigest()


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


_RECORD_COLUMNS = tuple(f.name for f in fields(Record))
#: The SELECT list that :func:`row_to_record` reads.
RECORD_COLUMNS_SQL = ", ".join(_RECORD_COLUMNS)


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
    return obs if _observation_encodable(obs) else None


def _observation_encodable(obs: Observation) -> bool:
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



# --- search results ----------------------------------------------------------------------

@dataclass(frozen=True)
class FindResult:
    """What :meth:`LocalIndex.find` found.

    ``match`` says how the leading records matched: ``all`` (every word), ``all-prefix``
    (every word, as prefixes) or ``any`` (no record had every word: a *partial* answer).
    The first ``complete`` records have every word; the rest have some of them.  ``more``
    is true when more records matched than ``limit`` let through.
    """

    records: tuple[Record, ...]
    terms: tuple[str, ...]
    match: str
    dropped_terms: int = 0
    stopwords: tuple[str, ...] = ()
    complete: int = 0
    more: bool = False

    @property
    def partial(self) -> bool:
        """True when no result has every word."""
        return self.match == "any"

    def to_json(self) -> dict[str, Any]:
        return {
            "match": self.match,
            "partial": self.partial,
            "terms": list(self.terms),
            "stopwords": list(self.stopwords),
            "dropped_terms": self.dropped_terms,
            "complete": self.complete,
            "more": self.more,
            "fallback": "local_sqlite",
            "results": [record.to_json() for record in self.records],
        }


@dataclass(frozen=True)
class IndexStatus:
    schema_version: int
    records: int
    full_text: int
    partial_text: int
    hidden: dict[str, int]
    duplicate_texts: int
    duplicate_records: int
    newest_learned_created_at: str | None
    lag_seconds: float | None
    queue: dict[str, int]
    import_files: int
    read_only: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "records": self.records,
            "coverage": {"full": self.full_text, "partial": self.partial_text},
            "hidden": dict(self.hidden),
            "duplicates": {"texts": self.duplicate_texts, "records": self.duplicate_records},
            "lag_seconds": self.lag_seconds,
            "newest_record_created_at": self.newest_learned_created_at,
            "queue": dict(self.queue),
            "session_files": self.import_files,
            "read_only": self.read_only,
        }


# --- the index ---------------------------------------------------------------------------

def _translate(exc: sqlite3.Error, name: str) -> LocalIndexError:
    """One clear error for an SQLite failure; the message names the file, not its path."""
    text = str(exc).lower()
    if isinstance(exc, sqlite3.DatabaseError) and ("malformed" in text or "not a database" in text
                                                    or "corrupt" in text):
        return CorruptIndexError(f"the local index {name} is damaged ({exc}); {RECOVERY}")
    if "readonly" in text or "read-only" in text:
        return _read_only_error(name)
    if "disk is full" in text or "database or disk is full" in text:
        return LocalIndexError(f"the disk holding the local index {name} is full; nothing was written")
    if "locked" in text or "busy" in text:
        return LocalIndexError(f"the local index {name} is busy (another qmem process holds it); try again")
    if "unable to open" in text:
        return LocalIndexError(f"cannot open the local index {name} (check the directory exists and is writable)")
    return LocalIndexError(f"the local index {name} failed: {exc}")


def _read_only_error(name: str) -> LocalIndexError:
    return LocalIndexError(f"the local index {name} is read-only; nothing was written")


def _cannot_write(exc: sqlite3.Error) -> bool:
    """True when SQLite failed because the file or its directory cannot be written."""
    code = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc).lower()
    return (code.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN"))
            or "readonly" in text or "read-only" in text or "unable to open" in text)


#: The visibility rules of a default search, as SQL over ``records AS r``.
_NOT_EXPIRED = ("(r.expires_at IS NULL OR julianday(r.expires_at) IS NULL "  # unparsable: not expired
                "OR julianday(r.expires_at) > julianday('now'))")


class LocalIndex:
    """The SQLite index.  Use as a context manager or call :meth:`close`.

    A connection is used by one thread at a time (a lock serialises callers), and
    several processes may open the same file.  ``progress(done, total)``, if given, is
    called while a migration re-indexes the records (e.g. :class:`qmem.cli.Progress`).
    """

    def __init__(self, path: Path, *, busy_timeout_ms: int = 5000,
                 progress: Callable[[int, int], None] | None = None) -> None:
        self.path = Path(path)
        self.name = self.path.name
        self.read_only = False
        self._lock = threading.RLock()
        self._timeout_ms = int(busy_timeout_ms)
        existed = check_ownership(self.path)  # reads only; raises for a file that is not qmem's
        if not existed:
            try:
                self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as exc:
                raise LocalIndexError(
                    f"cannot create the directory for the local index {self.name}: {exc.strerror or 'I/O error'}"
                ) from None
        try:
            self._conn = self._open_writable(progress)
        except sqlite3.Error as exc:
            if not (existed and _cannot_write(exc)):
                raise _translate(exc, self.name) from None
            self._conn = self._open_read_only()
            self.read_only = True
        if not existed:
            try:
                self.path.chmod(0o600)
            except OSError:
                pass

    def _connect(self, target: str, *, uri: bool = False) -> sqlite3.Connection:
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE below).
        conn = sqlite3.connect(target, uri=uri, timeout=self._timeout_ms / 1000, isolation_level=None,
                               check_same_thread=False)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {self._timeout_ms}")
        return conn

    def _open_writable(self, progress: Callable[[int, int], None] | None) -> sqlite3.Connection:
        conn = self._connect(str(self.path))
        try:
            version, application_id = _marks(conn)  # the first read: fails here if it cannot write
            if version > SCHEMA_VERSION:
                raise newer_schema_error(self.name, version)
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
            if version < SCHEMA_VERSION or application_id != APPLICATION_ID:
                self._migrate(conn, progress)
        except BaseException:
            conn.close()
            raise
        return conn

    def _migrate(self, conn: sqlite3.Connection, progress: Callable[[int, int], None] | None) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version, application_id = _marks(conn)  # again: another process may have migrated it
            if version > SCHEMA_VERSION:
                raise newer_schema_error(self.name, version)
            if version < SCHEMA_VERSION or application_id != APPLICATION_ID:
                migrate(conn, version, progress)
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise

    def _open_read_only(self) -> sqlite3.Connection:
        """A connection that cannot write, for a file or directory this process cannot write.

        In WAL mode even readers need the ``-shm`` file; when it cannot be created (a
        read-only directory) and no log holds data, the file alone is the whole database
        and is read as immutable.
        """
        failure: sqlite3.Error | None = None
        for immutable in (False, True):
            if immutable and has_log_content(self.path):
                break
            try:
                conn = self._connect(read_only_uri(self.path, immutable=immutable), uri=True)
            except sqlite3.Error as exc:
                failure = exc
                continue
            try:
                version = _marks(conn)[0]
            except sqlite3.Error as exc:
                conn.close()
                failure = exc
                continue
            if version > SCHEMA_VERSION:
                conn.close()
                raise newer_schema_error(self.name, version)
            return conn
        if failure is not None and not _cannot_write(failure):
            raise _translate(failure, self.name)
        raise LocalIndexError(
            f"the local index {self.name} is read-only and cannot be read here: its write-ahead log needs a "
            f"-shm file that cannot be created; open it once with write access (or check its permissions)")

    # -- lifecycle

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> "LocalIndex":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator["_Tx"]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``; rolled back on any exception.

        SQLite errors come out as :class:`LocalIndexError` with a clear message; on a
        read-only index it is raised before anything is attempted.
        """
        with self._lock:
            if self.read_only:
                raise _read_only_error(self.name)
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _translate(exc, self.name) from None
            try:
                yield _Tx(self._conn)
            except sqlite3.Error as exc:
                _rollback(self._conn)
                raise _translate(exc, self.name) from None
            except BaseException:
                _rollback(self._conn)
                raise
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                _rollback(self._conn)
                raise _translate(exc, self.name) from None

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """The connection for reads, with SQLite errors translated."""
        with self._lock:
            try:
                yield self._conn
            except sqlite3.Error as exc:
                raise _translate(exc, self.name) from None

    # -- meta

    def get_meta(self, key: str) -> str | None:
        _text_argument(key, "the meta key")
        with self.reading() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        _text_argument(key, "the meta key")
        _text_argument(value, "the meta value")
        with self.transaction() as tx:
            tx.execute("INSERT INTO meta (key, value) VALUES (?, ?) "
                       "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, value))

    # -- records

    def get(self, record_id: str) -> Record | None:
        """The record with gateway id or local id ``record_id``."""
        _text_argument(record_id, "the record id")
        with self.reading() as conn:
            row = conn.execute(f"SELECT {RECORD_COLUMNS_SQL} FROM records WHERE id = ? OR local_id = ?",
                               (record_id, record_id)).fetchone()
        return row_to_record(row) if row else None

    def learn(self, observations: Iterable[Observation], *, meta: Mapping[str, str] | None = None) -> dict[str, int]:
        """Merge observations in one transaction; returns counts added / updated / unchanged.

        ``meta`` entries (e.g. the export cursor) are written in the same transaction, so
        they never get ahead of the records they describe.  An observation holding text
        that cannot be stored raises InputError and nothing is written.
        """
        counts = {"added": 0, "updated": 0, "unchanged": 0}
        now = utc_now()
        for key, value in (meta or {}).items():
            _text_argument(key, "the meta key")
            _text_argument(value, "the meta value")
        with self.transaction() as tx:
            for obs in observations:
                counts[tx.learn_one(obs, now)] += 1
            for key, value in (meta or {}).items():
                tx.execute("INSERT INTO meta (key, value) VALUES (?, ?) "
                           "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, value))
        return counts

    def find(
        self,
        query: str,
        *,
        project: str | None = None,
        kind: str | None = None,
        scope: str | None = None,
        limit: int = 10,
        superseded: bool = False,
        private: bool = False,
        deleted: bool = False,
    ) -> FindResult:
        """Lexical search; see the module docstring for the rules.

        ``project``, ``kind`` and ``scope`` match exactly (a record whose scope is not
        known does not match a scope).  Raises InputError when the query has no word to
        search for, holds text that cannot be stored, or a filter is bad.
        """
        _text_argument(query, "the query")
        if kind is not None and kind not in KINDS:
            raise InputError(f"kind must be one of: {', '.join(KINDS)}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_FIND_LIMIT:
            raise InputError(f"limit must be a whole number from 1 to {MAX_FIND_LIMIT}")
        parsed = query_terms(query)
        if not parsed.terms:
            raise InputError("the query has no words to search for")
        where = ["records_fts MATCH :match"]
        params: dict[str, Any] = {}
        if not superseded:
            where.append("r.superseded_by IS NULL")
        if not private:
            where.append("r.private = 0")
        if not deleted:
            where.append("r.deleted_at IS NULL")
            where.append(_NOT_EXPIRED)
        for column, name, value in (("project_id", "project", project), ("kind", "kind", kind),
                                    ("scope", "scope", scope)):
            if value is not None:
                params[name] = _text_argument(value, name)
                where.append(f"r.{column} = :{name}")
        # Equal scores keep the order in which records were learned (rowid), in both plans:
        # with no narrowing filter, ORDER BY rank alone takes FTS5's own sorted output (stable,
        # read in rowid order; a tie-break column would make SQLite rank and sort every match
        # again: 2x the p50 at 100k records).  With a project or scope, rank then rowid lets
        # SQLite filter first and rank only what passes, in its top-N sorter (faster there).
        narrowed = project is not None or scope is not None
        order = "records_fts.rank, r.rowid" if narrowed else "records_fts.rank"
        sql = (f"SELECT {', '.join('r.' + c for c in _RECORD_COLUMNS)} FROM records_fts "
               f"JOIN records AS r ON r.rowid = records_fts.rowid WHERE {' AND '.join(where)} "
               f"ORDER BY {order} LIMIT :limit")
        with self.reading() as conn:
            def search(expression: str, count: int) -> list[sqlite3.Row]:
                return conn.execute(sql, {**params, "match": expression, "limit": count}).fetchall()

            rows, match, complete = _ranked(search, parsed.terms, limit)
        return FindResult(records=tuple(row_to_record(row) for row in rows[:limit]), terms=parsed.terms,
                          match=match, dropped_terms=parsed.dropped, stopwords=parsed.stopwords,
                          complete=min(complete, limit), more=len(rows) > limit)

    def meta(self) -> dict[str, Any]:
        """The gateway's ``/v1/meta`` shape computed from visible local records."""
        visible = f"r.superseded_by IS NULL AND r.private = 0 AND r.deleted_at IS NULL AND {_NOT_EXPIRED}"
        with self.reading() as conn:
            counts: dict[str, dict[str, int]] = {}
            for scope, kind, n in conn.execute(
                    f"SELECT coalesce(scope, '?'), coalesce(kind, '?'), count(*) FROM records AS r WHERE {visible} "
                    f"GROUP BY 1, 2"):
                counts.setdefault(scope, {})[kind] = n
            projects = [row[0] for row in conn.execute(
                f"SELECT project_id FROM records AS r WHERE {visible} AND project_id IS NOT NULL "
                f"GROUP BY project_id ORDER BY count(*) DESC, project_id LIMIT 200")]
            agents = [row[0] for row in conn.execute(
                f"SELECT agent_id FROM records AS r WHERE {visible} AND agent_id IS NOT NULL "
                f"GROUP BY agent_id ORDER BY count(*) DESC, agent_id LIMIT 200")]
            superseded = conn.execute("SELECT count(*) FROM records WHERE superseded_by IS NOT NULL").fetchone()[0]
        return {"counts": counts, "projects": projects, "agents": agents, "superseded": superseded}

    def status(self) -> IndexStatus:
        with self.reading() as conn:
            def one(sql: str) -> Any:
                return conn.execute(sql).fetchone()[0]

            total = one("SELECT count(*) FROM records")
            partial = one("SELECT count(*) FROM records WHERE coverage = 'partial'")
            hidden = {
                "superseded": one("SELECT count(*) FROM records WHERE superseded_by IS NOT NULL"),
                "private": one("SELECT count(*) FROM records WHERE private = 1"),
                "deleted": one("SELECT count(*) FROM records WHERE deleted_at IS NOT NULL"),
                "expired": one("SELECT count(*) FROM records WHERE julianday(expires_at) <= julianday('now')"),
            }
            dup = conn.execute(
                "SELECT count(*), coalesce(sum(n), 0) FROM (SELECT count(*) AS n FROM records "
                "WHERE text != '' GROUP BY content_hash HAVING n > 1)").fetchone()
            newest = conn.execute(
                "SELECT created_at, (julianday('now') - julianday(created_at)) * 86400.0 FROM records "
                "WHERE state IN ('observed', 'synced') AND julianday(created_at) IS NOT NULL "
                "ORDER BY julianday(created_at) DESC LIMIT 1").fetchone()
            queue = {state: 0 for state in ("pending", "synced", "duplicate", "failed")}
            for state, count in conn.execute(
                    "SELECT state, count(*) FROM records WHERE local_id IS NOT NULL GROUP BY state"):
                queue[state] = count
            files = one("SELECT count(*) FROM import_files")
            version = one("PRAGMA user_version")
        return IndexStatus(
            schema_version=version, records=total, full_text=total - partial, partial_text=partial,
            hidden=hidden, duplicate_texts=dup[0], duplicate_records=dup[1],
            newest_learned_created_at=newest[0] if newest else None,
            lag_seconds=round(max(newest[1], 0.0), 1) if newest else None,
            queue=queue, import_files=files, read_only=self.read_only,
        )


def _marks(conn: sqlite3.Connection) -> tuple[int, int]:
    """The file's ``user_version`` and ``application_id``."""
    return (conn.execute("PRAGMA user_version").fetchone()[0],
            conn.execute("PRAGMA application_id").fetchone()[0])


def _rollback(conn: sqlite3.Connection) -> None:
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error:
        pass  # no transaction left to roll back: SQLite already did it


def _ranked(search: Callable[[str, int], list[sqlite3.Row]], terms: tuple[str, ...],
            limit: int) -> tuple[list[sqlite3.Row], str, int]:
    """Rows in answer order (up to ``limit + 1``), how they matched, and how many have every word.

    Every word first, then any word to fill up to the limit, each by bm25.  Words are
    tried as prefixes (``config`` → ``configuration``) only when no record has any of
    them as a word: a prefix query costs FTS5 about twice as much, and a stem already
    covers the other forms of a word.
    """
    want = limit + 1  # one more than is shown says whether there is more
    for prefix in (False, True):
        rows = search(match_expression(terms, prefix=prefix), want)
        complete = len(rows)
        if len(rows) < want and len(terms) > 1:
            seen = {row["id"] for row in rows}
            extra = search(match_expression(terms, prefix=prefix, any_term=True), want + len(rows))
            rows += [row for row in extra if row["id"] not in seen][:want - len(rows)]
        if rows:
            match = ("all-prefix" if prefix else "all") if complete else "any"
            return rows, match, complete
    return [], "all", 0




class _Tx:
    """The connection inside :meth:`LocalIndex.transaction`, with record helpers."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    def get(self, record_id: str) -> Record | None:
        row = self.conn.execute(f"SELECT {RECORD_COLUMNS_SQL} FROM records WHERE id = ?",
                                (record_id,)).fetchone()
        return row_to_record(row) if row else None

    def insert(self, record: Record) -> None:
        values = _record_values(record)
        self.conn.execute(f"INSERT INTO records ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})",
                          tuple(values.values()))

    def update(self, record: Record, *, where_id: str | None = None, release_claim: bool = False) -> None:
        values = _record_values(record)
        if release_claim:
            values.update(claim_token=None, claim_until=None)
        assignments = ", ".join(f"{name} = ?" for name in values)
        self.conn.execute(f"UPDATE records SET {assignments} WHERE id = ?",
                          (*values.values(), where_id or record.id))

    def learn_one(self, obs: Observation, now: str) -> str:
        """Merge one observation: ``added``, ``updated`` or ``unchanged``.

        InputError (the transaction is then rolled back) if it holds text that cannot be stored.
        """
        if not _observation_encodable(obs):
            raise InputError("a learned record holds text that is not valid Unicode (a lone surrogate code point); "
                             "nothing was written")
        existing = self.get(obs.id)
        merged = merge_observation(existing, obs, now)
        if merged is None:
            return "unchanged"
        if existing is None:
            self.insert(merged)
            return "added"
        self.update(merged)
        return "updated"


def _record_values(record: Record) -> dict[str, Any]:
    values = {name: getattr(record, name) for name in _RECORD_COLUMNS}
    values["private"] = 1 if record.private else 0
    return values


def row_to_record(row: sqlite3.Row) -> Record:
    values = dict(zip(_RECORD_COLUMNS, row, strict=True))
    values["private"] = bool(values["private"])
    return Record(**values)


@functools.lru_cache(maxsize=1)
def this_machine() -> str:
    """The provenance name of this machine (its host name)."""
    return socket.gethostname() or "unknown"
