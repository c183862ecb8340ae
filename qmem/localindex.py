"""The local index: one SQLite file that answers searches when the gateway cannot, and the
one module whose operations read and write its tables.

Promises:

* **One owner.**  Every operation on ``records``, ``meta``, ``import_files`` and
  ``import_calls`` is here (their schema: :mod:`qmem.localdb.schema`; the row statements the
  operations compose: :mod:`qmem.localdb.rows`); the outbox, sync and session import call the
  named operations below.  Each operation is one transaction, so a full or read-only disk
  leaves nothing half-written.  Opening, transactions and the read-only fallback are
  :class:`qmem.localdb.file.IndexFile`'s.
* **Records** are what qmem has learned about gateway records (from its own answers,
  session files, ``pull``) plus the outbox's local records.  Learning merges
  (:func:`qmem.localdb.record.merge_observation`): full text is never replaced by partial text,
  and supersession or deletion, once known, sticks.
* **find** ranks as :mod:`qmem.localdb.search` says (words as data, every word first, then any
  word).  Equal scores keep the order in which records were first learned.  Superseded,
  private, deleted and expired records are hidden unless asked for; ``project``, ``kind``
  and ``scope`` match exactly.
* **The outbox's rows.**  A queued record is keyed by its local id (its Idempotency-Key); a
  pending correction marks its target ``superseded_by`` its local id at once, the mark
  follows it to its gateway id and is lifted if the gateway refuses it.  Claims are taken
  inside ``BEGIN IMMEDIATE``, so a pending row goes to one claimant at a time.  A row the
  gateway accepted takes its id in place (its full-text entry follows, keyed by rowid) or
  merges with the row learned meanwhile under that id, and every local-id reference follows.
* **Text that cannot be stored is input, not a crash.**  A lone surrogate in a query,
  filter or id raises :class:`~qmem.errors.InputError`.
"""

from __future__ import annotations

import json
import sqlite3

from .errors import InputError
from .records import QUEUE_LIMIT
from .localdb import rows as indexrows
from .localdb.file import IndexFile
from .localdb.record import (
    RECORD_COLUMNS, Observation, Outcome, Record, content_hash, merge_observation, storable_text, utc_now,
)
from .localdb.rows import RECORD_COLUMNS_SQL, row_to_record
from .localdb.search import FindResult, find_terms, ranked
from .valueclass import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any

__all__ = ["LocalIndex", "IndexStatus", "ImportedFile", "QueueReport"]


@dataclass(frozen=True)
class QueueReport:
    """Counts by state and the records listed: the first ``limit`` (None: all); ``more`` says
    that the list was cut."""

    counts: dict[str, int]
    records: tuple[Record, ...]
    limit: int | None = QUEUE_LIMIT
    more: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"counts": dict(self.counts), "limit": self.limit, "more": self.more,
                "records": [record.to_json() for record in self.records]}


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
    read_only_reason: str | None = None  # e.g. "the disk holding it is full; reads come from a snapshot …"

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
            "read_only_reason": self.read_only_reason,
        }


@dataclass(frozen=True)
class ImportedFile:
    """How far a session file was imported, and what it looked like then."""

    size: int
    mtime_ns: int
    inode: int
    offset: int
    head: str  # digest of the first bytes
    tail: str  # digest of the bytes just before ``offset`` ('' when an older qmem saved the state)


if TYPE_CHECKING:
    #: Calls read from a session file whose results were not written yet: ``{call id: (tool, arguments)}``.
    Calls = Mapping[str, tuple[str, dict[str, Any]]]

#: Whether a record's expiry has passed, as SQL over ``records AS r``: the one test behind
#: find, meta and status.  Expiries are stored in one form that julianday() reads
#: (:func:`qmem.localdb.record.stored_time`); one that is no time at all (NULL here) never passes.
_EXPIRED = "julianday(r.expires_at) <= julianday('now')"
_NOT_EXPIRED = f"({_EXPIRED}) IS NOT 1"


#: Pages a status probe writes: a little more than one store writes (8 pages on a small index).
PROBE_PAGES = 12


def _probe_write(conn: sqlite3.Connection) -> None:
    """About a store's worth of pages written (and then rolled back): one meta row's overflow."""
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('write-probe', zeroblob(?))",
                 (PROBE_PAGES * 4096,))


class LocalIndex(IndexFile):
    """The index: :class:`~qmem.localdb.file.IndexFile` (opening, transactions, read-only) plus
    every operation on its tables.  Use as a context manager or call :meth:`close`."""

    def __enter__(self) -> "LocalIndex":
        return self

    # -- meta

    def get_meta(self, key: str) -> str | None:
        storable_text(key, "the meta key")
        with self.reading() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        storable_text(key, "the meta key")
        storable_text(value, "the meta value")
        with self.transaction() as conn:
            indexrows.set_meta(conn, key, value)

    # -- records

    def get(self, record_id: str) -> Record | None:
        """The record with gateway id or local id ``record_id``."""
        storable_text(record_id, "the record id")
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
            storable_text(key, "the meta key")
            storable_text(value, "the meta value")
        with self.transaction() as conn:
            for obs in observations:
                counts[indexrows.learn_observation(conn, obs, now)] += 1
            for key, value in (meta or {}).items():
                indexrows.set_meta(conn, key, value)
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
        parsed = find_terms(query, kind=kind, limit=limit)
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
                params[name] = storable_text(value, name)
                where.append(f"r.{column} = :{name}")
        # Equal scores keep the order in which records were learned (rowid), in both plans:
        # with no narrowing filter, ORDER BY rank alone takes FTS5's own sorted output (stable,
        # read in rowid order; a tie-break column would make SQLite rank and sort every match
        # again: 2x the p50 at 100k records).  With a project or scope, rank then rowid lets
        # SQLite filter first and rank only what passes, in its top-N sorter (faster there).
        narrowed = project is not None or scope is not None
        order = "records_fts.rank, r.rowid" if narrowed else "records_fts.rank"
        sql = (f"SELECT {', '.join('r.' + c for c in RECORD_COLUMNS)} FROM records_fts "
               f"JOIN records AS r ON r.rowid = records_fts.rowid WHERE {' AND '.join(where)} "
               f"ORDER BY {order} LIMIT :limit")
        with self.reading() as conn:
            def search(expression: str, count: int) -> list[sqlite3.Row]:
                return conn.execute(sql, {**params, "match": expression, "limit": count}).fetchall()

            rows, match, complete = ranked(search, parsed.terms, limit)
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
                "expired": one(f"SELECT count(*) FROM records AS r WHERE {_EXPIRED}"),
            }
            dup = conn.execute(
                "SELECT count(*), coalesce(sum(n), 0) FROM (SELECT count(*) AS n FROM records "
                "WHERE text != '' GROUP BY content_hash HAVING n > 1)").fetchone()
            newest = conn.execute(
                "SELECT created_at, (julianday('now') - julianday(created_at)) * 86400.0 FROM records "
                "WHERE state IN ('observed', 'synced') AND julianday(created_at) IS NOT NULL "
                "ORDER BY julianday(created_at) DESC LIMIT 1").fetchone()
            queue = indexrows.queue_counts(conn)
            files = one("SELECT count(*) FROM import_files")
            version = one("PRAGMA user_version")
        # What a store would do, not what the open found: a file that opened writable on a full
        # disk (its -shm and -wal already there) still refuses a write.
        reason = self.write_would_fail(_probe_write)
        return IndexStatus(
            schema_version=version, records=total, full_text=total - partial, partial_text=partial,
            hidden=hidden, duplicate_texts=dup[0], duplicate_records=dup[1],
            newest_learned_created_at=newest[0] if newest else None,
            lag_seconds=round(max(newest[1], 0.0), 1) if newest else None,
            queue=queue, import_files=files, read_only=reason is not None, read_only_reason=reason,
        )

    def enrich_candidates(self, *, everything: bool = False) -> list[str]:
        """Ids of gateway records whose text is partial or missing (``everything``: all of them),
        synced outbox records included, in the order they were learned."""
        where = "local_id IS NULL OR state = 'synced'" if everything else \
            "(coverage = 'partial' OR text = '') AND (local_id IS NULL OR state = 'synced')"
        with self.reading() as conn:
            return [row[0] for row in conn.execute(f"SELECT id FROM records WHERE {where} ORDER BY rowid")]

    # -- the outbox's rows (qmem.localdb.outbox decides what they mean)

    def add_queued(self, record: Record, *, claim: tuple[str, float] | None = None) -> tuple[Record, bool]:
        """Add an outbox row keyed by its local id; ``(row, True)``, or the row already known
        under that key (as local or gateway id) and False, with nothing written.

        A pending correction marks its target (by gateway or local id) superseded by its
        local id, unless the target already knows what superseded it.  With ``claim``
        (token, until) the new row is claimed in the same transaction, as :meth:`claim_pending`
        would claim it: no flusher takes it while that claim holds.
        """
        if record.local_id is None or record.id != record.local_id:
            raise ValueError("a queued record is keyed by its local id")
        with self.transaction() as conn:
            row, added = indexrows.insert_queued(conn, record)
            if added and claim is not None:
                conn.execute("UPDATE records SET claim_token = ?, claim_until = ? WHERE local_id = ?",
                             (*claim, record.local_id))
            return row, added

    def claim_pending(self, limit: int, *, token: str, now: float, until: float,
                      holder_is_gone: Callable[[str], bool]) -> list[Record]:
        """Claim up to ``limit`` pending outbox rows, oldest first, as ``token`` until ``until``.

        A row is free when it has no claim or its claim ran out before ``now``; a claim still
        running whose token ``holder_is_gone`` says is dead is taken over too.
        """
        with self.transaction() as conn:
            chosen = [row[0] for row in conn.execute(
                "SELECT rowid FROM records WHERE local_id IS NOT NULL AND state = 'pending' "
                "AND (claim_token IS NULL OR claim_until < ?) ORDER BY rowid LIMIT ?", (now, limit))]
            if len(chosen) < limit:
                held = conn.execute(
                    "SELECT rowid, claim_token FROM records WHERE local_id IS NOT NULL AND state = 'pending' "
                    "AND claim_until >= ? ORDER BY rowid", (now,)).fetchall()
                chosen += [rowid for rowid, holder in held if holder_is_gone(holder)][:limit - len(chosen)]
                chosen.sort()
            if not chosen:
                return []
            marks = ", ".join("?" * len(chosen))
            conn.execute(f"UPDATE records SET claim_token = ?, claim_until = ? WHERE rowid IN ({marks})",
                         (token, until, *chosen))
            # By rowid, not by claim_token: that column has no index, and a scan per batch
            # would make a flush quadratic in the size of the index.
            rows = conn.execute(f"SELECT {RECORD_COLUMNS_SQL} FROM records WHERE rowid IN ({marks}) "
                                f"ORDER BY rowid", chosen).fetchall()
        return [row_to_record(row) for row in rows]

    def queued_state(self, local_id: str) -> tuple[str, str] | None:
        """``(state, id)`` of the row first queued as ``local_id`` (``id`` is the gateway's once
        synced), or None when no row was queued under that key."""
        with self.reading() as conn:
            row = conn.execute("SELECT state, id FROM records WHERE local_id = ?", (local_id,)).fetchone()
        return (row[0], row[1]) if row is not None else None

    def record_outcomes(self, outcomes: Iterable[Outcome]) -> None:
        """Apply the gateway's verdicts on claimed rows, in one transaction; each claim is released.

        ``synced``: the row adopts the gateway id (merged with a row learned meanwhile under
        it), and every local-id reference follows.  ``pending``: stays queued; an attempted one
        counts an attempt and keeps ``reason``.  ``failed``/``duplicate``: the state, ``reason``
        and matched id are kept beside the text, and the correction's supersede mark is lifted.
        Reasons are stored as given.  LocalIndexError if a row is not in the outbox.
        """
        outcomes = list(outcomes)
        with self.transaction() as conn:
            synced = [outcome for outcome in outcomes if outcome.state == "synced"]
            if synced:
                indexrows.adopt_gateway_ids(conn, synced)
            for outcome in outcomes:
                if outcome.state == "synced":
                    continue
                if outcome.state == "pending" and not outcome.attempted:
                    conn.execute("UPDATE records SET claim_token = NULL, claim_until = NULL "
                                 "WHERE local_id = ? AND state = 'pending'", (outcome.local_id,))
                elif outcome.state == "pending":
                    conn.execute("UPDATE records SET claim_token = NULL, claim_until = NULL, "
                                 "attempts = attempts + 1, reason = ? WHERE local_id = ? AND state = 'pending'",
                                 (outcome.reason, outcome.local_id))
                else:
                    indexrows.queued_by_local_id(conn, outcome.local_id)
                    conn.execute("UPDATE records SET state = ?, reason = ?, duplicate_of = ?, claim_token = NULL, "
                                 "claim_until = NULL, attempts = attempts + 1 WHERE local_id = ?",
                                 (outcome.state, outcome.reason, outcome.matched_id, outcome.local_id))
                    # The gateway did not take the correction: its target is current again.
                    conn.execute("UPDATE records SET superseded_by = NULL WHERE superseded_by = ?",
                                 (outcome.local_id,))

    def retry_failed(self, record_ids: Iterable[str] | None = None) -> tuple[Record, ...]:
        """Put failed outbox rows back to pending (their corrections mark their targets again):
        those named in ``record_ids`` (by gateway or local id), or every failed row when None.

        Returns the rows as they were.  InputError naming the first id that is not a failed
        outbox row, and nothing is changed.
        """
        with self.transaction() as conn:
            if record_ids is None:
                rows = [row_to_record(row) for row in conn.execute(
                    f"SELECT {RECORD_COLUMNS_SQL} FROM records WHERE local_id IS NOT NULL AND state = 'failed' "
                    f"ORDER BY rowid")]
            else:
                rows = []
                for record_id in dict.fromkeys(record_ids):
                    storable_text(record_id, "the record id")
                    row = conn.execute(f"SELECT {RECORD_COLUMNS_SQL} FROM records WHERE local_id IS NOT NULL "
                                       f"AND (id = ? OR local_id = ?)", (record_id, record_id)).fetchone()
                    if row is None:
                        raise InputError(f"{record_id} is not in the outbox (`queue` lists its records)")
                    if row["state"] != "failed":
                        raise InputError(f"{record_id} is {row['state']}, not failed: only failed records are "
                                         f"retried")
                    rows.append(row_to_record(row))
            for row in rows:
                conn.execute("UPDATE records SET state = 'pending', reason = NULL, claim_token = NULL, "
                             "claim_until = NULL WHERE local_id = ?", (row.local_id,))
                indexrows.mark_target(conn, row)
            return tuple(rows)

    def queue_counts(self) -> dict[str, int]:
        """Outbox rows by state: pending, synced, duplicate, failed."""
        with self.reading() as conn:
            return indexrows.queue_counts(conn)

    def queue_report(self, *, limit: int | None = QUEUE_LIMIT) -> QueueReport:
        """Counts by state and the most recent rows (failed and pending first), at most ``limit``
        of them (None: all): what ``queue`` shows, read without the outbox's writer."""
        rows = self.queue_records(None if limit is None else limit + 1)
        more = limit is not None and len(rows) > limit
        return QueueReport(counts=self.queue_counts(), records=rows[:limit] if more else rows, limit=limit, more=more)

    def queue_records(self, limit: int | None) -> tuple[Record, ...]:
        """Up to ``limit`` outbox rows (None: all): failed, pending, duplicate, then synced; newest
        first in each."""
        with self.reading() as conn:
            rows = conn.execute(
                f"SELECT {RECORD_COLUMNS_SQL} FROM records WHERE local_id IS NOT NULL ORDER BY "
                f"CASE state WHEN 'failed' THEN 0 WHEN 'pending' THEN 1 WHEN 'duplicate' THEN 2 ELSE 3 END, "
                f"rowid DESC LIMIT ?", (-1 if limit is None else limit,)).fetchall()
        return tuple(row_to_record(row) for row in rows)

    def count_pending(self) -> int:
        with self.reading() as conn:
            return conn.execute("SELECT count(*) FROM records WHERE local_id IS NOT NULL "
                                "AND state = 'pending'").fetchone()[0]

    def count_pending_by_holder(self, now: float, holder_is_gone: Callable[[str], bool]) -> tuple[int, int]:
        """``(free, held)``: pending outbox rows anyone may claim now, and rows a claim still
        running holds whose token ``holder_is_gone`` says is alive (the rule of :meth:`claim_pending`)."""
        free = held = 0
        with self.reading() as conn:
            for token, count in conn.execute(
                    "SELECT CASE WHEN claim_until >= ? THEN claim_token END, count(*) FROM records "
                    "WHERE local_id IS NOT NULL AND state = 'pending' GROUP BY 1", (now,)):
                if token is None or holder_is_gone(token):
                    free += count
                else:
                    held += count
        return free, held

    def release_claims(self, local_ids: Iterable[str], *, token: str | None = None) -> None:
        """Give up the claims on these pending rows, as they are (nothing else changes); with
        ``token``, only the rows that token still holds."""
        wanted = list(local_ids)
        held = "" if token is None else " AND claim_token = ?"
        with self.transaction() as conn:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start:start + 500]
                conn.execute(f"UPDATE records SET claim_token = NULL, claim_until = NULL WHERE state = 'pending' "
                             f"AND local_id IN ({', '.join('?' * len(chunk))}){held}",
                             (*chunk, *([] if token is None else [token])))

    def renew_claims(self, local_ids: Iterable[str], *, token: str, until: float) -> None:
        """Extend to ``until`` the claims ``token`` still holds on these pending rows."""
        wanted = list(local_ids)
        with self.transaction() as conn:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start:start + 500]
                conn.execute(f"UPDATE records SET claim_until = ? WHERE state = 'pending' AND claim_token = ? "
                             f"AND local_id IN ({', '.join('?' * len(chunk))})", (until, token, *chunk))

    def adopt_held(self, local_id: str, token: str, gateway_record: Mapping[str, Any] | None,
                   learned: Iterable[Observation]) -> bool:
        """The gateway accepted, as ``gateway_record``, the pending row ``token`` holds (written
        ahead of its own send): the row becomes a synced outbox row exactly as a flush leaves one
        (:meth:`record_outcomes`: it adopts the gateway id, every reference to its local id
        follows, a correction's target is marked), so ``queue`` and ``status`` count it as synced;
        ``learned`` (a target's mark, as the store saw it) is merged, all in one transaction.
        False, and nothing changes, when ``token`` no longer holds the row (a flush took it over
        and records what the gateway said).  ``gateway_record`` None: the answer named no usable
        id, and the row only leaves (a target it marked is current again).
        """
        now = utc_now()
        with self.transaction() as conn:
            if not indexrows.is_held(conn, local_id, token):
                return False
            if gateway_record is None:
                indexrows.remove_queued(conn, local_id, None)
            else:
                indexrows.adopt_gateway_ids(conn, [Outcome.synced(local_id, gateway_record)])
            for obs in learned:
                indexrows.learn_observation(conn, obs, now)
            return True

    def discard_held(self, local_id: str, token: str) -> bool:
        """Remove the pending row ``token`` holds, which was not to be kept (the gateway refused
        it, or it may not be queued); a target it corrected is current again.  False, and
        nothing changes, when ``token`` no longer holds it."""
        with self.transaction() as conn:
            if not indexrows.is_held(conn, local_id, token):
                return False
            indexrows.remove_queued(conn, local_id, None)
            return True

    def forget(self, record_ids: Iterable[str], *, dry_run: bool, now: float,
               holder_is_gone: Callable[[str], bool]) -> tuple[Record, ...]:
        """Remove the rows named (by gateway or local id) for good, and return them as they were;
        with ``dry_run`` only return them.  An outbox row goes with its queue entry (a target its
        correction marked is current again); the freed pages are overwritten and the full-text
        index is merged, so no word of a forgotten row stays in the file.

        InputError naming the first id that is not in the index, or whose outbox row another live
        qmem process is sending right now, and nothing changes.
        """
        with self.transaction() as conn:
            rows: list[Record] = []
            for record_id in dict.fromkeys(record_ids):
                storable_text(record_id, "the record id")
                found = indexrows.forget_candidate(conn, record_id)
                if found is None:
                    raise InputError(f"{record_id} is not in the local index (`find` and `queue` list its records)")
                record, token, until = found
                if record.pending and token is not None and until is not None and until >= now \
                        and not holder_is_gone(token):
                    raise InputError(f"{record_id} is being sent by another qmem process right now: run forget "
                                     f"again when it is done (then it is either still queued or shared)")
                rows.append(record)
            if dry_run:
                return tuple(rows)
            secure = conn.execute("PRAGMA secure_delete").fetchone()[0]
            conn.execute("PRAGMA secure_delete = ON")  # the freed pages are zeroed, not left readable
            try:
                for record in rows:
                    indexrows.forget_row(conn, record)
                indexrows.purge_deleted_text(conn)
            finally:
                conn.execute(f"PRAGMA secure_delete = {int(secure)}")
            return tuple(rows)

    def queued_corrections(self, record_ids: Iterable[str]) -> dict[str, str]:
        """``{record id: local id}`` for those of ``record_ids`` that a pending correction supersedes."""
        wanted = list(dict.fromkeys(record_ids))
        if not wanted:
            return {}
        with self.reading() as conn:
            rows = conn.execute(
                f"SELECT t.id, t.superseded_by FROM records AS t JOIN records AS c ON c.local_id = t.superseded_by "
                f"WHERE t.id IN ({', '.join('?' * len(wanted))}) AND c.state = 'pending'", wanted).fetchall()
        return {row[0]: row[1] for row in rows}

    # -- session import

    def imported_files(self) -> dict[str, ImportedFile]:
        """Every session file imported so far, by its key."""
        with self.reading() as conn:
            return {row[0]: ImportedFile(*row[1:]) for row in conn.execute(
                "SELECT key, size, mtime_ns, inode, offset, head, tail FROM import_files")}

    def calls_awaiting_results(self, file_key: str) -> dict[str, tuple[str, dict[str, Any]]]:
        """The calls of a session file whose results were not written when it was last read."""
        with self.reading() as conn:
            rows = conn.execute("SELECT call_id, name, arguments FROM import_calls WHERE file_key = ?", (file_key,))
            return {row[0]: (row[1], json.loads(row[2])) for row in rows}

    def record_import(self, file_key: str, file: ImportedFile, observations: Iterable[Observation],
                      calls: Calls, queued: Iterable[Record] = ()) -> dict[str, int]:
        """Learn what a session file taught, restore the writes it queued, and save how far it
        was read and the calls still awaiting results — all in one transaction, so that a
        failure anywhere (busy, disk full, Ctrl-C) leaves the file to be read again.

        ``queued`` are outbox rows (as :meth:`add_queued` takes them); one whose key is already
        known changes nothing.  Returns counts ``added`` / ``updated`` / ``unchanged`` (records
        learned), ``queued`` (rows restored) and ``queued_failed`` (of those, kept as failed).
        """
        counts = {"added": 0, "updated": 0, "unchanged": 0, "queued": 0, "queued_failed": 0}
        now = utc_now()
        queued = list(queued)
        for row in queued:
            if row.local_id is None or row.id != row.local_id:
                raise ValueError("a queued record is keyed by its local id")
        with self.transaction() as conn:
            for obs in observations:
                counts[indexrows.learn_observation(conn, obs, now)] += 1
            for row in queued:
                if indexrows.insert_queued(conn, row)[1]:
                    counts["queued"] += 1
                    counts["queued_failed"] += row.state == "failed"
            conn.execute("DELETE FROM import_calls WHERE file_key = ?", (file_key,))
            conn.executemany(
                "INSERT INTO import_calls (file_key, call_id, name, arguments) VALUES (?, ?, ?, ?)",
                [(file_key, call_id, name, json.dumps(args)) for call_id, (name, args) in calls.items()])
            conn.execute(
                "INSERT INTO import_files (key, size, mtime_ns, inode, offset, head, tail) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (key) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns, "
                "inode = excluded.inode, offset = excluded.offset, head = excluded.head, tail = excluded.tail",
                (file_key, file.size, file.mtime_ns, file.inode, file.offset, file.head, file.tail))
        return counts
