"""All five gateway-lane tools: ``qmem_store``, ``qmem_search``, ``qmem_correct``, ``qmem_meta``, ``qmem_get``.

The design card names this module ``store``; it holds every tool of the gateway lane, not only
``qmem_store`` (:data:`TOOLS` maps each name to its function).  Keeping the local index and the
gateway in step (``flush``, ``enrich``, ``pull``) is :mod:`qmem.sync`.  Each tool is a plain function ``(runtime, arguments) -> ToolResult`` that any host
adapter calls; a :class:`~qmem.errors.ToolError` is a failure the host shows as a tool error.

Promises:

* **Validation before any I/O**: required ``project_id``, known ``kind``, bounded non-empty
  text, ``expires_at`` in the future, well-formed ids, bounded ``top_k``; and the **secret
  guard** — text carrying a high-confidence credential is refused, naming the family and
  never echoing the secret.
* **A write is never lost and never reported as shared when it is not.**  A store is
  written ahead: queued in the outbox under a fresh local id, held by this process, before
  it goes to the gateway with that id as Idempotency-Key.  Accepted, it takes the gateway's
  id and is a synced outbox record, as a flush leaves one; refused (a duplicate, a 4xx), it is dropped and the answer says
  "not stored".  If the gateway cannot be reached (breaker open, connect failure) or the
  request may have been sent but the answer was lost, it stays queued under that same key
  and the answer says plainly "queued locally, not yet shared".  A process killed
  mid-request leaves it to the next flush, which sends it under that key.  With
  ``offlineQueue: false`` an unreachable gateway is a failure and nothing is kept.
  ``queue_only`` (``store --queue-only``, and a bridge's writes at shutdown) is the same
  store, checks and answer, without contacting the gateway.  A correction of a ``local-…``
  id this outbox never queued is refused.
* **Reads degrade, labelled.**  search / get / meta answers are written through to the
  local index; when the gateway is unreachable, throttled or failing (and
  ``localFallback``), the local index answers with ``fallback: "local_sqlite"`` and no
  semantic scores.
* Structured results (``details``) are ``{"qmem": 1, "record": …}`` or
  ``{"qmem": 1, "results": …}``: what session import reads back.
"""

from __future__ import annotations

import json
import math

from .clients.gateway import GatewayDuplicate, GatewayRefused, GatewayUnauthorized, GatewayUnavailable
from .errors import InputError, LocalIndexError, ToolError  # ToolError: still importable from here
from .localdb.outbox import HeldWrite, UnknownLocalRecord
from .localdb.record import Observation, Record, observation_from_record, utc_now
from .localdb.search import FindResult
from .records import (
    QUEUED_NOT_SHARED,
    KINDS, NewRecord, check_record_id, check_unicode, credential_findings, describe_credentials, is_local_id,
    new_local_id, validate_new_record,
)
from .runtime import Runtime
from .valueclass import dataclass, field, replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = ["qmem_store", "TOOLS"]

MAX_QUERY_CHARS = 2_000
MAX_TOP_K = 50
EXCERPT_CHARS = 1_200


@dataclass(frozen=True)
class ToolResult:
    text: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_host(self) -> dict[str, Any]:
        """The result shape pi and MCP hosts expect."""
        return {"content": [{"type": "text", "text": self.text}], "details": self.details}


def score_label(score: float | None) -> str:
    """DESIGN §6: ≥ 0.60 strong, 0.45–0.60 weak, below 0.45 noise."""
    if score is None:
        return "lexical"
    if score >= 0.60:
        return "strong"
    if score >= 0.45:
        return "weak"
    return "noise"


# --- argument checks ---------------------------------------------------------------------

def guard_secrets(record: NewRecord) -> None:
    """Refuse a record any of whose fields carries a credential (ToolError, naming family and field)."""
    findings = credential_findings(record.to_request())
    if findings:
        raise ToolError(f"not stored: {describe_credentials(findings)}. {FALSE_POSITIVE_HINT}")


#: What a refused store adds, for a text that holds no credential: how to report it without leaking it.
FALSE_POSITIVE_HINT = ("Not a credential? Report the false positive to qmem's maintainers (an issue on its "
                       "repository) with the family named here and a made-up value of the same shape, never the "
                       "text itself")


def _bool_arg(args: Mapping[str, Any], key: str, default: bool) -> bool:
    value = args.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InputError(f"{key} must be true or false")
    return value


def _search_args(args: Mapping[str, Any]) -> dict[str, Any]:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        raise InputError("query is required: say what to look for")
    if len(query) > MAX_QUERY_CHARS:
        raise InputError(f"query is too long (the limit is {MAX_QUERY_CHARS} characters)")
    check_unicode(query, "query")
    findings = credential_findings({"text": query})
    if findings:
        # A search is logged by whoever answers it: a pasted credential does not leave the machine.
        raise InputError(f"query not sent: {describe_credentials(findings)}")
    body: dict[str, Any] = {"query": query}
    kind = args.get("kind")
    if kind not in (None, ""):
        if kind not in KINDS:
            raise InputError(f"kind must be one of: {', '.join(KINDS)}")
        body["kind"] = kind
    for key in ("project_id", "scope"):
        value = args.get(key)
        if value not in (None, ""):
            if not isinstance(value, str) or len(value) > 128 or not value.strip():
                raise InputError(f"{key} must be a short name")
            body[key] = check_unicode(value, key)
    top_k = args.get("top_k", 10)
    if isinstance(top_k, bool) or not isinstance(top_k, (int, float)) or not math.isfinite(top_k) or top_k < 1:
        raise InputError(f"top_k must be a whole number from 1 to {MAX_TOP_K}")
    body["top_k"] = min(int(top_k), MAX_TOP_K)
    body["include_superseded"] = _bool_arg(args, "include_superseded", False)
    min_score = args.get("min_score")
    if min_score is not None:
        if isinstance(min_score, bool) or not isinstance(min_score, (int, float)) or not 0 <= min_score <= 1:
            raise InputError("min_score must be a number from 0 to 1")
        body["min_score"] = float(min_score)
    return body


def _record_id(args: Mapping[str, Any], key: str = "id") -> str:
    value = args.get(key)
    if value in (None, ""):
        raise InputError(f"{key} is required")
    return check_record_id(value, name=key)


# --- local index helpers (never fatal) --------------------------------------------------

def _learn(rt: Runtime, observations: list[Observation]) -> None:
    """Write gateway answers through to the local index; a broken index only warns."""
    if not observations:
        return
    try:
        rt.index.learn(observations)
    except LocalIndexError:
        rt.warnings.warn("index")


def _observation(record: Mapping[str, Any], *, coverage: str, tool: str) -> Observation | None:
    """A gateway answer, as learned by this qmem directly (state ``synced``)."""
    return observation_from_record(record, coverage=coverage, state="synced", tool=tool)


def _public(record: Record) -> dict[str, Any]:
    """A local record in the gateway's result shape (no semantic score)."""
    out = {key: getattr(record, key) for key in (
        "id", "text", "kind", "project_id", "scope", "agent_id", "created_at", "superseded_by", "supersede_reason",
        "private", "deleted_at", "expires_at", "supersedes_id", "state", "coverage")}
    out["score"] = None
    if record.state == "pending":
        out["queued"] = True
    return out


def _unreachable_note(exc: GatewayUnavailable | None) -> str:
    """Why the gateway was not used, naming the real cause (refused, timed out, DNS, TLS …)."""
    if exc is None:
        return "no Memory Gateway is configured"
    if exc.kind == "breaker_open":
        return f"the Memory Gateway is marked unreachable (retry in {max(exc.retry_in_ms, 0) // 1000} s)"
    if exc.breaker_open:
        return f"{exc.message}; calls will fail fast for {max(exc.retry_in_ms, 0) // 1000} s"
    return exc.message


def _sentence(text: str) -> str:
    """``text`` with a capital first letter (str.capitalize would lower-case the rest)."""
    return text[:1].upper() + text[1:]


def _gateway_json(exc: GatewayUnavailable | None) -> dict[str, Any]:
    if exc is None:
        return {"error": "gateway_not_configured"}
    return exc.to_json()


# --- rendering (pure) --------------------------------------------------------------------

def _excerpt(text: Any) -> str:
    if not isinstance(text, str):
        return "(no text)"
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "…"


def render_results(results: list[dict[str, Any]], *, lexical: bool) -> str:
    lines = []
    for number, item in enumerate(results, 1):
        score = item.get("score")
        if lexical:
            head = f"{number}. {'⏳ ' if item.get('queued') else ''}{item.get('id')}"
        else:
            numeric = score if isinstance(score, (int, float)) and not isinstance(score, bool) else None
            shown = f"{numeric:.2f}" if numeric is not None else "?"
            head = f"{number}. [{shown} {score_label(numeric)}] {item.get('id')}"
        meta = [str(item.get(k)) for k in ("kind", "project_id", "agent_id") if item.get(k)]
        created = item.get("created_at")
        if isinstance(created, str):
            meta.append(created[:10])
        if item.get("superseded_by"):
            meta.append(f"superseded by {item['superseded_by']}")
        if item.get("private"):
            meta.append("private")
        if item.get("queued"):
            meta.append(QUEUED_NOT_SHARED)
        lines.append(f"{head} ({', '.join(meta)})" if meta else head)
        lines.append(_indented(_excerpt(item.get("text"))))
    return "\n".join(lines)


def _indented(text: str) -> str:
    """A record's text under its line, indented so that it cannot pass for one."""
    return "\n".join("   " + line for line in text.splitlines() or [""])


# --- the tools ---------------------------------------------------------------------------

def _store(rt: Runtime, record: NewRecord, tool: str, flush_soon: Callable[[], None] | None, *,
           queue_only: bool = False) -> ToolResult:
    guard_secrets(record)
    supersedes = record.supersedes_id
    if supersedes and is_local_id(supersedes):
        # The target was queued here; if it has synced since, use its gateway id.
        try:
            state, current = rt.outbox.gateway_id(supersedes)
        except UnknownLocalRecord as exc:
            raise ToolError(exc.message) from None
        except LocalIndexError as exc:
            raise ToolError(f"not stored: the local outbox failed ({exc.message})") from None
        if state == "synced":
            record = replace(record, supersedes_id=current)
    # One key for this write, whatever happens: if an attempt may have reached the gateway,
    # the queued copy carries the key the gateway saw, and the flush gets that record back.
    local_id = new_local_id()
    gateway = None if queue_only else rt.gateway
    failure: GatewayUnavailable | None = None
    held: HeldWrite | None = None
    target_known = True
    if gateway is not None and not is_local_id(record.supersedes_id):
        # Written ahead: queued, and held by this process, before the request leaves.  Killed
        # mid-request, the process leaves it to the next flush (under the key the gateway may
        # have seen), never to no one.  If the index cannot take it, the store goes on without.
        try:
            target_known = _target_known(rt, record)
            held = rt.outbox.write_ahead(record, tool=tool, key=local_id, lease_seconds=gateway.lease_s(1))
        except LocalIndexError:
            held = None
        try:
            saved = gateway.create(record.to_request(), idempotency_key=local_id)
        except GatewayDuplicate as dup:
            _settle(rt, held, rt.outbox.discard)
            return ToolResult(
                f"Not stored: the gateway already holds a similar record ({dup.matched_id}). "
                f"Use qmem_get to read it, or qmem_correct to supersede it.",
                {"qmem": 1, "duplicate": True, "duplicate_of": dup.matched_id, "shared": False})
        except GatewayUnauthorized as refused:
            # A key problem is the user's to fix, not the record's: keep it, as a flush would.
            failure = GatewayUnavailable(refused.message, kind="unauthorized", sent=True, status=refused.status)
        except GatewayRefused as refused:
            _settle(rt, held, rt.outbox.discard)
            raise ToolError(f"not stored: {refused.message}") from None
        except GatewayUnavailable as exc:
            failure = exc
        except BaseException:
            _settle(rt, held, rt.outbox.release_held)  # whatever happened, it waits for a flush, under its key
            raise
        else:
            return _shared(rt, record, saved, held, tool, flush_soon)
    why = QUEUE_ONLY_NOTE if queue_only else _unreachable_note(failure)
    if not rt.config.offline_queue and not queue_only:
        _settle(rt, held, rt.outbox.discard)
        raise ToolError(f"not stored: {why} and offlineQueue is off")
    if held is not None:
        _settle(rt, held, rt.outbox.release_held)
        queued = held.record
    else:
        try:
            target_known = _target_known(rt, record)
            queued = rt.outbox.enqueue(record, tool=tool, key=local_id)
        except LocalIndexError as exc:
            raise ToolError(f"not stored: {why} and the local outbox failed ({exc.message})") from None
    if record.supersedes_id and is_local_id(record.supersedes_id) and not queue_only:
        why = "the record it corrects is itself still queued"
    text = (f"Queued locally as {queued.id}, NOT yet shared: {why}. It is searchable on this machine now and will "
            f"be sent to the Memory Gateway by the next flush.")
    details = {"qmem": 1, "record": queued.to_json(), "queued": True, "shared": False,
               "gateway": {"error": "not_contacted"} if queue_only else _gateway_json(failure)}
    if record.supersedes_id:
        if target_known:
            text += f" {record.supersedes_id} is hidden from search as superseded from now on."
        else:
            text += (f" Note: {record.supersedes_id} is not in the local index; the gateway will decide whether it "
                     f"exists when the correction is sent.")
        details["target_known_locally"] = target_known
    return ToolResult(text, details)


def _shared(rt: Runtime, record: NewRecord, saved: dict[str, Any], held: HeldWrite | None, tool: str,
            flush_soon: Callable[[], None] | None) -> ToolResult:
    """The answer to a store the gateway accepted, once the local index knows it."""
    stored = {**record.to_request(), **saved}
    learned = [_observation(stored, coverage="full", tool=tool)]
    if record.supersedes_id:
        learned.append(Observation(id=record.supersedes_id, superseded_by=saved["id"], state="synced",
                                   supersede_reason=record.supersede_reason, tool=tool))
    observed = [obs for obs in learned if obs is not None]
    if held is None:
        _learn(rt, observed)
    else:  # the row written ahead is synced, as a flush leaves it (counted alike everywhere)
        gateway_record = stored if learned[0] is not None else None  # None: no usable id, the row leaves
        marks = [obs for obs in learned[1:] if obs is not None]
        _settle(rt, held, lambda mine: rt.outbox.record_accepted(mine, gateway_record, marks))
    if flush_soon is not None:
        flush_soon()
    verb = "Corrected" if record.supersedes_id else "Stored"
    return ToolResult(f"{verb}: {saved['id']} (shared through the Memory Gateway).",
                      {"qmem": 1, "record": stored, "shared": True})


def _target_known(rt: Runtime, record: NewRecord) -> bool:
    """Whether the record a correction supersedes is in the local index (True for a plain store)."""
    return record.supersedes_id is None or rt.index.get(record.supersedes_id) is not None


def _settle(rt: Runtime, held: HeldWrite | None, step: Callable[[HeldWrite], object]) -> None:
    """Settle a written-ahead record, if there is one (keep, drop or release it).  If the index
    fails, the row stays pending under its key: its claim runs out with its lease (or with this
    process) and a flush sends it again, recording what the gateway says (a key is not doubled)."""
    if held is None:
        return
    try:
        step(held)
    except LocalIndexError:
        rt.warnings.warn("index")


#: Why a store asked to only queue (``store --queue-only``) did not share its record.
QUEUE_ONLY_NOTE = "the gateway was not contacted (queue only)"


def qmem_store(rt: Runtime, args: Mapping[str, Any], *, flush_soon: Callable[[], None] | None = None,
               queue_only: bool = False) -> ToolResult:
    """Save a memory record; see the module docstring for what "queued" means.  ``queue_only``
    queues it without contacting the gateway (the same checks, scan and answer)."""
    return _store(rt, validate_new_record(args), "qmem_store", flush_soon, queue_only=queue_only)


def qmem_correct(rt: Runtime, args: Mapping[str, Any], *, flush_soon: Callable[[], None] | None = None,
                 queue_only: bool = False) -> ToolResult:
    """Correct a record: a new record that supersedes ``supersedes_id`` (records are immutable).
    ``queue_only`` as for :func:`qmem_store`."""
    if args.get("supersedes_id") in (None, ""):
        raise InputError("supersedes_id is required: the id of the record being corrected")
    return _store(rt, validate_new_record(args), "qmem_correct", flush_soon, queue_only=queue_only)


def _local_search(rt: Runtime, body: Mapping[str, Any], failure: GatewayUnavailable | None) -> ToolResult:
    """The gateway's search, answered by the local index: the same filters, exactly.

    ``kind``, ``project_id`` and ``scope`` match exactly (a record of unknown scope does not
    answer ``scope=X``), superseded records only with ``include_superseded``; ``min_score``
    has no meaning for lexical results, so it is not applied, and the answer says so.
    """
    if not rt.config.local_fallback:
        raise ToolError(f"search failed: {_unreachable_note(failure)} and localFallback is off")
    try:
        found: FindResult = rt.index.find(
            body["query"], project=body.get("project_id"), kind=body.get("kind"), scope=body.get("scope"),
            limit=body["top_k"], superseded=body["include_superseded"])
    except InputError as exc:
        raise ToolError(f"search failed: the gateway is unreachable and the local index cannot search this "
                        f"query ({exc.message})") from None
    except LocalIndexError as exc:
        raise ToolError(f"search failed: {_unreachable_note(failure)} and the local index failed "
                        f"({exc.message})") from None
    results = [_public(r) for r in found.records]
    header = (f"{_sentence(_unreachable_note(failure))}: {len(results)} lexical result(s) from the LOCAL index "
              f"(fallback: local_sqlite; no semantic scores — do not apply the 0.45/0.60 thresholds; "
              f"it may be older than the gateway)")
    if found.partial:
        header += "; PARTIAL match: no record has all the words"
    elif found.complete < len(results):
        header += f"; the first {found.complete} have all the words, the rest some of them"
    if found.more:
        header += f"; more records matched than top_k={body['top_k']}"
    details: dict[str, Any] = {"qmem": 1, "results": results, "fallback": "local_sqlite", "match": found.match,
                               "partial": found.partial, "complete": found.complete, "more": found.more,
                               "gateway": _gateway_json(failure)}
    if "min_score" in body:
        header += "; min_score was not applied (lexical results have no score)"
        details["min_score_applied"] = False
    text = header + (":\n" + render_results(results, lexical=True) if results else ".")
    return ToolResult(text, details)


def qmem_search(rt: Runtime, args: Mapping[str, Any]) -> ToolResult:
    """Semantic search on the gateway; lexical, labelled, from the local index when it is away."""
    body = _search_args(args)
    gateway = rt.gateway
    if gateway is None:
        return _local_search(rt, body, None)
    try:
        answer = gateway.search(body)
    except GatewayRefused as refused:
        raise ToolError(f"search failed: {refused.message}") from None
    except GatewayUnavailable as exc:
        return _local_search(rt, body, exc)
    results = [item for item in answer["results"] if isinstance(item, dict)]
    _learn(rt, [obs for obs in (_observation(r, coverage="partial", tool="qmem_search") for r in results) if obs])
    results, hidden = _apply_queued_corrections(rt, results, include_superseded=body["include_superseded"])
    note = ""
    if hidden:
        note = (f"\n({len(hidden)} more hidden: superseded by corrections queued on this machine, not yet shared: "
                f"{', '.join(f'{old} by {new}' for old, new in hidden.items())})")
    details: dict[str, Any] = {"qmem": 1, "results": results}
    if hidden:
        details["hidden_by_queued_corrections"] = hidden
    if not results:
        return ToolResult("No matching records in the shared memory." + note, details)
    text = (f"{len(results)} result(s) from the Memory Gateway (semantic scores: ≥ 0.60 strong, 0.45–0.60 weak, "
            f"< 0.45 noise):\n" + render_results(results, lexical=False) + note)
    return ToolResult(text, details)


def _apply_queued_corrections(rt: Runtime, results: list[dict[str, Any]], *, include_superseded: bool
                              ) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The gateway's results as this machine knows them: a record that a correction queued here
    supersedes is hidden from a default search (and marked when superseded ones are asked for).

    Returns (results, {hidden id: the queued correction's local id}).
    """
    try:
        queued = rt.outbox.queued_corrections(str(item.get("id")) for item in results)
    except LocalIndexError:
        rt.warnings.warn("index")
        return results, {}
    if not queued:
        return results, {}
    if include_superseded:
        return [{**item, "superseded_by": queued[item["id"]], "superseded_locally": True}
                if item.get("id") in queued and not item.get("superseded_by") else item for item in results], {}
    return [item for item in results if item.get("id") not in queued], queued


@dataclass(frozen=True)
class Currency:
    """Whether a record is the current version, and if not, what replaced it and why."""

    current: bool
    superseded_by: str | None = None
    reason: str | None = None
    queued_correction: bool = False  # superseded by a correction still queued on this machine

    def describe(self) -> str:
        if self.current:
            return "current"
        why = f" ({self.reason})" if self.reason else ""
        queued = ", a correction queued on this machine, not yet shared" if self.queued_correction else ""
        return f"superseded by {self.superseded_by}{why}{queued}"

    def to_json(self) -> dict[str, Any]:
        return {"current": self.current, "superseded_by": self.superseded_by, "reason": self.reason,
                "queued_correction": self.queued_correction}


def _currency(rt: Runtime, record: Mapping[str, Any], *, from_gateway: bool) -> Currency:
    """The record's supersede state: its own word (the gateway's or the local copy's), and a
    correction queued here supersedes it even while the gateway, which has not seen it yet,
    still calls it current.  The reason is the correction's own when it is known here."""
    superseded_by = record.get("superseded_by") if isinstance(record.get("superseded_by"), str) else None
    reason = record.get("supersede_reason") if isinstance(record.get("supersede_reason"), str) else None
    if not from_gateway and record.get("supersedes_id"):
        reason = None  # a local row's own reason is why *it* corrects another record
    try:
        if superseded_by is None and from_gateway:
            superseded_by = rt.outbox.queued_corrections([str(record.get("id"))]).get(str(record.get("id")))
        correction = rt.index.get(superseded_by) if superseded_by is not None else None
    except LocalIndexError:
        correction = None
    if superseded_by is None:
        return Currency(current=True)
    if correction is not None and correction.supersede_reason:
        reason = correction.supersede_reason
    return Currency(current=False, superseded_by=superseded_by, reason=reason,
                    queued_correction=correction is not None and correction.pending)


def render_record(record: Mapping[str, Any], currency: Currency) -> str:
    """One record in full: a line with id, kind, project, date and currency, then its text."""
    created = record.get("created_at")
    head = [str(record.get("id")), str(record.get("kind") or "kind unknown"),
            f"project {record.get('project_id') or 'unknown'}",
            created[:10] if isinstance(created, str) and created else "date unknown", currency.describe()]
    for key, label in (("scope", "scope"), ("agent_id", "agent"), ("supersedes_id", "supersedes")):
        if record.get(key):
            head.append(f"{label} {record[key]}")
    if record.get("deleted_at"):
        head.append(f"deleted {str(record['deleted_at'])[:10]}")
    if record.get("expires_at"):
        head.append(f"expires {str(record['expires_at'])[:10]}")
    if record.get("private"):
        head.append("private")
    if record.get("queued"):
        head.append(QUEUED_NOT_SHARED)
    if record.get("coverage") == "partial":
        head.append("excerpt only (run enrich)")
    text = record.get("text")
    body = text if isinstance(text, str) and text else "(text not known here)"
    return " · ".join(head) + "\n" + _indented(body)


def qmem_get(rt: Runtime, args: Mapping[str, Any]) -> ToolResult:
    """One record by id, saying whether it is current or superseded (by what, why); local when the gateway is away.

    The text and ``details`` say the same: ``details["currency"]`` holds what the text's
    first line says.
    """
    record_id = _record_id(args)
    failure: GatewayUnavailable | None = None
    gateway = rt.gateway
    if gateway is not None and not is_local_id(record_id):
        try:
            record = gateway.get(record_id)
        except GatewayRefused as refused:
            raise ToolError(f"get failed: {refused.message}") from None
        except GatewayUnavailable as exc:
            failure = exc
        else:
            _learn(rt, [obs for obs in [_observation(record, coverage="full", tool="qmem_get")] if obs])
            currency = _currency(rt, record, from_gateway=True)
            return ToolResult("From the Memory Gateway:\n" + render_record(record, currency),
                              {"qmem": 1, "record": record, "currency": currency.to_json()})
    if not rt.config.local_fallback and not is_local_id(record_id):
        raise ToolError(f"get failed: {_unreachable_note(failure)} and localFallback is off")
    try:
        local = rt.index.get(record_id)
    except LocalIndexError as exc:
        raise ToolError(f"get failed: the local index failed ({exc.message})") from None
    if local is None:
        raise ToolError(f"no record {record_id} in the local index ({_unreachable_note(failure)})")
    public = _public(local)
    currency = _currency(rt, public, from_gateway=False)
    if local.pending:
        note = _sentence(QUEUED_NOT_SHARED)
    else:
        note = (f"{_sentence(_unreachable_note(failure))}; from the LOCAL index (fallback: local_sqlite; it may be "
                f"older than the gateway)")
    return ToolResult(f"{note}:\n" + render_record(public, currency),
                      {"qmem": 1, "record": public, "currency": currency.to_json(), "fallback": "local_sqlite",
                       "gateway": _gateway_json(failure)})


def qmem_meta(rt: Runtime, args: Mapping[str, Any]) -> ToolResult:
    """Discovery: counts by scope × kind, projects, agents, superseded — to choose filters."""
    failure: GatewayUnavailable | None = None
    gateway = rt.gateway
    if gateway is not None:
        try:
            meta = gateway.meta()
        except GatewayRefused as refused:
            raise ToolError(f"meta failed: {refused.message}") from None
        except GatewayUnavailable as exc:
            failure = exc
        else:
            try:
                rt.index.set_meta("gateway_meta", json.dumps({"saved_at": utc_now(), "meta": meta}))
            except LocalIndexError:
                rt.warnings.warn("index")
            return ToolResult(_render_meta(meta, "Memory Gateway"), {"qmem": 1, "meta": meta})
    if not rt.config.local_fallback:
        raise ToolError(f"meta failed: {_unreachable_note(failure)} and localFallback is off")
    try:
        meta = rt.index.meta()
    except LocalIndexError as exc:
        raise ToolError(f"meta failed: the local index failed ({exc.message})") from None
    details = {"qmem": 1, "meta": meta, "fallback": "local_sqlite", "gateway": _gateway_json(failure)}
    try:
        snapshot = rt.index.get_meta("gateway_meta")
    except LocalIndexError:
        snapshot = None
    if snapshot:
        details["last_gateway_meta"] = json.loads(snapshot)  # the gateway's own overview, as last seen
    return ToolResult(f"{_sentence(_unreachable_note(failure))}; " + _render_meta(meta, "LOCAL index"), details)


def _render_meta(meta: Mapping[str, Any], source: str) -> str:
    lines = [f"overview from the {source}:"]
    counts = meta.get("counts")
    if isinstance(counts, dict):
        for scope, kinds in sorted(counts.items(), key=lambda kv: str(kv[0])):
            if isinstance(kinds, dict):
                parts = ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items(), key=lambda kv: str(kv[0])))
                lines.append(f"  scope {scope}: {parts}")
    for key in ("projects", "agents"):
        values = meta.get(key)
        if isinstance(values, list):
            shown = ", ".join(str(v.get("name", v) if isinstance(v, dict) else v) for v in values[:50])
            lines.append(f"  {key}: {shown or '(none)'}")
    if "superseded" in meta:
        lines.append(f"  superseded: {meta['superseded']}")
    return "\n".join(lines)


#: Tool name -> function, for adapters.
TOOLS: dict[str, Callable[..., ToolResult]] = {
    "qmem_store": qmem_store,
    "qmem_search": qmem_search,
    "qmem_correct": qmem_correct,
    "qmem_meta": qmem_meta,
    "qmem_get": qmem_get,
}
