"""``python -m qmem.local``: the offline CLI over the local index and the outbox.

Subcommands: ``status``, ``import``, ``find``, ``queue``, ``store`` work with no
server at all; ``flush``, ``enrich``, ``pull`` and ``breaker`` talk to the Memory
Gateway.  Every subcommand takes ``--json`` (one JSON document on stdout).  Exit 0
on success, 1 on an error (one line on stderr, no traceback), 2 on bad usage.

:func:`run` returns an :class:`~qmem.cli.Outcome` instead of printing, so that the
hosts' ``/qmem:local`` command shares this code without sharing a stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from .cli import EXIT_ERROR, EXIT_USAGE, CommandParser, HelpRequested, Outcome, Progress, UsageError, emit, to_json_text
from .errors import QmemError
from .localindex import FindResult, IndexStatus, Record
from .outbox import QueueReport
from .records import KINDS, validate_new_record
from .runtime import Runtime
from .sessions import ImportReport, SessionImporter, session_roots
from .store import guard_secrets, qmem_store
from .sync import enrich, flush, pull

__all__ = ["run", "main", "build_parser"]

PROG = "qmem-local"


def build_parser() -> CommandParser:
    common = CommandParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    parser = CommandParser(prog=PROG, description="qmem's offline memory: a local SQLite index and outbox.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)
    sub.required = True

    sub.add_parser("status", parents=[common], help="records, coverage, lag, duplicates, queue, schema")

    imp = sub.add_parser("import", parents=[common], help="learn records from pi and Prime session files")
    imp.add_argument("--host", choices=("pi", "prime"), help="only this host's sessions")

    find = sub.add_parser("find", parents=[common], help="search the local index (lexical)")
    find.add_argument("query", nargs="+", help="words to look for (taken literally)")
    find.add_argument("--project", help="only this project_id")
    find.add_argument("--kind", choices=KINDS)
    find.add_argument("--limit", type=int, default=10, help="at most this many results (default 10)")
    find.add_argument("--superseded", action="store_true", help="include superseded records")
    find.add_argument("--private", action="store_true", help="include private records")
    find.add_argument("--deleted", action="store_true", help="include deleted and expired records")

    sub.add_parser("queue", parents=[common], help="the outbox: pending, synced, duplicate, failed")

    store = sub.add_parser("store", parents=[common], help="save a record (queued when the gateway is away)")
    store.add_argument("--project", required=True, help="project_id (required)")
    store.add_argument("--text", required=True, help="the memory text; '-' reads it from stdin")
    store.add_argument("--kind", choices=KINDS, default="fact")
    store.add_argument("--scope")
    store.add_argument("--agent", help="agent_id")
    store.add_argument("--source")
    store.add_argument("--expires-at", help="RFC 3339 time, e.g. 2027-01-31T00:00:00Z")
    store.add_argument("--supersedes", help="id of the record this one corrects")
    store.add_argument("--reason", help="why it corrects it (with --supersedes)")
    store.add_argument("--queue-only", action="store_true", help="only queue it locally; do not contact the gateway")

    sub.add_parser("flush", parents=[common], help="send queued records to the gateway now")
    enrich = sub.add_parser("enrich", parents=[common], help="complete partial records from the gateway")
    enrich.add_argument("--all", action="store_true", help="refresh every record, not only partial ones")
    sub.add_parser("pull", parents=[common], help="incremental pull from the gateway's export")
    breaker = sub.add_parser("breaker", parents=[common], help="show or reset the gateway circuit breaker")
    breaker.add_argument("--reset", action="store_true", help="close the breaker")
    # `breaker reset` reads like the host command `/qmem:local breaker reset`.
    breaker.add_argument("reset_word", nargs="?", choices=("reset",), help=argparse.SUPPRESS)
    return parser


# --- rendering (pure) --------------------------------------------------------------------

def _short_time(value: str | None) -> str:
    return value[:10] if value else "?"


def _marker(record: Record) -> str:
    return {"pending": "⏳", "failed": "✗", "duplicate": "≈"}.get(record.state, "·")


def render_record_line(record: Record) -> str:
    bits = [f"{_marker(record)} {record.id}", f"[{record.kind or '?'}]", record.project_id or "?",
            _short_time(record.created_at)]
    notes = []
    if record.state == "pending":
        notes.append("queued locally, not yet shared")
    elif record.state == "failed":
        notes.append(f"not sent: {record.reason or 'refused by the gateway'}")
    elif record.state == "duplicate":
        notes.append(f"duplicate of {record.duplicate_of}")
    if record.coverage == "partial":
        notes.append("excerpt")
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
    if result.dropped_terms:
        head += f"\n(only the first {len(result.terms)} distinct words were used)"
    lines = [head]
    for record in result.records:
        lines.append(render_record_line(record))
        lines.extend("    " + line for line in (record.text or "(text not known yet; run enrich)").splitlines() or [""])
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
    ])


def render_queue(report: QueueReport) -> str:
    c = report.counts
    lines = [f"pending {c['pending']} · synced {c['synced']} · duplicate {c['duplicate']} · failed {c['failed']}"]
    lines += [render_record_line(record) for record in report.records]
    return "\n".join(lines)


def render_import(report: ImportReport) -> str:
    line = (f"{report.files} session files: {report.read} read ({report.reread} from the start), "
            f"{report.unchanged} unchanged; records added {report.records_added}, updated "
            f"{report.records_updated}; queued writes restored {report.queued_restored}")
    skipped = {"malformed lines": report.malformed_lines, "unknown entries": report.unknown_entries,
               "non-UTF-8 lines": report.non_utf8_lines, "incomplete last lines": report.incomplete_last_lines,
               "unreadable files": report.unreadable}
    noted = [f"{name} {count}" for name, count in skipped.items() if count]
    return line + (f"\nskipped: {', '.join(noted)}" if noted else "")


# --- commands ----------------------------------------------------------------------------

def _cmd_status(rt: Runtime, args: Any) -> tuple[Any, str]:
    status = rt.index.status()
    return status.to_json(), render_status(status)


def _cmd_import(rt: Runtime, args: Any) -> tuple[Any, str]:
    roots = [root for root in session_roots(rt.env) if args.host in (None, root.host)]
    progress = Progress("importing session files")
    try:
        report = SessionImporter(rt.index).run(roots, progress=progress)
    finally:
        progress.finish()
    return report.to_json(), render_import(report)


def _cmd_find(rt: Runtime, args: Any) -> tuple[Any, str]:
    result = rt.index.find(" ".join(args.query), project=args.project, kind=args.kind, limit=args.limit,
                            superseded=args.superseded, private=args.private, deleted=args.deleted)
    return result.to_json(), render_find(result)


def _cmd_queue(rt: Runtime, args: Any) -> tuple[Any, str]:
    report = rt.outbox.report()
    return report.to_json(), render_queue(report)


def _read_text_argument(value: str) -> str:
    if value != "-":
        return value
    data = sys.stdin.buffer.read(4 * 1024 * 1024 + 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError("the text on stdin is not UTF-8") from None


def _cmd_store(rt: Runtime, args: Any) -> tuple[Any, str]:
    arguments = {
        "text": _read_text_argument(args.text), "project_id": args.project, "kind": args.kind,
        "scope": args.scope, "agent_id": args.agent, "source": args.source, "expires_at": args.expires_at,
        "supersedes_id": args.supersedes, "supersede_reason": args.reason,
    }
    if args.queue_only:
        record = validate_new_record(arguments)
        guard_secrets(record)
        pending = rt.outbox.enqueue(record, tool="qmem-local store")
        text = (f"⏳ queued locally as {pending.id} — not yet shared; it is findable now and will be sent "
                f"by `python -m qmem.local flush` when the gateway is reachable")
        return {"queued": True, "shared": False, "record": pending.to_json()}, text
    # After a successful store, send what was queued before (the same trigger as in a host).
    result = qmem_store(rt, arguments, flush_soon=lambda: _flush_quietly(rt))
    return result.details, result.text


def _flush_quietly(rt: Runtime) -> None:
    try:
        if rt.outbox.pending_count():
            flush(rt)
    except QmemError:
        pass  # the store itself succeeded; the queue waits for the next flush


def _cmd_flush(rt: Runtime, args: Any) -> tuple[Any, str]:
    progress = Progress("sending queued records")
    try:
        report = flush(rt, progress=progress)
    finally:
        progress.finish()
    text = (f"sent {report.sent}: synced {report.synced}, duplicate {report.duplicate}, failed {report.failed}; "
            f"still pending {rt.outbox.pending_count()}")
    if report.stopped:
        text += f"\nstopped: {report.stopped}"
    return report.to_json(), text


def _cmd_enrich(rt: Runtime, args: Any) -> tuple[Any, str]:
    report = enrich(rt, everything=args.all)
    text = f"checked {report.checked}, updated {report.updated}, not on the gateway {report.missing}"
    return report.to_json(), text + (f"\nstopped: {report.stopped}" if report.stopped else "")


def _cmd_pull(rt: Runtime, args: Any) -> tuple[Any, str]:
    report = pull(rt)
    text = (f"{report.pages} page(s), {report.items} items: added {report.added}, updated {report.updated}, "
            f"tombstones {report.tombstones}")
    return report.to_json(), text + (f"\nstopped: {report.stopped}" if report.stopped else "")


def _cmd_breaker(rt: Runtime, args: Any) -> tuple[Any, str]:
    if not rt.config.url:
        raise QmemError('no Memory Gateway is configured (set "url" in the config file)', category="configuration")
    breaker = rt.breaker_for(rt.config.url)
    if args.reset or args.reset_word:
        breaker.reset()
    snap = breaker.snapshot()
    if snap["state"] == "open":
        text = f"open: calls fail fast for {snap['retry_in_ms'] / 1000:.0f} s more"
    elif snap["state"] == "half-open":
        text = "half-open: the next call probes the gateway"
    else:
        text = "closed: calls go to the gateway"
    text += f" (consecutive failures {snap['consecutive_failures']}, opens {snap['consecutive_opens']})"
    if args.reset or args.reset_word:
        text = "reset — " + text
    return snap, text


_COMMANDS = {
    "status": _cmd_status,
    "import": _cmd_import,
    "find": _cmd_find,
    "queue": _cmd_queue,
    "store": _cmd_store,
    "flush": _cmd_flush,
    "enrich": _cmd_enrich,
    "pull": _cmd_pull,
    "breaker": _cmd_breaker,
}


def run(argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> Outcome:
    """Run one command line and return what it produced; never raises for user errors."""
    env = os.environ if env is None else env
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv))
    except HelpRequested as help_text:
        return Outcome(stdout=str(help_text))
    except UsageError as exc:
        return Outcome(code=EXIT_USAGE, error=str(exc))
    rt: Runtime | None = None
    try:
        rt = Runtime(env)
        document, text = _COMMANDS[args.command](rt, args)
    except UsageError as exc:
        return Outcome(code=EXIT_USAGE, error=str(exc))
    except QmemError as exc:
        return Outcome(code=EXIT_ERROR, error=exc.message,
                       stdout=to_json_text({"error": {"category": exc.category, "message": exc.message}})
                       if args.json else "")
    finally:
        if rt is not None:
            rt.close()
    return Outcome(stdout=to_json_text(document) if args.json else text)


def main(argv: Sequence[str] | None = None) -> int:
    return emit(run(sys.argv[1:] if argv is None else argv), PROG)


if __name__ == "__main__":
    sys.exit(main())
