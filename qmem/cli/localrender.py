"""``python3 -m qmem.local``'s text output: what each command found or did, as the lines a person reads.

Pure: every function takes what a command produced (a find result, the index's status, the
outbox's report, a session import's report) and returns text; the ``--json`` documents are
the values' own ``to_json``.  A record's line marks its outbox state (⏳ pending, ✗ failed,
≈ duplicate) and says what hides it.  Only :mod:`qmem.local` uses this module.
"""

from __future__ import annotations

from ..records import QUEUED_NOT_SHARED
from ..localdb.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:  # only named: the values are made by the commands
    from collections.abc import Sequence
    from typing import Any
    from ..localindex import IndexStatus
    from ..localdb.search import FindResult
    from ..localdb.outbox import ForgetReport
    from ..localindex import QueueReport
    from ..localdb.sessionimport import ImportReport

__all__ = ["render_find", "render_status", "render_queue", "render_retried", "render_import", "render_forget",
           "render_recall_log"]


def _short_time(value: str | None) -> str:
    return value[:10] if value else "?"


def _marker(record: Record) -> str:
    return {"pending": "⏳", "failed": "✗", "duplicate": "≈"}.get(record.state, "·")


def render_record_line(record: Record) -> str:
    bits = [f"{_marker(record)} {record.id}", f"[{record.kind or '?'}]", record.project_id or "?",
            _short_time(record.created_at)]
    notes = []
    if record.state == "pending":
        notes.append(QUEUED_NOT_SHARED)
    elif record.state == "failed":
        reason = record.reason or "refused by the gateway"
        # A reason is the cause alone; rows an older qmem marked failed may carry the prefix already.
        notes.append(reason if reason.startswith("not sent: ") else f"not sent: {reason}")
    elif record.state == "duplicate":
        notes.append(f"duplicate of {record.duplicate_of}")
    if record.coverage == "partial":
        notes.append("excerpt")
    if record.supersedes_id:
        notes.append(f"supersedes {record.supersedes_id}")
    if record.superseded_by:
        notes.append(f"superseded by {record.superseded_by}")
    if record.private:
        notes.append("private")
    if record.deleted_at:
        notes.append("deleted")
    line = "  ".join(bits)
    return f"{line}  ({'; '.join(notes)})" if notes else line


def render_find(result: FindResult) -> str:
    count = len(result.records)
    if count == 0:
        return "no matching records in the local index (lexical search)"
    head = f"{count} result{'s' if count != 1 else ''} from the local index (lexical, no semantic scores)"
    if result.partial:
        head += "\npartial match: no record has all the words; these have some of them"
    elif result.complete < count:
        first = "the first has" if result.complete == 1 else f"the first {result.complete} have"
        head += f"\n{first} all the words; the rest have some of them"
    if result.stopwords:
        head += f"\n(common words left out: {', '.join(result.stopwords)})"
    if result.dropped_terms:
        head += f"\n(only the first {len(result.terms)} distinct words were used)"
    lines = [head]
    for record in result.records:
        lines.append(render_record_line(record))
        lines.extend("    " + line for line in (record.text or "(text not known yet; run enrich)").splitlines() or [""])
    if result.more:
        lines.append(f"more records match: only the first {count} are shown (raise --limit)")
    return "\n".join(lines)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "no imported or pulled records yet"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"newest imported or pulled record is {seconds / size:.1f} {unit} old"
    return f"newest imported or pulled record is {seconds:.0f} s old"


def render_status(status: IndexStatus) -> str:
    q = status.queue
    h = status.hidden
    return "\n".join([
        f"records      {status.records} (full text {status.full_text}, partial {status.partial_text})",
        f"hidden       superseded {h['superseded']}, private {h['private']}, deleted {h['deleted']}, "
        f"expired {h['expired']}",
        f"lag          {_age(status.lag_seconds)}",
        f"duplicates   {status.duplicate_texts} texts stored under more than one id "
        f"({status.duplicate_records} records)",
        f"queue        pending {q['pending']}, synced {q['synced']}, duplicate {q['duplicate']}, failed {q['failed']}",
        f"sessions     {status.import_files} session files imported",
        f"schema       v{status.schema_version}",
        *([f"read-only    {status.read_only_reason}"] if status.read_only_reason else []),
    ])


def render_queue(report: QueueReport) -> str:
    c = report.counts
    lines = [f"pending {c['pending']} · synced {c['synced']} · duplicate {c['duplicate']} · failed {c['failed']}"]
    for record in report.records:
        line = render_record_line(record)
        if record.state == "failed":
            line += f"  → once fixed: python3 -m qmem.local queue retry {record.id}"
        lines.append(line)
    if report.more:
        lines.append(f"more records in the outbox: only the first {len(report.records)} are shown "
                     f"(raise --limit, or --all)")
    return "\n".join(lines)


def render_retried(records: Sequence[Record]) -> str:
    if not records:
        return "no failed records to retry"
    count = len(records)
    return (f"{count} failed record{'s' if count != 1 else ''} back to pending: "
            f"{', '.join(record.id for record in records)}\n"
            f"`python3 -m qmem.local flush` sends {'them' if count != 1 else 'it'} (scanned for credentials again "
            f"first)")


def render_forget(report: ForgetReport) -> str:
    """One line per record (what forgetting it means for a shared copy), then the sum."""
    lines = []
    for record in report.records:
        _, sentence = report.meaning(record)
        lines.append(f"{'would forget' if report.dry_run else 'forgot'} {record.id} [{record.kind or '?'}] "
                     f"{record.project_id or '?'}: {sentence}")
    if report.dry_run:
        lines.append("dry run: nothing was changed (run it again without --dry-run)")
    if report.shared_copies:
        count = report.shared_copies
        lines.append(f"{count} record{'s are' if count != 1 else ' is'} (or may be) still shared on the Memory "
                     f"Gateway: ask its administrator to delete {'them' if count != 1 else 'it'} there")
    return "\n".join(lines)


_ROOT_NAMES = {"pi": "pi sessions", "prime": "Prime sessions", "pi-session-dir": "PI_CODING_AGENT_SESSION_DIR"}


def render_import(report: ImportReport, looked: Sequence[dict[str, Any]] = ()) -> str:
    line = (f"{report.files} session files: {report.read} read ({report.reread} from the start), "
            f"{report.unchanged} unchanged; records added {report.records_added}, updated "
            f"{report.records_updated}; queued writes restored {report.queued_restored}"
            + (f" ({report.queued_refused} kept as failed, never sent: `python3 -m qmem.local queue` says why)"
               if report.queued_refused else ""))
    skipped = {"malformed lines": report.malformed_lines, "unknown entries": report.unknown_entries,
               "non-UTF-8 lines": report.non_utf8_lines, "incomplete last lines": report.incomplete_last_lines,
               "unreadable files": report.unreadable}
    noted = [f"{name} {count}" for name, count in skipped.items() if count]
    text = line + (f"\nskipped: {', '.join(noted)}" if noted else "")
    if looked:
        where = ", ".join(f"{_ROOT_NAMES.get(root['label'], root['label'])} "
                          f"({'found' if root['found'] else 'no directory'})" for root in looked)
        text += f"\nlooked in: {where} (`python3 -m qmem.local doctor` shows the directories)"
    return text



def _recall_outcome(entry: dict[str, Any]) -> str:
    outcome = str(entry.get("outcome"))
    return f"{outcome} ({entry['category']})" if entry.get("category") else outcome


def render_recall_log(entries: Sequence[dict[str, Any]], file_name: str) -> str:
    """The recall log, newest first: one line per recall, then its record ids (ids and numbers only)."""
    if not entries:
        return f"no automatic recall recorded yet ({file_name} in the data directory)"
    lines = []
    for entry in entries:
        lanes = entry.get("lanes") if isinstance(entry.get("lanes"), dict) else {}
        lane_text = ", ".join(f"{lane} {info.get('outcome')} ({info.get('hits')} eligible)"
                              for lane, info in lanes.items() if isinstance(info, dict))
        lines.append(f"{entry.get('time')}  {entry.get('host') or '?'}  {_recall_outcome(entry)}  "
                     f"waited {entry.get('wait_ms')} ms, recall took {entry.get('total_ms')} ms, "
                     f"{entry.get('chars')} chars  [{lane_text}]")
        ids = [item for item in entry.get("ids") or [] if isinstance(item, dict)]
        if ids:
            lines.append("    " + ", ".join(f"{item.get('id')} ({item.get('lane')} {item.get('score')})"
                                            for item in ids))
    return "\n".join(lines)
