"""``python3 -m qmem.local``'s command line: the parser, with every command's options, help and examples.

:func:`build_parser` describes the offline commands (``status``, ``import``, ``find``,
``queue``, ``store``, ``forget``), the gateway commands (``flush``, ``enrich``, ``pull``, ``breaker``) and
the setup commands (``doctor``, ``recall-log``, ``install``, ``uninstall``, ``mcp-config``); parsing does no
I/O.  Only :mod:`qmem.local` uses this module.
"""

from __future__ import annotations

import argparse

from .. import __version__
from ..localdb.search import MAX_FIND_LIMIT
from ..records import KINDS, QUEUE_LIMIT
from .frontend import CommandParser, examples

__all__ = ["PROG", "STORE_FLUSH_BUDGET_S", "build_parser"]

PROG = "qmem-local"
HOSTS = ("pi", "prime", "hermes", "claude", "codex")
MCP_CLIENTS = ("claude", "codex", "hermes", "prime", "json")

#: The most entries ``recall-log --limit`` shows (the file keeps fewer).
MAX_LOG_LIMIT = 1000

#: Every sub-command, in the order the help lists them.
COMMAND_NAMES = ("status", "import", "find", "queue", "store", "forget", "flush", "enrich", "pull", "breaker",
                 "doctor", "recall-log", "install", "uninstall", "mcp-config")

#: After a successful ``store``, the CLI sends older queued records for at most this long.
STORE_FLUSH_BUDGET_S = 2.0


def _limit(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_FIND_LIMIT}") from None
    if not 1 <= number <= MAX_FIND_LIMIT:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_FIND_LIMIT}")
    return number


def _log_limit(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if not 1 <= number <= MAX_LOG_LIMIT:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_LOG_LIMIT}")
    return number


class _Unbuilt:
    """Stands for a sub-command's parser that this run does not need: its options go nowhere."""

    def add_argument(self, *args: object, **kwargs: object) -> None:
        pass


def build_parser(argv: list[str] | None = None) -> CommandParser:
    """The parser; given the command line, only the sub-command it names is built (most of the
    cost of building is the 14 other sub-parsers).  A line that names no known sub-command
    first (``--help``, ``--version``, a typo) gets every sub-command, so its help and its
    error are the full ones."""
    only = argv[0] if argv and argv[0] in COMMAND_NAMES else None
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
        if only is not None and name != only:
            return _Unbuilt()  # type: ignore[return-value]
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

    # forget: take records back from this machine
    forget = command("forget", "remove records from this machine; a queued one is never sent",
                     "Remove records from the local index for good (the freed space is overwritten). A record "
                     "still queued leaves the outbox too, so it never leaves this machine. A record already at "
                     "the Memory Gateway loses only its local copy: the shared copy stays, readable by every "
                     "agent, and only a gateway administrator can delete it. Ids are gateway or local ids "
                     "(`find` and `queue` show them); --dry-run says what would go and changes nothing.",
                     "python3 -m qmem.local forget ID --dry-run", "python3 -m qmem.local forget ID ID2")
    forget.add_argument("ids", nargs="+", metavar="ID", help="the records to forget (gateway or local ids)")
    forget.add_argument("--dry-run", action="store_true", help="say what would be forgotten; change nothing")

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

    recall_log = command("recall-log", "what automatic recall did, newest first",
                         "The recent automatic recalls, newest first: time, host, per lane its outcome and hits, "
                         "the record ids with their scores, the characters delivered, how long the first LLM "
                         "request waited and how long the recall took, and the outcome: delivered, late (joined "
                         "a later request of the prompt), lost (ready too late for any request), none (nothing "
                         "eligible), skipped (a breaker was open, or the prompt held a credential) or failed "
                         "(with its category). Ids and numbers only: never a prompt, a query, memory text or a "
                         "vector. The file (recall-log.jsonl in the data directory, readable only by you) keeps "
                         "at most 256 KiB.",
                         "python3 -m qmem.local recall-log", "python3 -m qmem.local recall-log --limit 5 --json")
    recall_log.add_argument("--limit", type=_log_limit, default=20,
                            help=f"at most this many entries, 1 to {MAX_LOG_LIMIT} (default 20)")

    for name, verb in (("install", "install"), ("uninstall", "remove")):
        summary = (f"{verb} qmem in pi, Prime, Hermes, Claude Code or Codex" if name == "install"
                   else "remove what install put into pi, Prime, Hermes, Claude Code or Codex")
        description = (
            "Link (default) or copy this qmem folder into the host's extensions directory as `qmem` "
            "(~/.pi/agent/extensions, ~/.prime/agent/extensions, ~/.hermes/plugins; PI_CODING_AGENT_DIR, "
            "PRIME_AGENT_CODING_AGENT_DIR and HERMES_HOME move them), creating the directory. For Hermes it "
            "also enables the plugin in config.yaml, or prints the command that does. Running it again "
            "changes nothing; an existing folder or link that is not qmem is never replaced. "
            "`install --copy` again updates a copy. Claude Code and Codex: run the host's own commands "
            "(plugin marketplace add <this repository>, then plugin install / plugin add qmem@qmem) and check that "
            "qmem's MCP server starts from the host's copy."
            if name == "install" else
            "Remove the link or the copy that install made (never a folder with files qmem does not know); "
            "for Hermes also take qmem out of plugins.enabled. Your memories stay in the data directory "
            "(records still queued live only there). Claude Code and Codex: run the host's own uninstall and "
            "marketplace remove, then remove the copy and folders the host leaves behind.")
        cmd = command(name, summary, description, f"python3 -m qmem.local {name} pi",
                      f"python3 -m qmem.local {name} hermes" + (" --copy" if name == "install" else ""))
        cmd.add_argument("host", choices=HOSTS, help="the host: pi, prime, hermes, claude or codex")
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
