"""The outbox: writes that wait in the local index until the gateway takes them.

Promises:

* :meth:`Outbox.enqueue` stores a ``pending`` record under a local id — the
  Idempotency-Key it will be sent with (fresh, or the key a failed attempt already sent) —
  and it is findable at once.
* **A queued correction supersedes at once.**  Its target (by gateway or local id) is
  marked ``superseded_by`` = the correction's local id in the same transaction, so default
  search, meta and status hide and count it; the mark follows the correction to its
  gateway id when it syncs, and is lifted if the gateway refuses the correction.
* **A store is written ahead.**  :meth:`Outbox.write_ahead` queues a record that is about
  to be sent, held by this process (the claim a flush takes), before the request leaves.
  The store then settles it: accepted (:meth:`Outbox.record_accepted`: the row is a synced
  outbox record, exactly as a flush leaves one, so ``queue``, ``status`` and doctor count every
  write this machine shared alike), refused or not to be kept
  (:meth:`Outbox.discard`), or left for the next flush (:meth:`Outbox.release_held`).  A
  process that dies before it settles leaves a pending row held by a gone process: the next
  flush takes it over and sends it under the same key.
* :meth:`Outbox.claim_batch` hands each pending record to one flusher at a time: rows
  are claimed inside ``BEGIN IMMEDIATE`` for a lease, which the holder renews
  (:meth:`Outbox.renew`) while it works.  A claim whose lease ran out, or whose process on
  this machine is gone, may be claimed again; that re-send is safe because the gateway
  answers a repeated Idempotency-Key with the same record.  **Liveness is exact**: a claim
  names its process by PID *and* start (the kernel's boot id and the start time in
  ``/proc/PID/stat``), so a dead holder whose PID now belongs to another process, or a claim
  from before a reboot, is gone; where ``/proc`` cannot tell, a live PID counts as alive.
* Outcomes never lose the text: ``synced`` adopts the gateway id everywhere (the FTS
  row follows, since it is keyed by rowid), ``duplicate`` keeps the matched id beside
  the local record, ``failed`` keeps the reason, a ``transient`` outcome leaves the
  record pending for the next flush.  A reason is one line of at most
  :data:`MAX_REASON_CHARS` characters.
* A correction of a local id that was never queued here is :class:`UnknownLocalRecord`, with
  one message (:data:`UNKNOWN_LOCAL_TARGET`) wherever it is found: at store time, or at flush.
* :meth:`Outbox.retry` puts failed records back to pending once the user fixed the cause;
  they are scanned again, like every record, when a flush sends them.
* :meth:`Outbox.forget` removes records from this machine for good (``qmem.local forget``): a
  queued one leaves the outbox, so no flush ever sends it; one the gateway holds loses only its
  local copy, and :class:`ForgetReport` says plainly that the shared copy stays there and only a
  gateway administrator can delete it.  A record another live process is sending right now is
  refused, and nothing changes.

The outbox decides what its rows mean; the rows themselves, and every statement on them,
are :class:`~qmem.localindex.LocalIndex`'s.
"""

from __future__ import annotations

import os
import time

from ..errors import LocalIndexError, one_line
from ..localindex import LocalIndex, QueueReport
from ..records import QUEUE_LIMIT, NewRecord, is_local_id, new_local_id
from ..valueclass import dataclass, replace
from .record import Observation, Outcome, Record, content_hash, this_machine, utc_now

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

__all__ = ["Outbox", "HeldWrite", "ForgetReport", "UnknownLocalRecord"]

MAX_REASON_CHARS = 300
QUEUE_STATES = ("pending", "synced", "duplicate", "failed")
#: How many outbox records a report lists unless asked for another number (or all).

#: Why a correction of a local id that this outbox never queued is refused (store) or fails (flush).
UNKNOWN_LOCAL_TARGET = "supersedes_id names a local record that is not in this machine's outbox"


class UnknownLocalRecord(LocalIndexError):
    """A local id that no record of this outbox was queued under."""


#: What forgetting a record means for the copy the gateway may hold, by the record's state here.
FORGET_SHARED = ("removed from this machine only: the Memory Gateway keeps the shared copy, which every agent can "
                 "still read; only a gateway administrator can delete it")
FORGET_QUEUED = "removed from the outbox before it was shared: no flush will send it"
FORGET_QUEUED_TRIED = (FORGET_QUEUED + "; an earlier send of it was cut off, so the Memory Gateway may have received "
                       "it: if qmem_search finds it there, only a gateway administrator can delete it")
FORGET_REFUSED = "removed; the Memory Gateway refused it, so it was never shared"
FORGET_DUPLICATE = ("removed; the Memory Gateway did not keep it (it already held a similar record, which stays "
                    "shared)")


@dataclass(frozen=True)
class ForgetReport:
    """The records forgotten (or, with ``dry_run``, that would be), each with what it means."""

    records: tuple[Record, ...]
    dry_run: bool

    @staticmethod
    def meaning(record: Record) -> tuple[bool | None, str]:
        """``(shared copy remains: True / False / None for maybe, the sentence)``."""
        if record.local_id is None or record.state == "synced":
            return True, FORGET_SHARED
        if record.state == "failed":
            return False, FORGET_REFUSED
        if record.state == "duplicate":
            return False, FORGET_DUPLICATE
        if record.attempts or record.reason:
            return None, FORGET_QUEUED_TRIED
        return False, FORGET_QUEUED

    @property
    def shared_copies(self) -> int:
        """How many of the records stay shared (or may) on the gateway."""
        return sum(1 for record in self.records if self.meaning(record)[0] is not False)

    def to_json(self) -> dict[str, Any]:
        entries = []
        for record in self.records:
            remains, sentence = self.meaning(record)
            entries.append({"id": record.id, "local_id": record.local_id, "state": record.state,
                            "project_id": record.project_id, "shared_copy_remains": remains, "what": sentence})
        return {"dry_run": self.dry_run, "forgotten": [] if self.dry_run else entries,
                "would_forget": entries if self.dry_run else [], "count": len(entries)}


@dataclass(frozen=True)
class PendingCount:
    """Pending records: ``free`` for any flusher to send, ``elsewhere`` held by another live
    qmem process that is sending them right now."""

    free: int
    elsewhere: int


def _bounded_reason(reason: str) -> str:
    return one_line(reason, MAX_REASON_CHARS)


def process_start(pid: int) -> str | None:
    """``"<boot id>/<start ticks>"``: which process ``pid`` is, unlike any process that held
    or will hold that PID; None where ``/proc`` does not say (not Linux, or no such process)."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as boot:
            boot_id = boot.read().strip()
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()  # after the command name, which may hold spaces
        return f"{boot_id}/{int(fields[19])}"  # field 22: start time, in clock ticks since boot
    except (OSError, IndexError, ValueError, UnicodeDecodeError):
        return None


@dataclass(frozen=True)
class Claimed:
    """The rows one claim holds, and its token (to renew it)."""

    records: list[Record]
    token: str


@dataclass(frozen=True)
class HeldWrite:
    """A record queued ahead of its own send (:meth:`Outbox.write_ahead`) and the claim this
    process holds it by; the row as :meth:`Outbox.enqueue` would have returned it."""

    record: Record
    token: str

    @property
    def local_id(self) -> str:
        return self.record.id


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

    def restored_row(self, local_id: str, record: NewRecord, *, tool: str | None = None,
                     session_file: str | None = None, refused: str | None = None) -> Record:
        """The row of a write found in a session file, queued under its original Idempotency-Key
        (``refused``, a reason: kept as failed, never sent), not yet written: session import adds it with
        :meth:`~qmem.localindex.LocalIndex.record_import`, in the transaction that saves how
        far the file was read, so that the offset never gets ahead of the write."""
        if not is_local_id(local_id):
            raise ValueError("local_id must be a qmem local id")
        return self._row(local_id, record, tool=tool, session_file=session_file, refused=refused)

    def _insert(self, key: str, record: NewRecord, *, tool: str | None, session_file: str | None,
                refused: str | None = None) -> tuple[Record, bool]:
        return self.index.add_queued(self._row(key, record, tool=tool, session_file=session_file, refused=refused))

    def _row(self, key: str, record: NewRecord, *, tool: str | None, session_file: str | None,
             refused: str | None) -> Record:
        now = utc_now()
        return Record(
            id=key, local_id=key, text=record.text, state="failed" if refused else "pending", coverage="full",
            kind=record.kind, project_id=record.project_id, scope=record.scope, agent_id=record.agent_id,
            source=record.source, created_at=now, expires_at=record.expires_at,
            supersedes_id=record.supersedes_id, supersede_reason=record.supersede_reason,
            reason=_bounded_reason(refused) if refused else None,
            machine=self._machine, session_file=session_file, tool=tool,
            content_hash=content_hash(record.text), learned_at=now,
        )

    def write_ahead(self, record: NewRecord, *, key: str, lease_seconds: float, tool: str | None = None
                    ) -> HeldWrite:
        """Queue ``record`` under ``key`` (a fresh local id: its Idempotency-Key), held by this
        process for ``lease_seconds``, before it is sent; settle it with :meth:`record_accepted`,
        :meth:`discard` or :meth:`release_held`.  While held, no flush sends it; once this process
        is gone (or the lease ran out), the next flush does."""
        if not is_local_id(key):
            raise ValueError("key must be a qmem local id")
        token = self._claim_token()
        row, added = self.index.add_queued(self._row(key, record, tool=tool, session_file=None, refused=None),
                                           claim=(token, time.time() + lease_seconds))
        if not added:
            raise ValueError("a write ahead needs a fresh key")
        return HeldWrite(row, token)

    def record_accepted(self, held: HeldWrite, gateway_record: Mapping[str, Any] | None,
                        learned: Iterable[Observation]) -> bool:
        """The gateway accepted ``held`` as ``gateway_record`` on its own send: it stays in the
        outbox as a synced record, as a flush would leave it (so every count of synced records
        includes it), references to its local id follow, and ``learned`` is merged.  False when
        a flush took it over meanwhile (its lease ran out): that flush records it."""
        return self.index.adopt_held(held.local_id, held.token, gateway_record, learned)

    def discard(self, held: HeldWrite) -> bool:
        """Drop ``held``: the gateway refused it (a duplicate, a 4xx) and the store says "not
        stored", or it may not be queued (``offlineQueue`` off).  A target it corrected is current
        again.  False when a flush took it over meanwhile."""
        return self.index.discard_held(held.local_id, held.token)

    def release_held(self, held: HeldWrite) -> None:
        """The gateway could not take ``held`` now: it stays pending, untouched, for the next flush."""
        self.index.release_claims([held.local_id], token=held.token)

    def claim_batch(self, limit: int, *, lease_seconds: float) -> list[Record]:
        """Claim up to ``limit`` pending records, oldest first, for ``lease_seconds``."""
        return self.claim(limit, lease_seconds=lease_seconds).records

    def claim(self, limit: int, *, lease_seconds: float) -> Claimed:
        """:meth:`claim_batch`, with the claim's token, for :meth:`renew`."""
        now = time.time()
        token = self._claim_token()
        return Claimed(self.index.claim_pending(limit, token=token, now=now, until=now + lease_seconds,
                                                holder_is_gone=self._holder_is_gone), token)

    def renew(self, claimed: Claimed, *, lease_seconds: float) -> None:
        """Hold the rows of ``claimed`` that are still held by it for ``lease_seconds`` more."""
        self.index.renew_claims([r.local_id or "" for r in claimed.records], token=claimed.token,
                                until=time.time() + lease_seconds)

    def _claim_token(self) -> str:
        import uuid  # here, not at the top: only writes claim, and the CLI's reads load this module too

        pid = os.getpid()
        start = process_start(pid)
        holder = str(pid) if start is None else f"{pid}@{start}"
        return f"{self._machine}:{holder}:{uuid.uuid4().hex[:12]}"

    def _holder_is_gone(self, token: str) -> bool:
        # token = "<machine>:<pid>[@<boot id>/<start>]:<nonce>"; the machine name may itself
        # contain ':'.  A token without the start is an older qmem's: a live PID is alive.
        parts = token.rsplit(":", 2)
        if len(parts) != 3 or parts[0] != self._machine:
            return False
        pid_text, _, start = parts[1].partition("@")
        if not pid_text.isdigit():
            return False
        pid = int(pid_text)
        if start:
            now = process_start(pid)
            if now is not None:
                return now != start  # another process has that PID now (or the machine rebooted)
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
        that was still local when they were written.  :class:`UnknownLocalRecord` when no
        record was queued here under ``local_id``.
        """
        found = self.index.queued_state(local_id)
        if found is None:
            raise UnknownLocalRecord(UNKNOWN_LOCAL_TARGET)
        return found

    def record_outcomes(self, outcomes: Iterable[Outcome]) -> None:
        """Apply what the gateway said about several records, in one transaction.

        A flusher records a whole claimed batch at once: if it dies before this commit,
        the rows stay claimed, are taken over and re-sent under the same Idempotency-Key,
        and the gateway answers with the records it already has.
        """
        self.index.record_outcomes([_with_reason(outcome) for outcome in outcomes])

    def release_claims(self, local_ids: Iterable[str]) -> None:
        """Give up claims as they are, when the outcomes of a batch could not be recorded."""
        self.index.release_claims(local_ids)

    def retry(self, record_ids: Iterable[str] | None = None) -> tuple[Record, ...]:
        """Put failed records back to pending, after the user fixed the cause: those named (by
        id), or every failed record when None; returns them.  InputError, and nothing moves,
        when a named record is not a failed one."""
        return self.index.retry_failed(None if record_ids is None else list(record_ids))

    def forget(self, record_ids: Iterable[str], *, dry_run: bool = False) -> ForgetReport:
        """Remove the records named (gateway or local ids) from this machine for good; with
        ``dry_run`` only say what would go.  InputError, and nothing changes, when a named record
        is not in the index or another live qmem process is sending it right now."""
        rows = self.index.forget(list(record_ids), dry_run=dry_run, now=time.time(),
                                 holder_is_gone=self._holder_is_gone)
        return ForgetReport(rows, dry_run)

    def report(self, *, limit: int | None = QUEUE_LIMIT) -> QueueReport:
        """Counts by state and the most recent rows (failed and pending first), at most ``limit``
        of them (None: all)."""
        return self.index.queue_report(limit=limit)

    def queued_corrections(self, record_ids: Iterable[str]) -> dict[str, str]:
        """``{record id: local id of the queued correction}`` for those of ``record_ids`` that a
        correction still waiting in this outbox supersedes (the gateway does not know yet)."""
        return self.index.queued_corrections(record_ids)

    def pending_count(self) -> int:
        return self.index.count_pending()

    def pending_by_holder(self) -> PendingCount:
        """Pending records free to send, and those another live qmem process holds now."""
        free, elsewhere = self.index.count_pending_by_holder(time.time(), self._holder_is_gone)
        return PendingCount(free=free, elsewhere=elsewhere)


def _with_reason(outcome: Outcome) -> Outcome:
    """``outcome`` with the reason kept beside its record: one bounded line, never empty."""
    if outcome.state == "synced" or (outcome.state == "pending" and not outcome.attempted):
        return outcome  # nothing to say: adopted, or released untouched
    reason = outcome.reason or ("not sent" if outcome.state == "pending" else outcome.state)
    return replace(outcome, reason=_bounded_reason(reason))
