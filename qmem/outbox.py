"""The outbox: writes that wait in the local index until the gateway takes them.

Promises:

* :meth:`Outbox.enqueue` stores a ``pending`` record under a local id — the
  Idempotency-Key it will be sent with (fresh, or the key a failed attempt already sent) —
  and it is findable at once.
* **A queued correction supersedes at once.**  Its target (by gateway or local id) is
  marked ``superseded_by`` = the correction's local id in the same transaction, so default
  search, meta and status hide and count it; the mark follows the correction to its
  gateway id when it syncs, and is lifted if the gateway refuses the correction.
* :meth:`Outbox.claim_batch` hands each pending record to one flusher at a time: rows
  are claimed inside ``BEGIN IMMEDIATE`` for a lease.  A claim whose lease ran out, or
  whose process on this machine is gone, may be claimed again; that re-send is safe
  because the gateway answers a repeated Idempotency-Key with the same record.
* Outcomes never lose the text: ``synced`` adopts the gateway id everywhere (the FTS
  row follows, since it is keyed by rowid), ``duplicate`` keeps the matched id beside
  the local record, ``failed`` keeps the reason, :meth:`Outbox.release` leaves the
  record pending for the next flush.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .errors import LocalIndexError
from .localindex import (
    RECORD_COLUMNS_SQL, LocalIndex, Record, _Tx, content_hash, row_to_record, this_machine, utc_now,
)
from .records import NewRecord, is_local_id, new_local_id

__all__ = ["Outbox", "Outcome", "QueueReport"]

MAX_REASON_CHARS = 300
QUEUE_STATES = ("pending", "synced", "duplicate", "failed")


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


@dataclass(frozen=True)
class QueueReport:
    counts: dict[str, int]
    records: tuple[Record, ...]

    def to_json(self) -> dict[str, Any]:
        return {"counts": dict(self.counts), "records": [record.to_json() for record in self.records]}


def _bounded_reason(reason: str) -> str:
    reason = " ".join(reason.split())
    return reason if len(reason) <= MAX_REASON_CHARS else reason[: MAX_REASON_CHARS - 1] + "…"


class Outbox:
    """The queue of local writes, stored in the rows of a :class:`LocalIndex`."""

    def __init__(self, index: LocalIndex) -> None:
        self.index = index
        self._machine = this_machine()

    def enqueue(self, record: NewRecord, *, tool: str | None = None, key: str | None = None) -> Record:
        """Queue ``record``; returns its row (the existing one if ``key`` is already known).

        ``key`` is the Idempotency-Key to send it with: a store whose attempt may have
        reached the gateway passes the key that attempt carried, so the gateway can answer
        the flush with the record it already has.  Without ``key`` a fresh local id is used.
        """
        if key is not None and not is_local_id(key):
            raise ValueError("key must be a qmem local id")
        return self._insert(key or new_local_id(), record, tool=tool, session_file=None)[0]

    def requeue(self, local_id: str, record: NewRecord, *, tool: str | None = None,
                session_file: str | None = None, refused: str | None = None) -> bool:
        """Queue a write found in a session file under its original Idempotency-Key.

        Returns False (and changes nothing) when that key is already known here, synced
        or not; a re-send of a key the gateway has seen returns the same record.  With
        ``refused`` (a reason) the row is kept as ``failed`` and is never sent.
        """
        if not is_local_id(local_id):
            raise ValueError("local_id must be a qmem local id")
        return self._insert(local_id, record, tool=tool, session_file=session_file, refused=refused)[1]

    def _insert(self, key: str, record: NewRecord, *, tool: str | None, session_file: str | None,
                refused: str | None = None) -> tuple[Record, bool]:
        now = utc_now()
        row = Record(
            id=key, local_id=key, text=record.text, state="failed" if refused else "pending", coverage="full",
            kind=record.kind, project_id=record.project_id, scope=record.scope, agent_id=record.agent_id,
            source=record.source, created_at=now, expires_at=record.expires_at,
            supersedes_id=record.supersedes_id, supersede_reason=record.supersede_reason,
            reason=_bounded_reason(refused) if refused else None,
            machine=self._machine, session_file=session_file, tool=tool,
            content_hash=content_hash(record.text), learned_at=now,
        )
        with self.index.transaction() as tx:
            known = tx.conn.execute("SELECT id FROM records WHERE local_id = ? OR id = ?", (key, key)).fetchone()
            if known is not None:
                existing = tx.get(known[0])
                assert existing is not None
                return existing, False
            tx.insert(row)
            if not refused:
                _mark_target(tx, row)
        return row, True

    def claim_batch(self, limit: int, *, lease_seconds: float) -> list[Record]:
        """Claim up to ``limit`` pending records, oldest first, for ``lease_seconds``."""
        token = f"{self._machine}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        now = time.time()
        with self.index.transaction() as tx:
            chosen = [row[0] for row in tx.conn.execute(
                "SELECT rowid FROM records WHERE local_id IS NOT NULL AND state = 'pending' "
                "AND (claim_token IS NULL OR claim_until < ?) ORDER BY rowid LIMIT ?", (now, limit))]
            if len(chosen) < limit:
                # Claims still under lease whose process on this machine has died.
                held = tx.conn.execute(
                    "SELECT rowid, claim_token FROM records WHERE local_id IS NOT NULL AND state = 'pending' "
                    "AND claim_until >= ? ORDER BY rowid", (now,)).fetchall()
                chosen += [rowid for rowid, holder in held if self._holder_is_gone(holder)][:limit - len(chosen)]
                chosen.sort()
            if not chosen:
                return []
            marks = ", ".join("?" * len(chosen))
            tx.execute(f"UPDATE records SET claim_token = ?, claim_until = ? WHERE rowid IN ({marks})",
                       (token, now + lease_seconds, *chosen))
            # By rowid, not by claim_token: that column has no index, and a scan per batch
            # would make a flush quadratic in the size of the index.
            rows = tx.conn.execute(f"SELECT {RECORD_COLUMNS_SQL} FROM records WHERE rowid IN ({marks}) "
                                   f"ORDER BY rowid", chosen).fetchall()
        return [row_to_record(row) for row in rows]

    def _holder_is_gone(self, token: str) -> bool:
        # token = "<machine>:<pid>:<nonce>"; the machine name may itself contain ':'.
        parts = token.rsplit(":", 2)
        if len(parts) != 3 or parts[0] != self._machine or not parts[1].isdigit():
            return False
        pid = int(parts[1])
        if pid == os.getpid():
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False  # exists but belongs to someone else, or cannot tell
        return False

    def gateway_id(self, local_id: str) -> tuple[str, str]:
        """``(state, id)`` of the record first queued as ``local_id``.

        After a sync, ``id`` is the gateway's; corrections use it to remap a target
        that was still local when they were written.
        """
        with self.index.reading() as conn:
            row = conn.execute("SELECT state, id FROM records WHERE local_id = ?",
                               (local_id,)).fetchone()
        if row is None:
            raise LocalIndexError("the record it refers to is not in the local outbox")
        return row[0], row[1]

    def record_outcomes(self, outcomes: Iterable[Outcome]) -> None:
        """Apply what the gateway said about several records, in one transaction.

        A flusher records a whole claimed batch at once: if it dies before this commit,
        the rows stay claimed, are taken over and re-sent under the same Idempotency-Key,
        and the gateway answers with the records it already has.
        """
        outcomes = list(outcomes)
        with self.index.transaction() as tx:
            synced = [outcome for outcome in outcomes if outcome.state == "synced"]
            if synced:
                _apply_synced(tx, synced)
            for outcome in outcomes:
                if outcome.state == "synced":
                    continue
                if outcome.state == "pending" and not outcome.attempted:
                    tx.execute("UPDATE records SET claim_token = NULL, claim_until = NULL "
                               "WHERE local_id = ? AND state = 'pending'", (outcome.local_id,))
                elif outcome.state == "pending":
                    tx.execute("UPDATE records SET claim_token = NULL, claim_until = NULL, "
                               "attempts = attempts + 1, reason = ? WHERE local_id = ? AND state = 'pending'",
                               (_bounded_reason(outcome.reason or "not sent"), outcome.local_id))
                else:
                    _by_local_id(tx, outcome.local_id)
                    tx.execute("UPDATE records SET state = ?, reason = ?, duplicate_of = ?, claim_token = NULL, "
                               "claim_until = NULL, attempts = attempts + 1 WHERE local_id = ?",
                               (outcome.state, _bounded_reason(outcome.reason or outcome.state),
                                outcome.matched_id, outcome.local_id))
                    # The gateway did not take the correction: its target is current again.
                    tx.execute("UPDATE records SET superseded_by = NULL WHERE superseded_by = ?",
                               (outcome.local_id,))

    def mark_synced(self, local_id: str, gateway_record: Mapping[str, Any]) -> Record:
        """The gateway accepted ``local_id`` as ``gateway_record``: adopt its id everywhere."""
        self.record_outcomes([Outcome.synced(local_id, gateway_record)])
        result = self.index.get(str(gateway_record["id"]))
        assert result is not None
        return result

    def mark_duplicate(self, local_id: str, matched_id: str) -> None:
        """The gateway refused ``local_id`` as a duplicate of ``matched_id`` (409)."""
        self.record_outcomes([Outcome.duplicate(local_id, matched_id)])

    def mark_failed(self, local_id: str, reason: str) -> None:
        """The gateway refused ``local_id`` for good (validation); the text stays here."""
        self.record_outcomes([Outcome.failed(local_id, reason)])

    def release(self, local_id: str, reason: str) -> None:
        """A transient failure: the record stays pending for the next flush."""
        self.record_outcomes([Outcome.transient(local_id, reason)])

    def retry_failed(self) -> int:
        """Put every failed record back to pending (after the user fixed the cause)."""
        with self.index.transaction() as tx:
            rows = [row_to_record(row) for row in tx.conn.execute(
                f"SELECT {RECORD_COLUMNS_SQL} FROM records WHERE local_id IS NOT NULL AND state = 'failed'")]
            tx.execute("UPDATE records SET state = 'pending', reason = NULL WHERE local_id IS NOT NULL "
                       "AND state = 'failed'")
            for row in rows:
                _mark_target(tx, row)
            return len(rows)

    def report(self, *, limit: int = 200) -> QueueReport:
        """Counts by state and the most recent rows (pending and failed first)."""
        status = self.index.status()
        with self.index.reading() as conn:
            rows = conn.execute(
                "SELECT id FROM records WHERE local_id IS NOT NULL ORDER BY "
                "CASE state WHEN 'failed' THEN 0 WHEN 'pending' THEN 1 WHEN 'duplicate' THEN 2 ELSE 3 END, "
                "rowid DESC LIMIT ?", (limit,)).fetchall()
        records = tuple(r for r in (self.index.get(row[0]) for row in rows) if r is not None)
        return QueueReport(counts=status.queue, records=records)

    def queued_corrections(self, record_ids: Iterable[str]) -> dict[str, str]:
        """``{record id: local id of the queued correction}`` for those of ``record_ids`` that a
        correction still waiting in this outbox supersedes (the gateway does not know yet)."""
        wanted = list(dict.fromkeys(record_ids))
        if not wanted:
            return {}
        with self.index.reading() as conn:
            rows = conn.execute(
                f"SELECT t.id, t.superseded_by FROM records AS t JOIN records AS c ON c.local_id = t.superseded_by "
                f"WHERE t.id IN ({', '.join('?' * len(wanted))}) AND c.state = 'pending'", wanted).fetchall()
        return {row[0]: row[1] for row in rows}

    def pending_count(self) -> int:
        with self.index.reading() as conn:
            return conn.execute("SELECT count(*) FROM records WHERE local_id IS NOT NULL "
                                "AND state = 'pending'").fetchone()[0]


def _apply_synced(tx: _Tx, outcomes: list[Outcome]) -> None:
    """Records the gateway accepted adopt its ids, and every reference to their local ids follows.

    This runs for every record of every flush, so the rows are read with one query per batch,
    each row is updated with only what changed (rewriting an unchanged text would re-index it
    in FTS for nothing), and local-id references are remapped with one statement per batch.
    """
    local_ids = [outcome.local_id for outcome in outcomes]
    marks = ", ".join("?" * len(local_ids))
    mine_by_local = {row["local_id"]: row_to_record(row) for row in tx.conn.execute(
        f"SELECT {RECORD_COLUMNS_SQL} FROM records WHERE local_id IN ({marks})", local_ids)}
    gateway_ids = [str(outcome.gateway_record["id"]) for outcome in outcomes if outcome.gateway_record]
    learned_meanwhile = {row["id"]: row_to_record(row) for row in tx.conn.execute(
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
        text = gateway_record.get("text") if isinstance(gateway_record.get("text"), str) else None
        text = text or mine.text
        updates: dict[str, Any] = {"id": gateway_id, "text": text, "state": "synced", "coverage": "full",
                                   "reason": None, "learned_at": now}
        if text != mine.text:
            updates["content_hash"] = content_hash(text)
        for name in ("created_at", "kind", "project_id", "scope", "agent_id", "superseded_by"):
            value = gateway_record.get(name)
            if isinstance(value, str) and value:
                updates[name] = value
        # Learned meanwhile (pull, import), or — from a gateway that answers two keys with one
        # record — adopted by another record of this very batch.
        already = learned_meanwhile.get(gateway_id) or (tx.get(gateway_id) if gateway_id in adopted else None)
        adopted.add(gateway_id)
        if already is not None:  # one row, not two
            tx.execute("DELETE FROM records WHERE local_id = ?", (outcome.local_id,))
            updates.update(superseded_by=already.superseded_by or updates.get("superseded_by"),
                           deleted_at=already.deleted_at, private=already.private)
            tx.update(replace(mine, **updates), where_id=already.id, release_claim=True)
        else:
            changed = {name: value for name, value in updates.items() if getattr(mine, name) != value}
            assignments = "".join(f"{name} = ?, " for name in changed)
            tx.execute(f"UPDATE records SET {assignments}claim_token = NULL, claim_until = NULL "
                       f"WHERE local_id = ?", (*changed.values(), outcome.local_id))
        if mine.supersedes_id and not is_local_id(mine.supersedes_id):
            # The gateway marks the target superseded; mirror it so find hides it now.  (A target
            # that was itself queued is marked with this local id already, remapped below.)
            tx.execute("UPDATE records SET superseded_by = ?, supersede_reason = coalesce(supersede_reason, ?) "
                       "WHERE id = ? AND superseded_by IS NULL",
                       (gateway_id, mine.supersede_reason, mine.supersedes_id))
    for column in ("supersedes_id", "superseded_by"):
        tx.execute(f"UPDATE records SET {column} = (SELECT s.id FROM records AS s WHERE s.local_id = "
                   f"records.{column}) WHERE {column} IN ({marks})", local_ids)


def _mark_target(tx: _Tx, correction: Record) -> None:
    """A queued correction hides its target now: ``superseded_by`` = the correction's local id.

    The target is found by gateway id or by local id; an already superseded target keeps
    what it knew.  A target not in the index is left to the gateway to decide.
    """
    target = correction.supersedes_id
    if target:
        tx.execute("UPDATE records SET superseded_by = ? WHERE (id = ? OR local_id = ?) AND superseded_by IS NULL",
                   (correction.local_id, target, target))


def _by_local_id(tx: _Tx, local_id: str) -> Record:
    row = tx.conn.execute(f"SELECT {RECORD_COLUMNS_SQL} FROM records WHERE local_id = ?", (local_id,)).fetchone()
    if row is None:
        raise LocalIndexError("that record is not in the local outbox")
    return row_to_record(row)
