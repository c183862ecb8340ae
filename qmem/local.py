"""``python3 -m qmem.local``: the offline CLI over the local index and the outbox, and the setup commands.

Subcommands: ``status``, ``import``, ``find``, ``queue``, ``store`` work with no server at
all; ``flush``, ``enrich``, ``pull`` and ``breaker`` talk to the Memory Gateway; ``doctor``
checks the whole setup; ``install`` / ``uninstall`` put qmem into (or take it out of) pi,
Prime or Hermes; ``mcp-config`` prints a ready MCP server entry.  Every subcommand takes
``--json`` (one JSON document on stdout, an error included).

Exit status: 0 success; 1 an error (one line on stderr, no traceback), also when ``flush``,
``pull`` or ``enrich`` stopped with work left and when ``doctor`` found a problem (their
report is still printed); 2 bad usage (an unknown option, ``--limit 0``, a query with no
words).  ``--version`` prints the version.

:func:`run` returns an :class:`~qmem.cli.Outcome` instead of printing, so that the hosts'
``/qmem:local`` command shares this code without sharing a stdout.
"""

if __name__ == "__main__":  # `python3 -m qmem.local`: nothing more from the working directory (see qmem/entrypath.py)
    from .entrypath import drop_working_directory

    drop_working_directory()

from .pythonversion import require_supported_python  # noqa: E402

require_supported_python()

import argparse  # noqa: E402  (after the version check: one line on an old Python, no traceback)
import os  # noqa: E402
import sys  # noqa: E402
from collections.abc import Mapping, Sequence  # noqa: E402
from typing import Any  # noqa: E402

from . import __version__  # noqa: E402
from .cli import (  # noqa: E402
    EXIT_ERROR, EXIT_USAGE, CommandParser, HelpRequested, Outcome, Progress, UsageError, emit, error_document,
    error_outcome, examples, to_json_text, undecodable_argument, wants_json,
)
from .errors import InputError, QmemError  # noqa: E402
from .lexical import query_terms  # noqa: E402
from .localindex import MAX_FIND_LIMIT, FindResult, IndexStatus, Record  # noqa: E402
from .outbox import QUEUE_LIMIT, QueueReport  # noqa: E402
from .records import KINDS  # noqa: E402
from .runtime import Runtime  # noqa: E402
from .sessions import ImportReport, SessionImporter, session_roots  # noqa: E402
from .store import QUEUED_NOT_SHARED, qmem_store  # noqa: E402
from .sync import enrich, flush, pull  # noqa: E402
from .transport import set_wait_observer  # noqa: E402
from .waitline import WaitLine  # noqa: E402

__all__ = ["run", "main", "build_parser", "STORE_FLUSH_BUDGET_S"]

PROG = "qmem-local"
HOSTS = ("pi", "prime", "hermes")
MCP_CLIENTS = ("claude", "codex", "hermes", "prime", "json")

#: After a successful ``store``, the CLI sends older queued records for at most this long.
STORE_FLUSH_BUDGET_S = 2.0


# --- the command line ----------------------------------------------------------------------

def _limit(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_FIND_LIMIT}") from None
    if not 1 <= number <= MAX_FIND_LIMIT:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_FIND_LIMIT}")
    return number


def build_parser() -> CommandParser:
    common = CommandParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print one JSON document on stdout (errors included)")
    parser = CommandParser(
        prog=PROG, description="qmem's offline memory (a local SQLite index and outbox) and its setup.",
        epilog=examples("python3 -m qmem.local doctor", "python3 -m qmem.local install pi",
                        "python3 -m qmem.local find deploy --project shop",
                        "python3 -m qmem.local COMMAND --help    # each command's options and examples"))
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)
    sub.required = True

    def command(name: str, summary: str, description: str, *lines: str) -> CommandParser:
        return sub.add_parser(name, parents=[common], help=summary, description=description,
                              epilog=examples(*lines))

    command("status", "records, coverage, lag, duplicates, queue, schema",
            "What the local index holds: records (full text or excerpts), hidden ones, how old the newest "
            "imported or pulled record is, duplicates, the outbox and the schema version.",
            "python3 -m qmem.local status", "python3 -m qmem.local status --json")

    imp = command("import", "learn records from pi and Prime session files",
                  "Read pi and Prime session files and learn the qmem records their tool calls saw; a store "
                  "that was only queued when the session ran goes back into the outbox. Incremental: an "
                  "unchanged file costs one stat. `doctor` shows the session directories it reads.",
                  "python3 -m qmem.local import", "python3 -m qmem.local import --host prime")
    imp.add_argument("--host", choices=("pi", "prime"), help="only this host's sessions")

    find = command("find", "search the local index (lexical)",
                   "Search the local index word by word: each word matches by its stem (visited finds visit), "
                   "accents ignored, never as search syntax; common words (what, the, did…) are left out unless "
                   "the query has nothing else. Records with all the words come first, then the list is filled "
                   "with records that have some of them. Superseded, private, deleted and expired records are "
                   "hidden unless asked for. No semantic scores: this is the offline search.",
                   "python3 -m qmem.local find blue-green deploy",
                   "python3 -m qmem.local find postgres --project shop --kind decision --limit 20",
                   "python3 -m qmem.local find postgres --superseded    # with the corrections' lineage")
    find.add_argument("query", nargs="+", help="words to look for (matched by their stem; no operators, no quotes)")
    find.add_argument("--project", help="only records of this project_id")
    find.add_argument("--kind", choices=KINDS, help="only records of this kind")
    find.add_argument("--limit", type=_limit, default=10,
                      help=f"at most this many results, 1 to {MAX_FIND_LIMIT} (default 10)")
    find.add_argument("--superseded", action="store_true",
                      help="include superseded records; each line says which record supersedes it and which "
                           "record a correction supersedes")
    find.add_argument("--private", action="store_true",
                      help="include records the gateway marks private (hidden by default; this is the "
                           "record's private flag, not its scope)")
    find.add_argument("--deleted", action="store_true", help="include deleted and expired records")

    queue = command("queue", "the outbox: pending, synced, duplicate, failed; retry failed records",
                    "The outbox: records queued here (⏳ pending), sent (synced), refused as duplicates (≈) or "
                    "failed (✗, with the reason), failed and pending first, newest first, at most --limit of "
                    "them. Queued records live only in the local index until sent. `queue retry` puts failed "
                    "records back to pending once you fixed the cause; the next flush scans them for "
                    "credentials again and sends them.",
                    "python3 -m qmem.local queue", "python3 -m qmem.local queue --all --json",
                    "python3 -m qmem.local queue retry ID    # or: queue retry --all")
    queue.add_argument("action", nargs="?", choices=("retry",), help="'retry' puts failed records back to pending")
    queue.add_argument("ids", nargs="*", metavar="ID", help="with retry: the failed records to retry")
    queue.add_argument("--limit", type=_limit,
                       help=f"list at most this many records, 1 to {MAX_FIND_LIMIT} (default {QUEUE_LIMIT})")
    queue.add_argument("--all", action="store_true",
                       help="list every record; with retry: retry every failed record")

    store = command("store", "save a record (queued when the gateway is away)",
                    "Save one memory record. With a gateway it is sent at once, and then older queued records "
                    f"are sent for up to {STORE_FLUSH_BUDGET_S:g} s (the rest is left to `flush`); without one, "
                    "or with --queue-only, it is queued in the local outbox and findable at once.",
                    'python3 -m qmem.local store --project shop --text "Deploys use blue-green switching"',
                    "git log -1 --format=%B | python3 -m qmem.local store --project shop --kind episode --text -",
                    'python3 -m qmem.local store --project shop --supersedes ID --reason "moved to v17" '
                    '--text "The database is Postgres 17"')
    store.add_argument("--project", required=True, help="the project_id the record belongs to (required)")
    store.add_argument("--text", required=True,
                       help="the memory text; '-' reads it from stdin (one final newline is dropped)")
    store.add_argument("--kind", choices=KINDS, default="fact", help="the kind of record (default fact)")
    store.add_argument("--scope",
                       help="a free label for the record's audience (e.g. project, team, personal). It is only a "
                            "label: a scope named 'private' does not make the record private; the gateway "
                            "decides privacy, and find hides private records unless --private")
    store.add_argument("--agent", help="agent_id: who is saving it (provenance only)")
    store.add_argument("--source", help="where it comes from (a file, a PR, a conversation)")
    store.add_argument("--expires-at", help="RFC 3339 time after which it no longer holds, e.g. 2027-01-31T00:00:00Z")
    store.add_argument("--supersedes", help="id of the record this one corrects (records are immutable)")
    store.add_argument("--reason", help="why it corrects that record (with --supersedes)")
    store.add_argument("--queue-only", action="store_true", help="only queue it locally; do not contact the gateway")

    command("flush", "send queued records to the gateway now",
            "Send the outbox to the Memory Gateway. Exit 1 when it stops with records left (gateway "
            "unreachable, breaker open, API key refused); the report says how many.",
            "python3 -m qmem.local flush", "python3 -m qmem.local flush --json")
    enrich_cmd = command("enrich", "complete partial records from the gateway",
                         "Fetch the full text of records known only as search excerpts. Exit 1 when it stops "
                         "before the end.", "python3 -m qmem.local enrich", "python3 -m qmem.local enrich --all")
    enrich_cmd.add_argument("--all", action="store_true", help="refresh every record, not only partial ones")
    command("pull", "incremental pull from the gateway's export",
            "Read the gateway's export from where the last pull stopped (deleted records become tombstones, "
            "see find --deleted). Exit 1 when it stops before the end.",
            "python3 -m qmem.local pull", "python3 -m qmem.local pull --json")
    breaker = command("breaker", "show or reset the gateway circuit breaker",
                      "Show the Memory Gateway's circuit breaker (shared by every qmem process of this user): "
                      "closed, open (calls fail fast, with the time left) or half-open. `breaker reset` closes it.",
                      "python3 -m qmem.local breaker", "python3 -m qmem.local breaker reset")
    breaker.add_argument("action", nargs="?", choices=("reset",), help="'reset' closes the breaker")
    # The older spelling, kept working: `breaker --reset`.
    breaker.add_argument("--reset", action="store_true", help=argparse.SUPPRESS)

    command("doctor", "check the whole setup: config, keys, services, index, hosts",
            "Is my setup right? Shows the Python, the config file in effect and where each setting comes "
            "from, the data paths, which credentials are set (never their values), a live probe of the "
            "Memory Gateway and (when configured) Qdrant and the embeddings service, the breakers, the local "
            "index and which hosts have qmem installed. It changes nothing: the probes go around the shared "
            "circuit breakers, which are shown as they are. Exit 1 when anything configured is unhealthy.",
            "python3 -m qmem.local doctor", "python3 -m qmem.local doctor --json")

    for name, verb in (("install", "install"), ("uninstall", "remove")):
        summary = (f"{verb} qmem in pi, Prime or Hermes" if name == "install"
                   else "remove what install put into pi, Prime or Hermes")
        description = (
            "Link (default) or copy this qmem folder into the host's extensions directory as `qmem` "
            "(~/.pi/agent/extensions, ~/.prime/agent/extensions, ~/.hermes/plugins; PI_CODING_AGENT_DIR, "
            "PRIME_AGENT_CODING_AGENT_DIR and HERMES_HOME move them), creating the directory. For Hermes it "
            "also enables the plugin in config.yaml, or prints the command that does. Running it again "
            "changes nothing; an existing folder or link that is not qmem is never replaced. "
            "`install --copy` again updates a copy."
            if name == "install" else
            "Remove the link or the copy that install made (never a folder with files qmem does not know); "
            "for Hermes also take qmem out of plugins.enabled. Your memories stay in the data directory "
            "(records still queued live only there).")
        cmd = command(name, summary, description, f"python3 -m qmem.local {name} pi",
                      f"python3 -m qmem.local {name} hermes" + (" --copy" if name == "install" else ""))
        cmd.add_argument("host", choices=HOSTS, help="the host: pi, prime or hermes")
        if name == "install":
            cmd.add_argument("--copy", action="store_true",
                             help="copy the folder instead of linking it (a copy does not follow this checkout; "
                                  "run install --copy again to update it)")

    mcp = command("mcp-config", "print a ready MCP server entry for a client",
                  "Print the server entry that runs qmem's MCP server with this interpreter (its absolute "
                  "path), in a form that imports nothing from the client's working directory, and, unless qmem "
                  "is installed in it, the PYTHONPATH that finds this qmem. The credential variables it needs "
                  "are named as placeholders or references: their values are never printed.",
                  "python3 -m qmem.local mcp-config claude", "python3 -m qmem.local mcp-config codex >> "
                  "~/.codex/config.toml", "python3 -m qmem.local mcp-config json")
    mcp.add_argument("client", choices=MCP_CLIENTS,
                     help="claude (a `claude mcp add` command), codex (TOML), hermes (YAML), prime "
                          "(a `prime-agent mcp add` command) or json (an mcpServers document)")
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
        notes.append(QUEUED_NOT_SHARED)
    elif record.state == "failed":
        notes.append(f"not sent: {record.reason or 'refused by the gateway'}")
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


_ROOT_NAMES = {"pi": "pi sessions", "prime": "Prime sessions", "pi-session-dir": "PI_CODING_AGENT_SESSION_DIR"}


def render_import(report: ImportReport, looked: Sequence[dict[str, Any]] = ()) -> str:
    line = (f"{report.files} session files: {report.read} read ({report.reread} from the start), "
            f"{report.unchanged} unchanged; records added {report.records_added}, updated "
            f"{report.records_updated}; queued writes restored {report.queued_restored}")
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


# --- commands ----------------------------------------------------------------------------

class Unfinished(QmemError):
    """A command that ran and reported, but stopped with work left or found problems: exit 1.

    ``document`` and ``text`` are its report, printed as for a success.
    """

    category = "incomplete"

    def __init__(self, message: str, document: dict[str, Any], text: str, *, category: str | None = None) -> None:
        super().__init__(message, category=category)
        self.document = document
        self.text = text


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
    from .doctor import session_root_found

    looked = [{"label": root.label, "host": root.host, "found": session_root_found(root)} for root in roots]
    return {**report.to_json(), "looked_in": looked}, render_import(report, looked)


def _cmd_find(rt: Runtime, args: Any) -> tuple[Any, str]:
    query = " ".join(args.query)
    if not query_terms(query).terms:
        raise UsageError("the query has no words to search for (a word needs a letter or a digit)")
    result = rt.index.find(query, project=args.project, kind=args.kind, limit=args.limit,
                           superseded=args.superseded, private=args.private, deleted=args.deleted)
    return result.to_json(), render_find(result)


def _cmd_queue(rt: Runtime, args: Any) -> tuple[Any, str]:
    if args.action == "retry":
        if args.limit is not None or bool(args.ids) == args.all:
            raise UsageError("queue retry takes the ids of failed records, or --all")
        retried = rt.outbox.retry(None if args.all else args.ids)
        return {"retried": [record.id for record in retried], "count": len(retried)}, render_retried(retried)
    if args.ids:
        raise UsageError("record ids go with retry: queue retry ID…")
    if args.all and args.limit is not None:
        raise UsageError("--limit and --all do not go together")
    report = rt.outbox.report(limit=None if args.all else args.limit or QUEUE_LIMIT)
    return report.to_json(), render_queue(report)


def _read_text_argument(value: str) -> str:
    """``--text``: the value itself, or stdin for ``-`` without its one final newline (as ``$(…)`` does)."""
    if value != "-":
        return value
    data = sys.stdin.buffer.read(4 * 1024 * 1024 + 1)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("the text on stdin is not UTF-8") from None
    if text.endswith("\r\n"):
        return text[:-2]
    return text[:-1] if text.endswith("\n") else text


def _queued_note(count: int) -> str:
    return (f"{count} older queued record{'s are' if count != 1 else ' is'} still waiting: "
            f"`python3 -m qmem.local flush` sends {'them' if count != 1 else 'it'}")


def _cmd_store(rt: Runtime, args: Any) -> tuple[Any, str]:
    arguments = {
        "text": _read_text_argument(args.text), "project_id": args.project, "kind": args.kind,
        "scope": args.scope, "agent_id": args.agent, "source": args.source, "expires_at": args.expires_at,
        "supersedes_id": args.supersedes, "supersede_reason": args.reason,
    }
    if args.queue_only:
        result = qmem_store(rt, arguments, queue_only=True)
        return dict(result.details), result.text
    # After a successful store, send what was queued before, for a bounded time: a long backlog
    # is flush's job (hosts flush in the background), not something a store waits for.
    sent: dict[str, Any] = {}
    result = qmem_store(rt, arguments, flush_soon=lambda: sent.update(_flush_briefly(rt)))
    details, text = dict(result.details), result.text
    if sent:
        details["backlog"] = sent
        if sent.get("still_queued"):
            text += "\n" + _queued_note(sent["still_queued"])
    return details, text


def _flush_briefly(rt: Runtime) -> dict[str, Any]:
    """Send older queued records for at most :data:`STORE_FLUSH_BUDGET_S`; what happened, in numbers."""
    try:
        if not rt.outbox.pending_count():
            return {}
        report = flush(rt, budget_s=STORE_FLUSH_BUDGET_S)
        return {"sent": report.sent, "still_queued": rt.outbox.pending_count()}
    except QmemError:
        return {}  # the store itself succeeded; the queue waits for the next flush


def _unfinished(document: dict[str, Any], text: str, stopped: str | None, summary: str) -> Unfinished:
    message = f"{summary}: {stopped}" if stopped else summary
    return Unfinished(message, document, text)


def _cmd_flush(rt: Runtime, args: Any) -> tuple[Any, str]:
    progress = Progress("sending queued records")
    try:
        report = flush(rt, progress=progress)
    finally:
        progress.finish()
    remaining = report.remaining
    text = (f"sent {report.sent}: synced {report.synced}, duplicate {report.duplicate}, failed {report.failed}; "
            f"still pending {remaining}")
    if report.elsewhere:
        text += f"; {report.elsewhere} being sent by another qmem process"
    if report.stopped:
        text += f"\nstopped: {report.stopped}"
    causes = [report.stopped] if report.stopped else []
    if report.failed:
        causes.append(_failed_note(report.failed))
        text += f"\n{causes[-1]}"
    document = report.to_json()
    if not report.complete:
        raise _unfinished(document, text, "; ".join(causes) or None,
                          f"flush stopped with {remaining} record{'s' if remaining != 1 else ''} still queued")
    if report.failed:
        raise Unfinished(f"flush: {causes[-1]}", document, text)
    return document, text


def _failed_note(count: int) -> str:
    return (f"{count} record{'s' if count != 1 else ''} failed (`python3 -m qmem.local queue` shows why; "
            f"`queue retry` sends {'them' if count != 1 else 'it'} again once fixed)")


def _cmd_enrich(rt: Runtime, args: Any) -> tuple[Any, str]:
    report = enrich(rt, everything=args.all)
    text = f"checked {report.checked}, updated {report.updated}, not on the gateway {report.missing}"
    text += f"\nstopped: {report.stopped}" if report.stopped else ""
    if not report.complete:
        raise _unfinished(report.to_json(), text, report.stopped, "enrich stopped before the end")
    return report.to_json(), text


def _cmd_pull(rt: Runtime, args: Any) -> tuple[Any, str]:
    report = pull(rt)
    text = (f"{report.pages} page(s), {report.items} items: added {report.added}, updated {report.updated}, "
            f"tombstones {report.tombstones}")
    text += f"\nstopped: {report.stopped}" if report.stopped else ""
    if not report.complete:
        raise _unfinished(report.to_json(), text, report.stopped, "pull stopped before the end")
    return report.to_json(), text


def _cmd_breaker(rt: Runtime, args: Any) -> tuple[Any, str]:
    if not rt.config.url:
        raise QmemError('no Memory Gateway is configured (set "url" in the config file)', category="configuration")
    breaker = rt.breaker_for(rt.config.url)
    reset = args.action == "reset" or args.reset
    if reset:
        breaker.reset()
    snap = breaker.snapshot()
    if snap["state"] == "open":
        text = f"open: calls fail fast for {snap['retry_in_ms'] / 1000:.0f} s more"
    elif snap["state"] == "half-open":
        text = "half-open: the next call probes the gateway"
    else:
        text = "closed: calls go to the gateway"
    text += f" (consecutive failures {snap['consecutive_failures']}, opens {snap['consecutive_opens']})"
    if reset:
        text = "reset — " + text
    return snap, text


# -- setup commands: they need no valid configuration, so they run without a Runtime, and
#    their modules are imported only when used (they are not on any host's hot path).

def _cmd_doctor(env: Mapping[str, str], args: Any) -> tuple[Any, str]:
    from . import doctor

    diagnosis = doctor.diagnose(env)
    text = doctor.render(diagnosis)
    if diagnosis.problems:
        count = len(diagnosis.problems)
        raise Unfinished(f"doctor found {count} problem{'s' if count != 1 else ''}: {'; '.join(diagnosis.problems)}",
                         diagnosis.document, text, category="doctor")
    return diagnosis.document, text


def _cmd_install(env: Mapping[str, str], args: Any) -> tuple[Any, str]:
    from . import hostsetup

    result = hostsetup.install(args.host, env, copy=args.copy)
    return result.to_json(), result.describe()


def _cmd_uninstall(env: Mapping[str, str], args: Any) -> tuple[Any, str]:
    from . import hostsetup

    result = hostsetup.uninstall(args.host, env)
    return result.to_json(), result.describe()


def _cmd_mcp_config(env: Mapping[str, str], args: Any) -> tuple[Any, str]:
    from . import mcpconfig

    entry = mcpconfig.server_entry(env)
    text = mcpconfig.render(args.client, entry)
    return {"client": args.client, **entry.to_json(), "text": text}, text


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

_SETUP_COMMANDS = {
    "doctor": _cmd_doctor,
    "install": _cmd_install,
    "uninstall": _cmd_uninstall,
    "mcp-config": _cmd_mcp_config,
}


def run(argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> Outcome:
    """Run one command line and return what it produced; never raises for user errors."""
    env = os.environ if env is None else env
    argv = list(argv)
    as_json = wants_json(argv)
    bad = undecodable_argument(argv)
    if bad is not None:
        return error_outcome(EXIT_ERROR, "input", bad, as_json=as_json)
    try:
        args = build_parser().parse_args(argv)
    except HelpRequested as help_text:
        return Outcome(stdout=str(help_text))
    except UsageError as exc:
        return error_outcome(EXIT_USAGE, "usage", str(exc), as_json=as_json)
    rt: Runtime | None = None
    try:
        if args.command in _SETUP_COMMANDS:
            document, text = _SETUP_COMMANDS[args.command](env, args)
        else:
            rt = Runtime(env)
            document, text = _COMMANDS[args.command](rt, args)
    except UsageError as exc:
        return error_outcome(EXIT_USAGE, "usage", str(exc), as_json=args.json)
    except Unfinished as exc:
        stdout = to_json_text({**exc.document, **error_document(exc.category, exc.message)}) if args.json \
            else exc.text
        return Outcome(code=EXIT_ERROR, error=exc.message, stdout=stdout, json=args.json)
    except QmemError as exc:
        return error_outcome(EXIT_ERROR, exc.category, exc.message, as_json=args.json)
    finally:
        if rt is not None:
            rt.close()
    return Outcome(stdout=to_json_text(document) if args.json else text, json=args.json)


def main(argv: Sequence[str] | None = None) -> int:
    if sys.stderr.isatty():  # one line while waiting on the network; never through a host's /qmem:local
        set_wait_observer(WaitLine(sys.stderr))
    return emit(run(sys.argv[1:] if argv is None else argv), PROG)


if __name__ == "__main__":
    sys.exit(main())
