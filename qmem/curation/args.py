"""The admin CLI's command line: its parser, and the checks each argument passes before any I/O.

:func:`build_parser` describes ``init``, ``status`` and ``import-hermes`` (with their help
and examples); :func:`status_source` and :func:`import_request` turn what it parsed into
checked values, raising :class:`~qmem.cli.frontend.UsageError` (exit 2) on the first bad one, with
a message that names the option and never echoes the value refused (it may hold a credential).
Only :mod:`qmem.admin` and the admin commands use this module.
"""

from __future__ import annotations

import re

from .. import __version__
from ..cli.frontend import CommandParser, UsageError, examples
from ..config import RecallConfig
from ..errors import InputError
from ..secretscan.engine import scan
from ..valueclass import dataclass
from .hermespoint import PROFILES
from .plan import endpoint_identity, validate_source_url

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["PROG", "build_parser"]

PROG = "qmem-admin"

DEFAULT_BATCH_SIZE = 64

_PLAN_ID = re.compile(r"[0-9a-f]{64}")
# The config's rules for the same kinds of names (recall.collection, recall.project, recall.embeddingModel).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}")


def build_parser() -> CommandParser:
    common = CommandParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print one JSON document on stdout (errors included)")
    parser = CommandParser(prog=PROG, description="qmem's admin CLI: the curated Qdrant collection and "
                                                  "imports from a Hermes agent (human-operated).",
                           epilog=examples("python3 -m qmem.admin status", "python3 -m qmem.admin init",
                                           "python3 -m qmem.admin COMMAND --help    # each command's options"))
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)
    sub.required = True

    sub.add_parser("init", parents=[common],
                   help="create the destination collection and its keyword indexes (changes nothing if it exists)",
                   description="Create the recall section's collection (recall.collection, recall.dimension, "
                               "recall.distance, recall.vectorName) with keyword indexes on host, status, "
                               "secret_scan, project and source_type. A matching collection is left alone; a "
                               "mismatch is reported and left untouched (exit 1). Needs QMEM_ADMIN_QDRANT_API_KEY.",
                   epilog=examples("python3 -m qmem.admin init", "python3 -m qmem.admin init --json"))

    status = sub.add_parser("status", parents=[common], help="read-only health of destination, source, runtime, "
                                                              "breakers and local index",
                            description="Read-only: the destination collection (admin key), a Hermes source if "
                                        "given (source key), runtime health with the runtime key, the breakers and "
                                        "the local index. Exit 1 when anything checked is unhealthy.",
                            epilog=examples("python3 -m qmem.admin status",
                                            "python3 -m qmem.admin status --source-url http://127.0.0.1:6333 "
                                            "--source-collection hermes_memories"))
    status.add_argument("--source-url", metavar="URL", help="also inspect a Hermes source Qdrant")
    status.add_argument("--source-collection", metavar="NAME", help="the source collection (with --source-url)")

    imp = sub.add_parser("import-hermes", parents=[common],
                         help="import a Hermes agent's memories: --dry-run first, then --approve PLAN_ID",
                         description="Import a Hermes agent's memories into the curated collection: --dry-run "
                                     "reads, checks and prints counts and a plan id, writing nothing; --approve "
                                     "PLAN_ID with the same arguments writes exactly that plan (or nothing, when "
                                     "the source changed).",
                         epilog=examples(
                             "python3 -m qmem.admin import-hermes --source-url http://127.0.0.1:6333 "
                             "--source-collection hermes_memories --target-host pi --project shop "
                             "--source-model bge-m3 --dry-run",
                             "python3 -m qmem.admin import-hermes … --approve PLAN_ID    # the same arguments"))
    imp.add_argument("--source-url", metavar="URL", required=True, help="the Hermes Qdrant (no credentials in it)")
    imp.add_argument("--source-collection", metavar="NAME", required=True,
                     help="the Hermes collection to read (only read, never written)")
    imp.add_argument("--target-host", choices=("pi", "prime"), required=True,
                     help="the host whose recall will see these memories")
    imp.add_argument("--project", metavar="P", help="put the memories in this project's lane")
    imp.add_argument("--source-model", metavar="M",
                     help="the source's embedding model (required: it must equal recall.embeddingModel)")
    imp.add_argument("--profile", choices=tuple(PROFILES), default="qdrant-memory",
                     help="the source's layout (default: qdrant-memory)")
    mode = imp.add_mutually_exclusive_group(required=True)
    mode.add_argument("--dry-run", action="store_true", help="read, check and plan; write nothing")
    mode.add_argument("--approve", metavar="PLAN_ID", help="write exactly the plan the dry-run printed")
    imp.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, metavar="N",
                     help=f"points per upsert (default {DEFAULT_BATCH_SIZE})")
    return parser


def _name_argument(value: str, option: str, pattern: re.Pattern[str]) -> str:
    if not pattern.fullmatch(value):
        raise UsageError(f"{option} has characters that are not allowed (letters, digits and . _ : - …)")
    findings = scan(value)
    if findings:
        raise UsageError(f"{option} looks like it contains a credential ({findings[0].family})")
    return value


def _source_url_argument(value: str) -> str:
    try:
        return validate_source_url(value)
    except InputError as exc:
        raise UsageError(exc.message) from None


def status_source(args: Any) -> tuple[str, str] | None:
    """``status``'s ``(--source-url, --source-collection)``, checked; None when neither is given."""
    if (args.source_url is None) != (args.source_collection is None):
        raise UsageError("--source-url and --source-collection go together")
    if args.source_url is None:
        return None
    url = _source_url_argument(args.source_url)
    return url, _name_argument(args.source_collection, "--source-collection", _NAME)


@dataclass(frozen=True)
class ImportRequest:
    """The ``import-hermes`` arguments, checked."""

    source_url: str
    source_collection: str
    profile: str
    target_host: str
    project: str | None
    declared_model: str
    approve: str | None  # None: a dry-run
    batch_size: int


def import_request(args: Any, recall: RecallConfig) -> ImportRequest:
    """Every ``import-hermes`` argument checked before any I/O (exit 2 on a bad one)."""
    if args.approve is not None and not _PLAN_ID.fullmatch(args.approve):
        raise UsageError("--approve needs the plan id the dry-run printed: 64 lowercase hex digits")
    if not 1 <= args.batch_size <= 1000:
        raise UsageError("--batch-size must be between 1 and 1000")
    url = _source_url_argument(args.source_url)
    collection = _name_argument(args.source_collection, "--source-collection", _NAME)
    destination = recall.qdrant_url
    if destination is not None and (endpoint_identity(url), collection) == (endpoint_identity(destination),
                                                                             recall.collection):
        raise UsageError("the source is the destination collection itself; import from the Hermes collection")
    project = _name_argument(args.project, "--project", _NAME) if args.project is not None else None
    if args.source_model is None:
        raise UsageError(f"declare the source's embedding model with --source-model (vectors are copied, not "
                         f"re-embedded, so it must be recall.embeddingModel, {recall.embedding_model!r})")
    model = _name_argument(args.source_model, "--source-model", _MODEL)
    return ImportRequest(source_url=url, source_collection=collection, profile=args.profile,
                         target_host=args.target_host, project=project, declared_model=model,
                         approve=args.approve, batch_size=args.batch_size)
