"""``python3 -m qmem.local``: the offline CLI over the local index and the outbox, and the setup commands.

Subcommands: ``status``, ``import``, ``find``, ``queue``, ``store``, ``forget`` work with no
server at all; ``flush``, ``enrich``, ``pull`` and ``breaker`` talk to the Memory Gateway; ``doctor``
checks the whole setup; ``recall-log`` shows what automatic recall did (ids and numbers only);
``install`` / ``uninstall`` put qmem into (or take it out of) pi,
Prime or Hermes; ``mcp-config`` prints a ready MCP server entry.  Every subcommand takes
``--json`` (one JSON document on stdout, an error included).

Exit status: 0 success; 1 an error (one line on stderr, no traceback), also when ``flush``,
``pull`` or ``enrich`` stopped with work left and when ``doctor`` found a problem (their
report is still printed); 2 bad usage (an unknown option, ``--limit 0``, a query with no
words).  ``--version`` prints the version.

:func:`run` returns an :class:`~qmem.cli.frontend.Outcome` instead of printing, so that the hosts'
``/qmem:local`` command shares this code without sharing a stdout.  This module runs the
commands; their command line is :mod:`qmem.cli.localargs` and their text :mod:`qmem.cli.localrender`.
"""

if __name__ == "__main__":  # `python3 -m qmem.local`: nothing more from the working directory (see qmem/entryguard.py)
    from .entryguard import drop_working_directory

    drop_working_directory()

from .entryguard import require_supported_python  # noqa: E402

require_supported_python()

import os  # noqa: E402  (after the version check: one line on an old Python, no traceback)
import sys  # noqa: E402

from .cli.frontend import (  # noqa: E402
    EXIT_ERROR, EXIT_USAGE, HelpRequested, Outcome, Progress, UsageError, emit, error_document, error_outcome,
    to_json_text, undecodable_argument, wants_json,
)
from .cli.localargs import PROG, STORE_FLUSH_BUDGET_S, build_parser  # noqa: E402
from .cli.localrender import (  # noqa: E402
    render_find, render_forget, render_import, render_queue, render_recall_log, render_retried, render_status,
)
from .clients.progressline import ProgressLine, set_wait_observer  # noqa: E402
from .errors import InputError, QmemError  # noqa: E402
from .records import QUEUE_LIMIT  # noqa: E402
from .localdb.lexical import query_terms  # noqa: E402
from .runtime import Runtime  # noqa: E402

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

__all__ = ["run", "main"]


# --- commands ----------------------------------------------------------------------------
# Each command imports what only it uses when it runs: a `find` or a `status` then loads
# neither the session importer, the store and sync lanes, the gateway's HTTP stack nor the
# credential scanner.

class Unfinished(QmemError):
    """A command that ran and reported, but stopped with work left or found problems: exit 1.

    ``document`` and ``text`` are its report, printed as for a success.
    """

    category = "incomplete"

    def __init__(self, message: str, document: "dict[str, Any]", text: str, *, category: str | None = None) -> None:
        super().__init__(message, category=category)
        self.document = document
        self.text = text


def _cmd_status(rt: Runtime, args: "Any") -> "tuple[Any, str]":
    status = rt.index.status()
    return status.to_json(), render_status(status)


def _cmd_import(rt: Runtime, args: "Any") -> "tuple[Any, str]":
    from .localdb.sessionimport import SessionImporter, session_roots  # this command's own (see "commands" above)

    roots = [root for root in session_roots(rt.env) if args.host in (None, root.host)]
    progress = Progress("importing session files")
    try:
        report = SessionImporter(rt.index).run(roots, progress=progress)
    finally:
        progress.finish()
    looked = [{"label": root.label, "host": root.host, "found": root.found()} for root in roots]
    return {**report.to_json(), "looked_in": looked}, render_import(report, looked)


def _cmd_find(rt: Runtime, args: "Any") -> "tuple[Any, str]":
    query = " ".join(args.query)
    if not query_terms(query).terms:
        raise UsageError("the query has no words to search for (a word needs a letter or a digit)")
    result = rt.index.find(query, project=args.project, kind=args.kind, limit=args.limit,
                           superseded=args.superseded, private=args.private, deleted=args.deleted)
    return result.to_json(), render_find(result)


def _cmd_queue(rt: Runtime, args: "Any") -> "tuple[Any, str]":
    if args.action == "retry":
        if args.limit is not None or bool(args.ids) == args.all:
            raise UsageError("queue retry takes the ids of failed records, or --all")
        retried = rt.outbox.retry(None if args.all else args.ids)
        return {"retried": [record.id for record in retried], "count": len(retried)}, render_retried(retried)
    if args.ids:
        raise UsageError("record ids go with retry: queue retry ID…")
    if args.all and args.limit is not None:
        raise UsageError("--limit and --all do not go together")
    report = rt.index.queue_report(limit=None if args.all else args.limit or QUEUE_LIMIT)
    return report.to_json(), render_queue(report)


def _cmd_forget(rt: Runtime, args: "Any") -> "tuple[Any, str]":
    report = rt.outbox.forget(args.ids, dry_run=args.dry_run)
    return report.to_json(), render_forget(report)


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


def _cmd_store(rt: Runtime, args: "Any") -> "tuple[Any, str]":
    arguments = {
        "text": _read_text_argument(args.text), "project_id": args.project, "kind": args.kind,
        "scope": args.scope, "agent_id": args.agent, "source": args.source, "expires_at": args.expires_at,
        "supersedes_id": args.supersedes, "supersede_reason": args.reason,
    }
    from .store import qmem_store  # this command's own (see "commands" above)

    if args.queue_only:
        result = qmem_store(rt, arguments, queue_only=True)
        return dict(result.details), result.text
    # After a successful store, send what was queued before, for a bounded time: a long backlog
    # is flush's job (hosts flush in the background), not something a store waits for.
    sent: "dict[str, Any]" = {}
    result = qmem_store(rt, arguments, flush_soon=lambda: sent.update(_flush_briefly(rt)))
    details, text = dict(result.details), result.text
    if sent:
        details["backlog"] = sent
        if sent.get("still_queued"):
            text += "\n" + _queued_note(sent["still_queued"])
    return details, text


def _flush_briefly(rt: Runtime) -> "dict[str, Any]":
    """Send older queued records for at most :data:`STORE_FLUSH_BUDGET_S`; what happened, in numbers."""
    from .sync import flush  # this command's own (see "commands" above)

    try:
        if not rt.outbox.pending_count():
            return {}
        report = flush(rt, budget_s=STORE_FLUSH_BUDGET_S)
        return {"sent": report.sent, "still_queued": rt.outbox.pending_count()}
    except QmemError:
        return {}  # the store itself succeeded; the queue waits for the next flush


def _unfinished(document: "dict[str, Any]", text: str, stopped: str | None, summary: str) -> Unfinished:
    message = f"{summary}: {stopped}" if stopped else summary
    return Unfinished(message, document, text)


def _cmd_flush(rt: Runtime, args: "Any") -> "tuple[Any, str]":
    from .sync import flush  # this command's own (see "commands" above)

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


def _cmd_enrich(rt: Runtime, args: "Any") -> "tuple[Any, str]":
    from .sync import enrich  # this command's own (see "commands" above)

    report = enrich(rt, everything=args.all)
    text = f"checked {report.checked}, updated {report.updated}, not on the gateway {report.missing}"
    text += f"\nstopped: {report.stopped}" if report.stopped else ""
    if not report.complete:
        raise _unfinished(report.to_json(), text, report.stopped, "enrich stopped before the end")
    return report.to_json(), text


def _cmd_pull(rt: Runtime, args: "Any") -> "tuple[Any, str]":
    from .sync import pull  # this command's own (see "commands" above)

    report = pull(rt)
    text = (f"{report.pages} page(s), {report.items} items: added {report.added}, updated {report.updated}, "
            f"tombstones {report.tombstones}")
    text += f"\nstopped: {report.stopped}" if report.stopped else ""
    if not report.complete:
        raise _unfinished(report.to_json(), text, report.stopped, "pull stopped before the end")
    return report.to_json(), text


def _cmd_breaker(rt: Runtime, args: "Any") -> "tuple[Any, str]":
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


PLUGIN_HOSTS = ("claude", "codex")  # installed as a plugin by the host's own commands (qmem/setup/plugininstall.py)


# -- setup commands: they need no valid configuration, so they run without a Runtime, and
#    their modules are imported only when used (they are not on any host's hot path).

def _cmd_doctor(env: "Mapping[str, str]", args: "Any") -> "tuple[Any, str]":
    from .setup import doctor

    diagnosis = doctor.diagnose(env)
    text = doctor.render(diagnosis)
    if diagnosis.problems:
        count = len(diagnosis.problems)
        raise Unfinished(f"doctor found {count} problem{'s' if count != 1 else ''}: {'; '.join(diagnosis.problems)}",
                         diagnosis.document, text, category="doctor")
    return diagnosis.document, text


def _cmd_recall_log(env: "Mapping[str, str]", args: "Any") -> "tuple[Any, str]":
    # No Runtime: the log's place depends on the environment alone, so it reads even with a broken config.
    from .config import resolve_paths
    from .recalllog import LOG_NAME, MAX_BYTES, RecallLog

    entries = RecallLog.in_directory(resolve_paths(None, env).data_dir).read_entries(args.limit)
    document = {"entries": entries, "count": len(entries), "file": LOG_NAME, "max_bytes": MAX_BYTES}
    return document, render_recall_log(entries, LOG_NAME)


def _cmd_install(env: "Mapping[str, str]", args: "Any") -> "tuple[Any, str]":
    if args.host in PLUGIN_HOSTS:  # Claude Code, Codex: the plugin, through the host's own commands
        from .setup.plugininstall import install_plugin

        if args.copy:
            raise UsageError(f"install {args.host} has no --copy: the host copies the plugin itself")
        plugin = install_plugin(args.host, env)
        return plugin.to_json(), plugin.describe()
    from .setup import install

    result = install.install(args.host, env, copy=args.copy)
    return result.to_json(), result.describe()


def _cmd_uninstall(env: "Mapping[str, str]", args: "Any") -> "tuple[Any, str]":
    if args.host in PLUGIN_HOSTS:
        from .setup.plugininstall import uninstall_plugin

        plugin = uninstall_plugin(args.host, env)
        return plugin.to_json(), plugin.describe()
    from .setup import install

    result = install.uninstall(args.host, env)
    return result.to_json(), result.describe()


def _cmd_mcp_config(env: "Mapping[str, str]", args: "Any") -> "tuple[Any, str]":
    from .setup import mcpconfig

    entry = mcpconfig.server_entry(env)
    text = mcpconfig.render(args.client, entry)
    return {"client": args.client, **entry.to_json(), "text": text}, text


_COMMANDS = {
    "status": _cmd_status,
    "import": _cmd_import,
    "find": _cmd_find,
    "queue": _cmd_queue,
    "store": _cmd_store,
    "forget": _cmd_forget,
    "flush": _cmd_flush,
    "enrich": _cmd_enrich,
    "pull": _cmd_pull,
    "breaker": _cmd_breaker,
}

_SETUP_COMMANDS = {
    "doctor": _cmd_doctor,
    "recall-log": _cmd_recall_log,
    "install": _cmd_install,
    "uninstall": _cmd_uninstall,
    "mcp-config": _cmd_mcp_config,
}


def run(argv: "Sequence[str]", *, env: "Mapping[str, str] | None" = None) -> Outcome:
    """Run one command line and return what it produced; never raises for user errors."""
    env = os.environ if env is None else env
    argv = list(argv)
    as_json = wants_json(argv)
    bad = undecodable_argument(argv)
    if bad is not None:
        return error_outcome(EXIT_ERROR, "input", bad, as_json=as_json)
    try:
        args = build_parser(argv).parse_args(argv)
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


def main(argv: "Sequence[str] | None" = None) -> int:
    if sys.stderr.isatty():  # one line while waiting on the network; never through a host's /qmem:local
        set_wait_observer(ProgressLine(sys.stderr))
    return emit(run(sys.argv[1:] if argv is None else argv), PROG)


if __name__ == "__main__":
    sys.exit(main())
