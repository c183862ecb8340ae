"""The local index: one SQLite file that answers searches when the gateway cannot.

Promises:

* **One file**, WAL mode, a busy timeout so that the host bridge and the CLIs can use
  it at once, and ``PRAGMA user_version`` migrations applied in one transaction.
* **A file that is not a qmem index is never written.**  Opening a non-SQLite file, a
  damaged one, someone else's database or one made by a newer qmem raises
  :class:`~qmem.errors.CorruptIndexError` (or :class:`~qmem.errors.LocalIndexError`)
  saying how to recover; the file is left exactly as it was.  Every write is one
  transaction, so a full or read-only disk leaves nothing half-written.
* **Records** are what qmem has learned about gateway records (from its own answers,
  session files, ``pull``) plus the outbox's local records.  Learning merges: full text
  is never replaced by partial text, and supersession or deletion, once known, sticks.
* **find** treats the user's words as data: each word becomes a quoted FTS5 string, so
  quotes, ``*``, ``:``, ``NEAR``, ``AND/OR/NOT``, parentheses and control characters are
  matched literally or dropped and never raise.  It widens only when nothing matches:
  every word exactly, then every word as a prefix, then any word — and that last answer
  says it is partial.  Superseded, private, deleted and expired records are hidden unless
  asked for.
"""

from __future__ import annotations

import functools
import os
import socket
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from datetime import datetime, timezone
from hashlib import sha256
from pathlib import Path
from typing import Any

from .errors import CorruptIndexError, InputError, LocalIndexError
from .records import KINDS, is_local_id, normalize_text

__all__ = [
    "SCHEMA_VERSION",
    "Record",
    "Observation",
    "FindResult",
    "IndexStatus",
    "LocalIndex",
    "query_terms",
    "match_expression",
    "merge_observation",
    "observation_from_record",
    "content_hash",
    "utc_now",
]

SCHEMA_VERSION = 2

#: Record states.  ``synced``: confirmed by the gateway to this qmem; ``observed``: seen in
#: a session file or a search answer; ``pending``/``failed``/``duplicate``: outbox records.
STATES = ("pending", "synced", "observed", "failed", "duplicate")

MAX_QUERY_TERMS = 32
MAX_TERM_CHARS = 64
MAX_FIND_LIMIT = 1000

_SQLITE_MAGIC = b"SQLite format 3\x00"

_RECOVERY = (
    "move it aside (qmem leaves it untouched) and run `python -m qmem.local import` to rebuild "
    "the index from session files; records still queued live only in that file, so keep it "
    "and try `sqlite3 qmem.sqlite .recover` on a copy"
)

_MIGRATIONS: tuple[str, ...] = (
    # v1
    """
    CREATE TABLE records (
        rowid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        local_id TEXT UNIQUE,
        text TEXT NOT NULL,
        kind TEXT,
        project_id TEXT,
        scope TEXT,
        agent_id TEXT,
        source TEXT,
        created_at TEXT,
        expires_at TEXT,
        supersedes_id TEXT,
        supersede_reason TEXT,
        superseded_by TEXT,
        private INTEGER NOT NULL DEFAULT 0 CHECK (private IN (0, 1)),
        deleted_at TEXT,
        state TEXT NOT NULL CHECK (state IN ('pending', 'synced', 'observed', 'failed', 'duplicate')),
        reason TEXT,
        duplicate_of TEXT,
        coverage TEXT NOT NULL CHECK (coverage IN ('full', 'partial')),
        machine TEXT,
        session_file TEXT,
        tool TEXT,
        content_hash TEXT NOT NULL,
        learned_at TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        claim_token TEXT,
        claim_until REAL
    );
    CREATE INDEX records_content_hash ON records (content_hash);
    CREATE INDEX records_queue ON records (state, rowid) WHERE local_id IS NOT NULL;
    CREATE INDEX records_supersedes ON records (supersedes_id) WHERE supersedes_id IS NOT NULL;
    CREATE VIRTUAL TABLE records_fts USING fts5 (
        text, content = 'records', content_rowid = 'rowid',
        tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3'
    );
    CREATE TRIGGER records_fts_insert AFTER INSERT ON records BEGIN
        INSERT INTO records_fts (rowid, text) VALUES (new.rowid, new.text);
    END;
    CREATE TRIGGER records_fts_delete AFTER DELETE ON records BEGIN
        INSERT INTO records_fts (records_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
    END;
    CREATE TRIGGER records_fts_update AFTER UPDATE OF text ON records BEGIN
        INSERT INTO records_fts (records_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
        INSERT INTO records_fts (rowid, text) VALUES (new.rowid, new.text);
    END;
    CREATE TABLE import_files (
        key TEXT PRIMARY KEY,
        size INTEGER NOT NULL,
        mtime_ns INTEGER NOT NULL,
        inode INTEGER NOT NULL,
        offset INTEGER NOT NULL,
        head TEXT NOT NULL
    );
    CREATE TABLE import_calls (
        file_key TEXT NOT NULL,
        call_id TEXT NOT NULL,
        name TEXT NOT NULL,
        arguments TEXT NOT NULL,
        PRIMARY KEY (file_key, call_id)
    );
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    """,
    # v2: a synced outbox record's local id is remapped in superseded_by too; without this
    # index every sync scanned the whole table.
    """
    CREATE INDEX records_superseded_by ON records (superseded_by) WHERE superseded_by IS NOT NULL;
    """,
)


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
    gateway records).  ``fallback`` fills text and metadata the record does not carry,
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
    return Observation(
        id=record_id, text=pick("text"), coverage=coverage, state=state,
        kind=pick("kind"), project_id=pick("project_id"), scope=pick("scope"), agent_id=pick("agent_id"),
        source=pick("source"), created_at=pick("created_at", own_only=True), expires_at=pick("expires_at"),
        supersedes_id=pick("supersedes_id"), supersede_reason=pick("supersede_reason"),
        superseded_by=pick("superseded_by", own_only=True), private=private if isinstance(private, bool) else None,
        deleted_at=pick("deleted_at", own_only=True), machine=machine, session_file=session_file, tool=tool,
    )


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


# --- query building (pure) ---------------------------------------------------------------

@dataclass(frozen=True)
class QueryTerms:
    terms: tuple[str, ...]
    dropped: int  # words beyond MAX_QUERY_TERMS, ignored


def query_terms(query: str) -> QueryTerms:
    """Split a user's query into words to match literally.

    Control characters become spaces; a chunk without a letter or digit (``*``, ``"``,
    ``--``) is dropped; each word is cut at :data:`MAX_TERM_CHARS`; duplicates go.
    """
    cleaned = "".join(" " if (ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0) else ch for ch in query)
    words: dict[str, str] = {}  # casefolded -> first spelling, in query order
    total = 0
    for chunk in cleaned.split():
        if not any(ch.isalnum() for ch in chunk):
            continue
        word = chunk[:MAX_TERM_CHARS]
        if word.casefold() in words:
            continue
        total += 1
        if len(words) < MAX_QUERY_TERMS:
            words[word.casefold()] = word
    terms = tuple(words.values())
    return QueryTerms(terms=terms, dropped=total - len(terms))


def match_expression(terms: Iterable[str], *, prefix: bool = False, any_term: bool = False) -> str:
    """An FTS5 MATCH expression in which every term is a quoted string.

    Inside an FTS5 string only ``"`` is special (doubled to escape), so no word can be
    read as an operator, a column filter or a parenthesis.  FTS5 tokenizes the string
    like the indexed text, so ``foo:bar`` matches the phrase "foo bar".  ``prefix``
    lets each term match as the start of a word.
    """
    star = "*" if prefix else ""
    quoted = ['"' + term.replace('"', '""') + '"' + star for term in terms]
    return (" OR " if any_term else " AND ").join(quoted)


#: How find widens, narrowest first: (label, prefix, any_term).  Exact words first because
#: the user's words are matched literally and because a prefix query costs FTS5 about twice
#: as much; prefixes (``config`` → ``configuration``) only when no record has every word.
_FIND_STAGES = (("all", False, False), ("all-prefix", True, False), ("any", True, True))


@dataclass(frozen=True)
class FindResult:
    records: tuple[Record, ...]
    terms: tuple[str, ...]
    match: str  # "all" (every word), "all-prefix" (every word, as prefixes) or "any" (partial)
    dropped_terms: int = 0

    @property
    def partial(self) -> bool:
        """True when no record had every word and any word was enough."""
        return self.match == "any"

    def to_json(self) -> dict[str, Any]:
        return {
            "match": self.match,
            "partial": self.partial,
            "terms": list(self.terms),
            "dropped_terms": self.dropped_terms,
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
        }


# --- the index ---------------------------------------------------------------------------

def _check_header(path: Path) -> bool:
    """True if ``path`` exists with content; CorruptIndexError if it is not SQLite."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(_SQLITE_MAGIC))
    except FileNotFoundError:
        return False
    except IsADirectoryError:
        raise LocalIndexError(f"the local index path {path.name} is a directory") from None
    except OSError as exc:
        raise LocalIndexError(f"cannot read the local index {path.name}: {exc.strerror or 'I/O error'}") from None
    if not head:
        return False
    if head != _SQLITE_MAGIC:
        raise CorruptIndexError(f"the local index {path.name} is not an SQLite database; {_RECOVERY}")
    return True


def _translate(exc: sqlite3.Error, name: str) -> LocalIndexError:
    """One clear error for an SQLite failure; the message names the file, not its path."""
    text = str(exc).lower()
    if isinstance(exc, sqlite3.DatabaseError) and ("malformed" in text or "not a database" in text
                                                    or "corrupt" in text):
        return CorruptIndexError(f"the local index {name} is damaged ({exc}); {_RECOVERY}")
    if "readonly" in text or "read-only" in text:
        return LocalIndexError(f"the local index {name} is read-only; nothing was written")
    if "disk is full" in text or "database or disk is full" in text:
        return LocalIndexError(f"the disk holding the local index {name} is full; nothing was written")
    if "locked" in text or "busy" in text:
        return LocalIndexError(f"the local index {name} is busy (another qmem process holds it); try again")
    if "unable to open" in text:
        return LocalIndexError(f"cannot open the local index {name} (check the directory exists and is writable)")
    return LocalIndexError(f"the local index {name} failed: {exc}")


class LocalIndex:
    """The SQLite index.  Use as a context manager or call :meth:`close`.

    A connection is used by one thread at a time (a lock serialises callers), and
    several processes may open the same file.
    """

    def __init__(self, path: Path, *, busy_timeout_ms: int = 5000) -> None:
        self.path = Path(path)
        self.name = self.path.name
        existed = _check_header(self.path)
        if not existed:
            try:
                self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as exc:
                raise LocalIndexError(
                    f"cannot create the directory for the local index {self.name}: {exc.strerror or 'I/O error'}"
                ) from None
        self._lock = threading.RLock()
        try:
            # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE below).
            self._conn = sqlite3.connect(str(self.path), timeout=busy_timeout_ms / 1000,
                                         isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise _translate(exc, self.name) from None
        try:
            self._conn.row_factory = sqlite3.Row
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self._check_owner(existed)
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = FULL")
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._migrate()
        except sqlite3.Error as exc:
            self._conn.close()
            raise _translate(exc, self.name) from None
        except BaseException:
            self._conn.close()
            raise
        if not existed:
            try:
                os.chmod(self.path, 0o600)
            except OSError:
                pass

    # -- lifecycle

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> "LocalIndex":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_owner(self, existed: bool) -> None:
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise LocalIndexError(
                f"the local index {self.name} was made by a newer qmem (schema v{version}; this qmem "
                f"knows v{SCHEMA_VERSION}); upgrade qmem or point QMEM_SQLITE at another file"
            )
        if version == 0 and existed:
            tables = self._conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if tables:
                raise CorruptIndexError(
                    f"the local index {self.name} is an SQLite database that qmem did not create; "
                    f"it was left untouched — point QMEM_SQLITE or localDbPath at another file"
                )

    def _migrate(self) -> None:
        with self.transaction() as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            for number in range(version, SCHEMA_VERSION):
                conn.executescript_in_transaction(_MIGRATIONS[number])
            if version < SCHEMA_VERSION:
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @contextmanager
    def transaction(self) -> Iterator["_Tx"]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``; rolled back on any exception.

        SQLite errors come out as :class:`LocalIndexError` with a clear message.
        """
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _translate(exc, self.name) from None
            try:
                yield _Tx(self._conn)
            except sqlite3.Error as exc:
                self._rollback()
                raise _translate(exc, self.name) from None
            except BaseException:
                self._rollback()
                raise
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                raise _translate(exc, self.name) from None

    def _rollback(self) -> None:
        try:
            self._conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # no transaction left to roll back: SQLite already did it

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
        with self.reading() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as tx:
            tx.execute("INSERT INTO meta (key, value) VALUES (?, ?) "
                       "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, value))

    # -- records

    def get(self, record_id: str) -> Record | None:
        """The record with gateway id or local id ``record_id``."""
        with self.reading() as conn:
            row = conn.execute(f"SELECT {', '.join(_RECORD_COLUMNS)} FROM records WHERE id = ? OR local_id = ?",
                               (record_id, record_id)).fetchone()
        return row_to_record(row) if row else None

    def learn(self, observations: Iterable[Observation], *, meta: Mapping[str, str] | None = None) -> dict[str, int]:
        """Merge observations in one transaction; returns counts added / updated / unchanged.

        ``meta`` entries (e.g. the export cursor) are written in the same transaction, so
        they never get ahead of the records they describe.
        """
        counts = {"added": 0, "updated": 0, "unchanged": 0}
        now = utc_now()
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
        limit: int = 10,
        superseded: bool = False,
        private: bool = False,
        deleted: bool = False,
    ) -> FindResult:
        """Lexical search; see the module docstring for the rules.

        Raises InputError when the query has no word to search for or a filter is bad.
        """
        if kind is not None and kind not in KINDS:
            raise InputError(f"kind must be one of: {', '.join(KINDS)}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_FIND_LIMIT:
            raise InputError(f"limit must be a whole number from 1 to {MAX_FIND_LIMIT}")
        parsed = query_terms(query)
        if not parsed.terms:
            raise InputError("the query has no words to search for")
        where = ["records_fts MATCH :match"]
        params: dict[str, Any] = {"limit": limit}
        if not superseded:
            where.append("r.superseded_by IS NULL")
        if not private:
            where.append("r.private = 0")
        if not deleted:
            where.append("r.deleted_at IS NULL")
            # julianday() is NULL for an unparsable time, which then counts as not expired.
            where.append("(r.expires_at IS NULL OR julianday(r.expires_at) IS NULL "
                         "OR julianday(r.expires_at) > julianday('now'))")
        if project is not None:
            where.append("r.project_id = :project")
            params["project"] = project
        if kind is not None:
            where.append("r.kind = :kind")
            params["kind"] = kind
        # No tie-break column after rank: it would stop SQLite's top-N sort and double the p95.
        sql = (f"SELECT {', '.join('r.' + c for c in _RECORD_COLUMNS)} FROM records_fts "
               f"JOIN records AS r ON r.rowid = records_fts.rowid WHERE {' AND '.join(where)} "
               f"ORDER BY records_fts.rank LIMIT :limit")
        rows: list[sqlite3.Row] = []
        match = "all"
        with self.reading() as conn:
            for stage, prefix, any_term in _FIND_STAGES:
                if any_term and len(parsed.terms) == 1:
                    break  # "any" of one word is "all" of it
                match = stage
                params["match"] = match_expression(parsed.terms, prefix=prefix, any_term=any_term)
                rows = conn.execute(sql, params).fetchall()
                if rows:
                    break
        return FindResult(records=tuple(row_to_record(row) for row in rows), terms=parsed.terms,
                          match=match, dropped_terms=parsed.dropped)

    def meta(self) -> dict[str, Any]:
        """The gateway's ``/v1/meta`` shape computed from visible local records."""
        visible = ("superseded_by IS NULL AND private = 0 AND deleted_at IS NULL AND "
                   "(expires_at IS NULL OR julianday(expires_at) IS NULL OR julianday(expires_at) > julianday('now'))")
        with self.reading() as conn:
            counts: dict[str, dict[str, int]] = {}
            for scope, kind, n in conn.execute(
                    f"SELECT coalesce(scope, '?'), coalesce(kind, '?'), count(*) FROM records WHERE {visible} "
                    f"GROUP BY 1, 2"):
                counts.setdefault(scope, {})[kind] = n
            projects = [row[0] for row in conn.execute(
                f"SELECT project_id FROM records WHERE {visible} AND project_id IS NOT NULL "
                f"GROUP BY project_id ORDER BY count(*) DESC, project_id LIMIT 200")]
            agents = [row[0] for row in conn.execute(
                f"SELECT agent_id FROM records WHERE {visible} AND agent_id IS NOT NULL "
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
            queue=queue, import_files=files,
        )


class _Tx:
    """The connection inside :meth:`LocalIndex.transaction`, with record helpers."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    def executescript_in_transaction(self, script: str) -> None:
        # sqlite3.executescript() would COMMIT first; run statement by statement instead.
        statement = ""
        for line in script.splitlines(keepends=True):
            statement += line
            if sqlite3.complete_statement(statement):
                self.conn.execute(statement)
                statement = ""
        if statement.strip():
            raise sqlite3.ProgrammingError("incomplete statement in migration")

    def get(self, record_id: str) -> Record | None:
        row = self.conn.execute(f"SELECT {', '.join(_RECORD_COLUMNS)} FROM records WHERE id = ?",
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
