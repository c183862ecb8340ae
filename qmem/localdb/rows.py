"""The statements on the local index's rows, each run inside a transaction its caller holds.

:class:`~qmem.localindex.LocalIndex` opens every transaction (one per operation) and composes
these statements in it: reading a row into a :class:`~qmem.localdb.record.Record` and writing one
back (times in their stored form), merging an observation, queueing an outbox row (a pending
correction marks its target at once), counting the outbox by state, and adopting the gateway's
ids for the rows it accepted, and forgetting a row for good.  Nothing here begins, commits or rolls back, and nothing but
:mod:`qmem.localindex` calls it: the tables keep one owner's operations.
"""

from __future__ import annotations

import sqlite3

from ..errors import InputError, LocalIndexError
from ..records import is_local_id
from ..valueclass import replace
from .record import (
    RECORD_COLUMNS, Observation, Outcome, Record, accepted_fields, merge_observation, storable_observation, utc_now,
    with_stored_times,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "RECORD_COLUMNS_SQL", "row_to_record", "set_meta", "learn_observation", "insert_queued", "queue_counts",
    "mark_target", "is_held", "remove_queued", "queued_by_local_id", "adopt_gateway_ids",
    # forget
    "forget_candidate", "forget_row", "purge_deleted_text",
]

#: The SELECT list that :func:`row_to_record` reads.
RECORD_COLUMNS_SQL = ", ".join(RECORD_COLUMNS)


def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) "
                 "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, value))


def record_by_id(conn: sqlite3.Connection, record_id: str) -> Record | None:
    """The row whose (gateway or, while queued, local) ``id`` is ``record_id``."""
    row = conn.execute(f"SELECT {RECORD_COLUMNS_SQL} FROM records WHERE id = ?", (record_id,)).fetchone()
    return row_to_record(row) if row else None


def insert_record(conn: sqlite3.Connection, record: Record) -> None:
    values = record_values(record)
    conn.execute(f"INSERT INTO records ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})",
                 tuple(values.values()))


def update_record(conn: sqlite3.Connection, record: Record, *, where_id: str | None = None,
                  release_claim: bool = False) -> None:
    values = record_values(record)
    if release_claim:
        values.update(claim_token=None, claim_until=None)
    assignments = ", ".join(f"{name} = ?" for name in values)
    conn.execute(f"UPDATE records SET {assignments} WHERE id = ?", (*values.values(), where_id or record.id))


def learn_observation(conn: sqlite3.Connection, obs: Observation, now: str) -> str:
    """Merge one observation: ``added``, ``updated`` or ``unchanged``.

    InputError (the transaction is then rolled back) if it holds text that cannot be stored.
    """
    if not storable_observation(obs):
        raise InputError("a learned record holds text that is not valid Unicode (a lone surrogate code point); "
                         "nothing was written")
    existing = record_by_id(conn, obs.id)
    merged = merge_observation(existing, obs, now)
    if merged is None:
        return "unchanged"
    if existing is None:
        insert_record(conn, merged)
        return "added"
    update_record(conn, merged)
    return "updated"


def insert_queued(conn: sqlite3.Connection, record: Record) -> tuple[Record, bool]:
    key = record.local_id
    known = conn.execute("SELECT id FROM records WHERE local_id = ? OR id = ?", (key, key)).fetchone()
    if known is not None:
        existing = record_by_id(conn, known[0])
        assert existing is not None
        return existing, False
    insert_record(conn, record)
    if record.state == "pending":
        mark_target(conn, record)
    return record, True


def queue_counts(conn: sqlite3.Connection) -> dict[str, int]:
    queue = {state: 0 for state in ("pending", "synced", "duplicate", "failed")}
    for state, count in conn.execute("SELECT state, count(*) FROM records WHERE local_id IS NOT NULL GROUP BY state"):
        queue[state] = count
    return queue


def mark_target(conn: sqlite3.Connection, correction: Record) -> None:
    """A queued correction hides its target now: ``superseded_by`` = the correction's local id.

    The target is found by gateway id or by local id; an already superseded target keeps
    what it knew.  A target not in the index is left to the gateway to decide.
    """
    target = correction.supersedes_id
    if target:
        conn.execute("UPDATE records SET superseded_by = ? WHERE (id = ? OR local_id = ?) AND superseded_by IS NULL",
                     (correction.local_id, target, target))


def is_held(conn: sqlite3.Connection, local_id: str, token: str) -> bool:
    """Whether the outbox row ``local_id`` is pending and claimed by ``token`` (run out or not:
    until another claims it, it is as its holder left it)."""
    return conn.execute("SELECT 1 FROM records WHERE local_id = ? AND state = 'pending' AND claim_token = ?",
                        (local_id, token)).fetchone() is not None


def remove_queued(conn: sqlite3.Connection, local_id: str, successor: str | None) -> None:
    """Delete the outbox row ``local_id``; references to it follow ``successor`` (the gateway id it
    was accepted as), or, with None, a target it marked superseded is current again."""
    conn.execute("DELETE FROM records WHERE local_id = ?", (local_id,))
    if successor is None:
        conn.execute("UPDATE records SET superseded_by = NULL WHERE superseded_by = ?", (local_id,))
        return
    for column in ("supersedes_id", "superseded_by"):
        conn.execute(f"UPDATE records SET {column} = ? WHERE {column} = ?", (successor, local_id))


def queued_by_local_id(conn: sqlite3.Connection, local_id: str) -> Record:
    row = conn.execute(f"SELECT {RECORD_COLUMNS_SQL} FROM records WHERE local_id = ?", (local_id,)).fetchone()
    if row is None:
        raise LocalIndexError("that record is not in the local outbox")
    return row_to_record(row)


def adopt_gateway_ids(conn: sqlite3.Connection, outcomes: list[Outcome]) -> None:
    """Records the gateway accepted adopt its ids, and every reference to their local ids follows.

    This runs for every record of every flush, so the rows are read with one query per batch,
    each row is updated with only what changed (rewriting an unchanged text would re-index it
    in FTS for nothing), and local-id references are remapped with one statement per batch.
    """
    local_ids = [outcome.local_id for outcome in outcomes]
    marks = ", ".join("?" * len(local_ids))
    mine_by_local = {row["local_id"]: row_to_record(row) for row in conn.execute(
        f"SELECT {RECORD_COLUMNS_SQL} FROM records WHERE local_id IN ({marks})", local_ids)}
    gateway_ids = [str(outcome.gateway_record["id"]) for outcome in outcomes if outcome.gateway_record]
    learned_meanwhile = {row["id"]: row_to_record(row) for row in conn.execute(
        f"SELECT {RECORD_COLUMNS_SQL} FROM records WHERE id IN ({', '.join('?' * len(gateway_ids))}) "
        f"AND (local_id IS NULL OR local_id NOT IN ({marks}))", (*gateway_ids, *local_ids))}
    now = utc_now()
    adopted: set[str] = set()
    for outcome in outcomes:
        gateway_record = outcome.gateway_record
        assert gateway_record is not None
        mine = mine_by_local.get(outcome.local_id)
        if mine is None:
            raise LocalIndexError("that record is not in the local outbox")
        gateway_id = str(gateway_record["id"])
        updates = accepted_fields(mine, gateway_record, now)
        # Learned meanwhile (pull, import), or — from a gateway that answers two keys with one
        # record — adopted by another record of this very batch.
        already = learned_meanwhile.get(gateway_id) or (
            record_by_id(conn, gateway_id) if gateway_id in adopted else None)
        adopted.add(gateway_id)
        if already is not None:  # one row, not two
            conn.execute("DELETE FROM records WHERE local_id = ?", (outcome.local_id,))
            updates.update(superseded_by=already.superseded_by or updates.get("superseded_by"),
                           deleted_at=already.deleted_at, private=already.private)
            update_record(conn, replace(mine, **updates), where_id=already.id, release_claim=True)
        else:
            changed = {name: value for name, value in updates.items() if getattr(mine, name) != value}
            assignments = "".join(f"{name} = ?, " for name in changed)
            conn.execute(f"UPDATE records SET {assignments}claim_token = NULL, claim_until = NULL "
                         f"WHERE local_id = ?", (*changed.values(), outcome.local_id))
        if mine.supersedes_id and not is_local_id(mine.supersedes_id):
            # The gateway marks the target superseded; mirror it so find hides it now.  (A target
            # that was itself queued is marked with this local id already, remapped below.)
            conn.execute("UPDATE records SET superseded_by = ?, supersede_reason = coalesce(supersede_reason, ?) "
                         "WHERE id = ? AND superseded_by IS NULL",
                         (gateway_id, mine.supersede_reason, mine.supersedes_id))
    for column in ("supersedes_id", "superseded_by"):
        conn.execute(f"UPDATE records SET {column} = (SELECT s.id FROM records AS s WHERE s.local_id = "
                     f"records.{column}) WHERE {column} IN ({marks})", local_ids)


def record_values(record: Record) -> dict[str, Any]:
    record = with_stored_times(record)  # every row written keeps its times in the one form
    values = {name: getattr(record, name) for name in RECORD_COLUMNS}
    values["private"] = 1 if record.private else 0
    return values


def row_to_record(row: sqlite3.Row | tuple[Any, ...]) -> Record:
    values = dict(zip(RECORD_COLUMNS, row, strict=True))
    values["private"] = bool(values["private"])
    return Record(**values)


# --- forget: a row removed for good (qmem.local forget) ---------------------------------------

def forget_candidate(conn: sqlite3.Connection, record_id: str) -> tuple[Record, str | None, float | None] | None:
    """The row with gateway or local id ``record_id``, with its claim (token, until), or None."""
    row = conn.execute(f"SELECT {RECORD_COLUMNS_SQL}, claim_token, claim_until FROM records "
                       f"WHERE id = ? OR local_id = ? ORDER BY local_id IS NULL LIMIT 1",
                       (record_id, record_id)).fetchone()
    if row is None:
        return None
    values = tuple(row)
    return row_to_record(values[:len(RECORD_COLUMNS)]), values[-2], values[-1]


def forget_row(conn: sqlite3.Connection, record: Record) -> None:
    """Delete ``record``'s row (its full-text entry follows, by trigger).  An outbox row goes as a
    refused one would (:func:`remove_queued`: a target its correction marked is current again)."""
    if record.local_id is not None:
        remove_queued(conn, record.local_id, None)
    else:
        conn.execute("DELETE FROM records WHERE id = ? AND local_id IS NULL", (record.id,))


def purge_deleted_text(conn: sqlite3.Connection) -> None:
    """Leave no word of a deleted row in the file: the full-text index merged into one segment
    (FTS5 keeps a deleted row's words in its segments until they are merged)."""
    conn.execute("INSERT INTO records_fts (records_fts) VALUES ('optimize')")
