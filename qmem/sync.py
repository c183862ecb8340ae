"""Keeping the local index and the gateway in step: ``flush``, ``enrich``, ``pull``.

Promises:

* **flush** sends each pending outbox record with ``Idempotency-Key`` = its local id, one
  claimed batch at a time (two flushers never send the same record; a killed flusher's
  claim is taken over, and the re-send returns the same record).  Outcomes: ``synced``
  (the gateway id is adopted everywhere), ``duplicate`` (409: the matched id is kept),
  ``failed`` (4xx validation, or a record that can never be sent: text and reason kept,
  never dropped, and the run goes on); anything transient leaves the record pending and
  stops the run.  A correction whose target was queued here is sent with the target's
  gateway id once that is known, and waits until then.  Records another live qmem process
  is sending are counted apart (``elsewhere``), never as left behind.
* **enrich** completes records whose text is partial or missing (``--all``: every record)
  from ``GET /v1/memories/{id}``.
* **pull** reads ``GET /v1/memories:export`` from the persisted cursor; each page and the
  cursor after it are committed together, so an interrupted pull resumes without a gap.
  Tombstones (``deleted_at``) are kept and hidden from find unless ``--deleted``.
"""

from __future__ import annotations

import time

from .clients.gateway import (
    GatewayClient, GatewayDuplicate, GatewayNotFound, GatewayRefused, GatewayUnauthorized, GatewayUnavailable,
)
from .errors import QmemError
from .localdb.outbox import Outbox, UnknownLocalRecord
from .localdb.record import Outcome
from .localdb.record import Observation, Record, observation_from_record
from .records import credential_findings, describe_credentials, is_local_id
from .runtime import Runtime
from .valueclass import asdict, dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["flush", "enrich", "pull"]

EXPORT_CURSOR_KEY = "export_cursor"


def require_gateway(rt: Runtime) -> GatewayClient:
    gateway = rt.gateway
    if gateway is None:
        raise QmemError('no Memory Gateway is configured (set "url" in the config file and export '
                        'QMEM_GATEWAY_API_KEY)', category="configuration")
    return gateway


class _Report:
    """What the reports below share: dataclasses of counts plus ``stopped`` (why a run ended
    with work left); JSON is their fields and ``complete``."""

    stopped: str | None

    @property
    def complete(self) -> bool:
        """The run did all its work (the CLIs exit 0 only then)."""
        return self.stopped is None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "complete": self.complete}  # type: ignore[call-overload]  # dataclasses


@dataclass
class FlushReport(_Report):
    """``sent`` counts records whose request may have reached the gateway (a breaker refusal
    or an unsendable record is not sent); ``remaining`` is what is still pending afterwards
    that no one is sending; ``elsewhere`` is what another live qmem process is sending right
    now (its own report says how that went: not a failure of this run)."""

    sent: int = 0
    synced: int = 0
    duplicate: int = 0
    failed: int = 0
    left_pending: int = 0
    remaining: int = 0
    elsewhere: int = 0
    stopped: str | None = None  # why the run ended early (the gateway became unreachable …)

    @property
    def complete(self) -> bool:
        """Nothing left to send: no pending record, and the run was not cut short."""
        return self.stopped is None and self.remaining == 0


def _request(record: Record) -> dict[str, Any]:
    body = {"text": record.text, "kind": record.kind, "project_id": record.project_id, "scope": record.scope,
            "agent_id": record.agent_id, "source": record.source, "expires_at": record.expires_at,
            "supersedes_id": record.supersedes_id, "supersede_reason": record.supersede_reason}
    return {key: value for key, value in body.items() if value is not None}


def flush(rt: Runtime, *, batch_size: int = 50, progress: Callable[[int, int], None] | None = None,
          budget_s: float | None = None) -> FlushReport:
    """Send the outbox to the gateway until it is empty, the gateway stops answering, or
    ``budget_s`` seconds have passed (then what is left waits for the next flush).

    ``progress(sent, pending at the start)`` is told after each batch.  Every record is
    scanned for credentials right before it is sent (whatever queued it: a store, a
    restored session, an older qmem); a hit fails it, naming the family, and it is never sent.
    A problem of one record (a credential, a correction of a local record this outbox never
    queued, a gateway's 4xx) fails that record with the reason, and the run goes on.
    Whatever happens in a batch, its claims are given up when it ends.
    """
    gateway = require_gateway(rt)
    outbox = rt.outbox
    report = FlushReport()
    total = outbox.pending_count() if progress is not None else 0
    deadline = None if budget_s is None else time.monotonic() + budget_s
    if deadline is not None:
        batch_size = min(batch_size, 5)  # claim little, so an early stop releases little
    lease = gateway.lease_s(1)  # one send and 30 s to spare: renewed before a send when that spare is spent
    synced_now: dict[str, str] = {}  # local id -> gateway id, for corrections later in this run
    left: set[str] = set()  # local ids this run left pending (a record may be tried in two passes)
    waiting = False
    for _ in range(MAX_PASSES):
        done = report.synced + report.duplicate + report.failed
        claimed = _send_batches(gateway, outbox, report, batch_size, lease, deadline, synced_now, left,
                                progress, total)
        report.left_pending = len(left)
        pending = outbox.pending_by_holder()
        report.remaining, report.elsewhere = pending.free, pending.elsewhere
        # Records left free without a stop were released by another flusher or queued meanwhile
        # (look again), or wait for the record they correct (looking again changes nothing).
        waiting = claimed > 0 and done == report.synced + report.duplicate + report.failed
        if report.stopped is not None or not pending.free or waiting:
            break
    if report.stopped is None and report.remaining:
        report.stopped = (STOPPED_BY_TARGETS if waiting else
                          "more records were queued while it ran; the next flush sends them")
    return report


#: A flush looks for records again at most this many times (records queued while it runs).
MAX_PASSES = 5

#: ``FlushReport.stopped`` when what is left are corrections whose target is not sent yet
#: (another qmem process holds it, or it was queued after them).
STOPPED_BY_TARGETS = "what is left corrects records that are not sent yet; the next flush sends it"


def _send_batches(gateway: GatewayClient, outbox: Outbox, report: FlushReport, batch_size: int, lease: float,
                  deadline: float | None, synced_now: dict[str, str], left: set[str],
                  progress: Callable[[int, int], None] | None, total: int) -> int:
    """Claim and send batches until none is left, the run stops, or a batch sends nothing;
    returns how many records were claimed."""
    claimed = 0
    while report.stopped is None:
        claim = outbox.claim(batch_size, lease_seconds=lease)
        batch = claim.records
        if not batch:
            return claimed
        claimed += len(batch)
        renewed = time.monotonic()
        outcomes: list[Outcome] = []
        try:
            for record in batch:
                if deadline is not None and time.monotonic() >= deadline:
                    report.stopped = STOPPED_BY_BUDGET
                    break
                if time.monotonic() - renewed > RENEW_AFTER_S:  # the lease must outlast this send
                    try:
                        outbox.renew(claim, lease_seconds=lease)
                        renewed = time.monotonic()
                    except QmemError:
                        pass  # a lapsed claim may be sent twice, under one key: the gateway keeps one record
                outcomes.append(_send(gateway, outbox, record, synced_now, report))
                if report.stopped is not None:
                    break
        finally:
            # One transaction per batch, every claim released (what was not sent stays pending as
            # it was).  If this process dies first, the batch is re-sent under the same keys, and
            # the gateway answers with what it already has.
            decided = {outcome.local_id for outcome in outcomes}
            outcomes += [Outcome.unsent(r.local_id or "") for r in batch if r.local_id not in decided]
            try:
                outbox.record_outcomes(outcomes)
            except BaseException:
                try:
                    outbox.release_claims(r.local_id or "" for r in batch)
                except QmemError:
                    pass  # the claims run out with their lease; the error that matters is raised below
                raise
        for outcome in outcomes:
            if outcome.state == "pending":
                left.add(outcome.local_id)
            else:
                left.discard(outcome.local_id)
                setattr(report, outcome.state, getattr(report, outcome.state) + 1)
        if progress is not None:
            progress(min(report.sent, total), total)
        if all(outcome.state == "pending" for outcome in outcomes):
            return claimed  # only records that wait for others, or the gateway went away
    return claimed


#: A flush renews its claim before a send once this much of the lease's spare time
#: (:meth:`GatewayClient.lease_s`: one send's longest time plus 30 s) has passed, so that the
#: claim outlasts the send; a flusher that dies is taken over at once (its process is gone),
#: one that hangs loses its records a lease after its last renewal.
RENEW_AFTER_S = 25.0


#: ``FlushReport.stopped`` when a budgeted flush ran out of time (nothing went wrong).
STOPPED_BY_BUDGET = "time budget reached; the rest waits for the next flush"



def _send(gateway: GatewayClient, outbox: Outbox, record: Record, synced_now: dict[str, str],
          report: FlushReport) -> Outcome:
    local_id = record.local_id
    assert local_id is not None
    body = _request(record)
    findings = credential_findings(body)
    if findings:
        return Outcome.failed(local_id, describe_credentials(findings))
    target = record.supersedes_id
    if target and is_local_id(target):
        try:
            state, current = ("synced", synced_now[target]) if target in synced_now else outbox.gateway_id(target)
        except UnknownLocalRecord as exc:
            return Outcome.failed(local_id, exc.message)
        if state == "pending":
            return Outcome.transient(local_id, "waits for the record it corrects to be sent")
        if state != "synced":
            return Outcome.failed(local_id, f"the record it corrects was not accepted ({state})")
        body["supersedes_id"] = current
    try:
        saved = gateway.create(body, idempotency_key=local_id)
    except GatewayDuplicate as dup:
        report.sent += 1
        return Outcome.duplicate(local_id, dup.matched_id)
    except GatewayUnauthorized as exc:
        report.sent += 1
        report.stopped = exc.message
        return Outcome.transient(local_id, exc.message)
    except GatewayRefused as exc:
        report.sent += 1
        return Outcome.failed(local_id, exc.reason)
    except GatewayUnavailable as exc:
        report.sent += 1 if exc.sent else 0
        report.stopped = exc.message
        return Outcome.transient(local_id, exc.message) if exc.sent else Outcome.unsent(local_id)
    report.sent += 1
    synced_now[local_id] = saved["id"]
    return Outcome.synced(local_id, saved)


@dataclass
class EnrichReport(_Report):
    checked: int = 0
    updated: int = 0
    missing: int = 0  # the gateway has no such record (any more); the local copy is kept
    stopped: str | None = None



def enrich(rt: Runtime, *, everything: bool = False) -> EnrichReport:
    """Fill partial records (or, with ``everything``, refresh all) from the gateway."""
    gateway = require_gateway(rt)
    report = EnrichReport()
    for record_id in rt.index.enrich_candidates(everything=everything):
        if is_local_id(record_id):
            continue
        report.checked += 1
        try:
            record = gateway.get(record_id)
        except GatewayNotFound:
            report.missing += 1
            continue
        except (GatewayUnavailable, GatewayUnauthorized) as exc:
            report.stopped = exc.message
            break
        except GatewayRefused:
            report.missing += 1
            continue
        obs = observation_from_record(record, coverage="full", state="synced", tool="enrich")
        if obs is not None and rt.index.learn([obs])["updated"]:
            report.updated += 1
    return report


@dataclass
class PullReport(_Report):
    pages: int = 0
    items: int = 0
    added: int = 0
    updated: int = 0
    tombstones: int = 0
    stopped: str | None = None



def _export_observation(item: Any) -> Observation | None:
    if not isinstance(item, dict):
        return None
    if item.get("text") is None and isinstance(item.get("deleted_at"), str):
        record_id = item.get("id")
        if isinstance(record_id, str) and record_id and not is_local_id(record_id):
            return Observation(id=record_id, deleted_at=item["deleted_at"], state="synced", tool="pull")
        return None
    return observation_from_record(item, coverage="full", state="synced", tool="pull")


def _issued_cursor(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def pull(rt: Runtime, *, page_size: int = 200, max_pages: int | None = None) -> PullReport:
    """Incremental pull from the export, resuming at the persisted cursor.

    Each page and the cursor after it are committed together.  A gateway whose last page
    answers ``next_cursor: null`` gives no position after it; rather than read that page
    (or everything, when it was the first) again next time, pull asks once more for all but
    its last item, and keeps the cursor that answer carries: the next pull re-reads one item.
    Every item with ``deleted_at`` counts as a tombstone, with or without its text.
    """
    gateway = require_gateway(rt)
    index = rt.index
    report = PullReport()
    cursor = index.get_meta(EXPORT_CURSOR_KEY)
    while max_pages is None or report.pages < max_pages:
        try:
            page = gateway.export(cursor, page_size)
        except (GatewayUnavailable, GatewayRefused) as exc:
            report.stopped = exc.message
            break
        items = page["items"]
        observations = [obs for obs in (_export_observation(item) for item in items) if obs is not None]
        report.pages += 1
        report.items += len(items)
        report.tombstones += sum(1 for item in items if isinstance(item, dict)
                                 and isinstance(item.get("deleted_at"), str))
        new_cursor = _issued_cursor(page.get("next_cursor"))
        if new_cursor is None and len(items) > 1:
            new_cursor = _cursor_before_last(gateway, cursor, len(items) - 1)
        counts = index.learn(observations, meta={EXPORT_CURSOR_KEY: new_cursor} if new_cursor else None)
        report.added += counts["added"]
        report.updated += counts["updated"]
        if (_issued_cursor(page.get("next_cursor")) is None or new_cursor == cursor or not items
                or page.get("has_more") is False):
            break
        cursor = new_cursor
    return report


def _cursor_before_last(gateway: GatewayClient, cursor: str | None, limit: int) -> str | None:
    """A cursor the gateway issues for the page that stops just before the last item, or None."""
    try:
        return _issued_cursor(gateway.export(cursor, limit).get("next_cursor"))
    except (GatewayUnavailable, GatewayRefused):
        return None  # the page is simply read again next time
