"""``python3 -m qmem.admin``: the human-operated admin CLI — ``init``, ``status``, ``import-hermes``.

Nothing on the runtime path imports this module (or :mod:`qmem.adminqdrant`,
:mod:`qmem.hermesimport` and :mod:`qmem.hermesimportplan`, which only it uses), and no model can reach it: it is run by a
person, and what it does is visible in its output.

* ``init`` (mutating, explicit) creates the destination collection of the ``recall``
  config section — its dimension, distance and vector name (unnamed unless
  ``recall.vectorName`` is set) — and the five keyword indexes of DESIGN §7.  A collection
  that already matches is left alone ("nothing changed"); one that differs in any way,
  including a missing index, is reported and left untouched (exit 1).
* ``status`` (read-only) reports the destination (admin key), optionally a source
  (``--source-url``/``--source-collection``, source key), runtime health (the runtime's
  read-only key: ``/healthz`` and the collection readable), the breakers of the gateway,
  Qdrant and embeddings URLs, and the local index if its file exists (it is never
  created).  It prints no endpoint, header, path, memory text or credential; exit 1 when
  anything checked is unhealthy.
* ``import-hermes … --dry-run`` reads the source through a projection that can only read,
  normalizes every point, prints counts and the plan id, and writes nothing.
  ``import-hermes … --approve PLAN_ID`` repeats all of it, compares the digests with
  :func:`hmac.compare_digest`, and on a match upserts exactly the points that were
  hashed — spooled while hashing, never read from the source again — in batches with
  ``wait=true``, reporting progress on stderr and, if a batch fails, which ones committed.
  There is no delete or reset command.

Exit status: 0 success, 1 error (one line on stderr, no traceback), 2 bad usage.  With
``--json`` stdout carries exactly one JSON document.  Credentials come only from the
environment (``QMEM_ADMIN_QDRANT_API_KEY``, ``QMEM_SOURCE_QDRANT_API_KEY``,
``QMEM_QDRANT_API_KEY``), never from the command line.  ``--version`` prints the version; on a
Python older than 3.10 it prints one line and exits 1.
"""

from .pythonversion import require_supported_python

require_supported_python()

import hmac  # noqa: E402  (after the version check: one line on an old Python, no traceback)
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import struct  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from array import array  # noqa: E402
from collections.abc import Callable, Iterator, Mapping, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

from . import config as config_mod  # noqa: E402
from .adminqdrant import AdminQdrant, AdminQdrantError, CollectionLayout, SourceProjection  # noqa: E402
from . import __version__  # noqa: E402
from .cli import (  # noqa: E402
    EXIT_ERROR,
    EXIT_USAGE,
    CommandParser,
    HelpRequested,
    Outcome,
    Progress,
    UsageError,
    emit,
    error_outcome,
    examples,
    to_json_text,
    undecodable_argument,
    wants_json,
)
from .config import RecallConfig  # noqa: E402
from .errors import ConfigError, InputError, QmemError  # noqa: E402
from .hermesimport import PROFILES, Accepted, normalize_point  # noqa: E402
from .hermesimportplan import (  # noqa: E402
    ImportReport,
    PlanInputs,
    PlanManifest,
    compatibility_problems,
    endpoint_identity,
    validate_source_url,
)
from .localindex import LocalIndex  # noqa: E402
from .qdrant import QdrantError, ReadOnlyQdrant  # noqa: E402
from .runtime import Runtime  # noqa: E402
from .secretscan import scan  # noqa: E402
from .transport import set_wait_observer  # noqa: E402
from .waitline import WaitLine  # noqa: E402

__all__ = ["run", "main", "build_parser", "INDEXED_FIELDS", "layout_problems", "ImportRequest", "PointSpool",
           "BatchFailure", "read_source", "write_points", "page_size_for"]

PROG = "qmem-admin"

#: The keyword indexes ``init`` creates (DESIGN §7): what the recall filters match on.
INDEXED_FIELDS = ("host", "status", "secret_scan", "project", "source_type")

DEFAULT_BATCH_SIZE = 64
#: Accepted points stay in memory up to this size, then go to a private temporary file.
SPOOL_MEMORY_BYTES = 16 * 1024 * 1024
#: Scroll pages are sized to stay near this many bytes of JSON (about 24 bytes a number).
PAGE_TARGET_BYTES = 8_000_000
MAX_PAGE_POINTS = 256

_PLAN_ID = re.compile(r"[0-9a-f]{64}")
# The config's rules for the same kinds of names (recall.collection, recall.project, recall.embeddingModel).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}")


# --- the command line ----------------------------------------------------------------------------

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


@dataclass(frozen=True)
class AdminContext:
    """What every command needs: the environment, the configuration and a progress sink."""

    runtime: Runtime
    progress: Callable[[str], None]

    @property
    def env(self) -> Mapping[str, str]:
        return self.runtime.env

    @property
    def recall(self) -> RecallConfig:
        return self.runtime.config.recall

    def timeouts(self) -> dict[str, float]:
        c = self.runtime.config
        return {"connect_timeout": c.connect_timeout_ms / 1000, "body_timeout": c.timeout_ms / 1000}

    def destination(self) -> AdminQdrant:
        if self.recall.qdrant_url is None:
            raise ConfigError("the admin CLI writes to the recall collection: set recall.qdrantUrl in the config file")
        return AdminQdrant(self.recall.qdrant_url, self.recall.collection,
                           api_key=config_mod.credential("admin_qdrant", self.env), **self.timeouts())

    def source(self, url: str, collection: str) -> SourceProjection:
        return SourceProjection(url, collection, api_key=config_mod.credential("source_qdrant", self.env),
                                **self.timeouts())


def _key_state(role: str, env: Mapping[str, str]) -> str:
    return "present" if config_mod.credential(role, env) else "absent"


# --- init ----------------------------------------------------------------------------------------

def layout_problems(layout: CollectionLayout, recall: RecallConfig) -> list[str]:
    """How an existing destination collection differs from what ``init`` would create."""
    problems = []
    name = recall.vector_name
    vector = layout.vectors.get(name)
    if vector is None:
        if name is None:
            problems.append("it has named vectors, but recall.vectorName is not set (expected one unnamed vector)")
        elif not layout.named:
            problems.append(f"it has one unnamed vector, but recall.vectorName is {name!r}")
        else:
            problems.append(f"it has no vector named {name!r}")
    else:
        if vector.dimension != recall.dimension:
            problems.append(f"its dimension is {vector.dimension}, recall.dimension is {recall.dimension}")
        if vector.distance != recall.distance:
            problems.append(f"its distance is {vector.distance}, recall.distance is {recall.distance}")
    for index in INDEXED_FIELDS:
        kind = layout.indexes.get(index)
        if kind is None:
            problems.append(f"the keyword index on {index!r} is missing")
        elif kind != "keyword":
            problems.append(f"the index on {index!r} is {kind!r}, not keyword")
    return problems


def _cmd_init(ctx: AdminContext, args: Any) -> tuple[dict[str, Any], str]:
    recall = ctx.recall
    wanted = {"collection": recall.collection, "dimension": recall.dimension, "distance": recall.distance,
              "vector_name": recall.vector_name, "indexes": list(INDEXED_FIELDS)}
    destination = ctx.destination()
    try:
        layout = destination.collection_info()
        if layout is None:
            destination.create_collection(dimension=recall.dimension, distance=recall.distance,
                                          vector_name=recall.vector_name)
            for index in INDEXED_FIELDS:
                try:
                    destination.create_keyword_index(index)
                except AdminQdrantError as exc:
                    # init never repairs an existing collection, so say how to finish by hand.
                    raise QmemError(f"created collection {recall.collection}, but the keyword index on {index!r} "
                                    f"failed ({exc.message}); create the remaining indexes in Qdrant, or delete "
                                    f"the empty collection and run init again", category="destination") from None
            return ({"action": "created", **wanted, "problems": []},
                    f"created collection {recall.collection} ({_vector_words(recall)}) with keyword indexes on "
                    f"{', '.join(INDEXED_FIELDS)}")
    finally:
        destination.close()
    problems = layout_problems(layout, recall)
    if problems:
        raise _InitMismatch(recall.collection, problems, {"action": "mismatch", **wanted, "problems": problems,
                                                          "found": layout.to_json()})
    return ({"action": "unchanged", **wanted, "problems": []},
            f"collection {recall.collection} already matches the configuration ({_vector_words(recall)}, "
            f"{len(INDEXED_FIELDS)} keyword indexes); nothing changed")


def _vector_words(recall: RecallConfig) -> str:
    name = f"vector {recall.vector_name!r}" if recall.vector_name else "unnamed vector"
    return f"{name}, dimension {recall.dimension}, {recall.distance}"


class _InitMismatch(QmemError):
    category = "destination"

    def __init__(self, collection: str, problems: list[str], document: dict[str, Any]) -> None:
        super().__init__(f"collection {collection} exists but does not match the configuration: "
                         f"{'; '.join(problems)}; it was left untouched")
        self.document = document


# --- status --------------------------------------------------------------------------------------

def _describe_layout(layout: CollectionLayout, vector_name: str | None) -> dict[str, Any]:
    vector = layout.vectors.get(vector_name)
    if vector is None and len(layout.vectors) == 1:
        vector_name, vector = next(iter(layout.vectors.items()))
    return {"exists": True, "vector_name": vector_name if vector else None,
            "dimension": vector.dimension if vector else None, "distance": vector.distance if vector else None,
            "points": layout.points, "indexes": dict(sorted(layout.indexes.items()))}


def _read_layout(client: AdminQdrant | SourceProjection) -> tuple[CollectionLayout | None, dict[str, Any]]:
    """The collection's layout (None: it does not exist), or why it could not be read; closes the client."""
    try:
        return client.collection_info(), {"reachable": True}
    except QmemError as exc:
        return None, {"reachable": False, "error": exc.message}
    finally:
        client.close()


def _destination_status(ctx: AdminContext) -> dict[str, Any]:
    report: dict[str, Any] = {"collection": ctx.recall.collection, "key": _key_state("admin_qdrant", ctx.env)}
    layout, reached = _read_layout(ctx.destination())
    if not reached["reachable"]:
        return {**report, **reached}
    if layout is None:
        return {**report, "reachable": True, "exists": False,
                "problems": ["the collection does not exist; run `python3 -m qmem.admin init`"]}
    return {**report, "reachable": True, **_describe_layout(layout, ctx.recall.vector_name),
            "problems": layout_problems(layout, ctx.recall)}


def _source_status(ctx: AdminContext, url: str, collection: str) -> dict[str, Any]:
    report: dict[str, Any] = {"checked": True, "collection": collection, "key": _key_state("source_qdrant", ctx.env)}
    layout, reached = _read_layout(ctx.source(url, collection))
    if not reached["reachable"]:
        return {**report, **reached}
    if layout is None:
        return {**report, "reachable": True, "exists": False, "problems": ["the source collection does not exist"]}
    recall = ctx.recall
    # No assignment expression here: this module must parse on old Pythons, so that its
    # version guard can say which Python it needs instead of a SyntaxError.
    fits = [name for name, profile in PROFILES.items()
            if _fits(layout.vectors.get(profile.vector_name), recall)]
    described = _describe_layout(layout, PROFILES["qdrant-memory"].vector_name if layout.named else None)
    return {**report, "reachable": True, **described, "importable_as": fits, "problems": []}


def _fits(vector: Any, recall: RecallConfig) -> bool:
    return vector is not None and vector.dimension == recall.dimension and vector.distance == recall.distance


def _runtime_status(ctx: AdminContext) -> dict[str, Any]:
    recall = ctx.recall
    report: dict[str, Any] = {"recall_enabled": recall.active, "key": _key_state("qdrant", ctx.env)}
    if recall.qdrant_url is None:
        return {**report, "healthz": None, "collection_readable": None, "error": "recall is not configured"}
    client = ReadOnlyQdrant(recall.qdrant_url, recall.collection, api_key=config_mod.credential("qdrant", ctx.env),
                            search_endpoint=recall.search_endpoint, timeout_s=recall.timeout_ms / 1000)
    try:
        try:
            report["healthz"] = client.health()
        except QdrantError as exc:
            return {**report, "healthz": False, "collection_readable": False, "error": exc.message}
        try:
            client.collection_info(recall.vector_name)
            report["collection_readable"] = True
        except QdrantError as exc:
            report.update(collection_readable=False, error=exc.message)
    finally:
        client.close()
    return report


def _breaker_status(ctx: AdminContext) -> dict[str, Any]:
    rt = ctx.runtime
    urls = {"gateway": rt.config.url, "qdrant": ctx.recall.qdrant_url, "embeddings": ctx.recall.embeddings_url}
    return {name: rt.breaker_for(url).snapshot() if url else None for name, url in urls.items()}


def _local_index_status(ctx: AdminContext) -> dict[str, Any]:
    path = ctx.runtime.paths.database
    if not path.exists():
        return {"exists": False}  # status never creates the index
    try:
        with LocalIndex(path) as index:
            return {"exists": True, **index.status().to_json()}
    except QmemError as exc:
        return {"exists": True, "error": exc.message}


def _status_problems(document: Mapping[str, Any]) -> list[str]:
    problems = []
    for name in ("destination", "source"):
        part = document[name]
        if part.get("checked") is False:
            continue
        if part.get("error"):
            problems.append(f"{name} unreachable")
        elif part.get("problems"):
            problems.append(f"{name} {'missing' if part.get('exists') is False else 'mismatched'}")
    runtime = document["runtime"]
    if runtime["recall_enabled"] and not (runtime.get("healthz") and runtime.get("collection_readable")):
        problems.append("runtime recall unhealthy")
    if document["local_index"].get("error"):
        problems.append("local index unreadable")
    return problems


def _cmd_status(ctx: AdminContext, args: Any) -> tuple[dict[str, Any], str]:
    if (args.source_url is None) != (args.source_collection is None):
        raise UsageError("--source-url and --source-collection go together")
    source: dict[str, Any] = {"checked": False}
    if args.source_url is not None:
        url = _source_url_argument(args.source_url)
        collection = _name_argument(args.source_collection, "--source-collection", _NAME)
        source = _source_status(ctx, url, collection)
    document: dict[str, Any] = {
        "destination": _destination_status(ctx),
        "source": source,
        "runtime": _runtime_status(ctx),
        "breakers": _breaker_status(ctx),
        "local_index": _local_index_status(ctx),
    }
    problems = _status_problems(document)
    document["ok"] = not problems
    text = render_status(document)
    if problems:
        raise _StatusProblems(problems, document, text)
    return document, text


class _StatusProblems(QmemError):
    category = "status"

    def __init__(self, problems: list[str], document: dict[str, Any], text: str) -> None:
        super().__init__(f"status: {', '.join(problems)}")
        self.document = document
        self.text = text


def _part_line(label: str, part: Mapping[str, Any]) -> str:
    if part.get("checked") is False:
        return f"{label:<12} not checked (give --source-url and --source-collection)"
    head = f"{label:<12} {part.get('collection')} (key {part.get('key')})"
    if part.get("error"):
        return f"{head}: unreachable — {part['error']}"
    if part.get("exists") is False:
        return f"{head}: does not exist"
    line = (f"{head}: {part.get('points')} points, vector {part.get('vector_name') or 'unnamed'} "
            f"{part.get('dimension')} {part.get('distance')}, indexes {', '.join(part.get('indexes', {})) or 'none'}")
    if "importable_as" in part:
        line += f"; importable with --profile {' or '.join(part['importable_as']) or '(none matches)'}"
    if part.get("problems"):
        line += f"\n{'':<13}problems: {'; '.join(part['problems'])}"
    return line


def render_status(document: Mapping[str, Any]) -> str:
    runtime = document["runtime"]
    runtime_line = (f"{'runtime':<12} recall {'on' if runtime['recall_enabled'] else 'off'} (key {runtime['key']}): "
                    f"healthz {'ok' if runtime.get('healthz') else 'failing'}, collection "
                    f"{'readable' if runtime.get('collection_readable') else 'not readable'}")
    if runtime.get("error"):
        runtime_line += f" — {runtime['error']}"
    breakers = ", ".join(f"{name} {snap['state']}" if snap else f"{name} not configured"
                         for name, snap in document["breakers"].items())
    index = document["local_index"]
    if not index.get("exists"):
        index_line = "not created yet"
    elif index.get("error"):
        index_line = f"unreadable — {index['error']}"
    else:
        queue = index["queue"]
        index_line = f"{index['records']} records, {queue['pending']} queued, schema v{index['schema_version']}"
    return "\n".join([
        _part_line("destination", document["destination"]),
        _part_line("source", document["source"]),
        runtime_line,
        f"{'breakers':<12} {breakers}",
        f"{'local index':<12} {index_line}",
        f"{'overall':<12} {'ok' if document['ok'] else 'problems found'}",
    ])


# --- import-hermes -------------------------------------------------------------------------------

class PointSpool:
    """The accepted points of one read, kept so that an approval writes exactly what was hashed.

    In memory up to ``max_memory`` bytes, then in an anonymous temporary file (mode 0600,
    unlinked at creation, gone when closed).  Each record is two little-endian lengths, the
    ``[id, payload]`` JSON and the vector's raw float64 bytes.
    """

    _HEAD = struct.Struct("<II")

    def __init__(self, max_memory: int = SPOOL_MEMORY_BYTES) -> None:
        self._file = tempfile.SpooledTemporaryFile(max_size=max_memory, mode="w+b")
        self._max_memory = max_memory
        self._bytes = 0
        self.count = 0

    def append(self, point: Accepted) -> None:
        head = json.dumps([point.point_id, point.payload], ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        vector = point.vector.tobytes()
        record = self._HEAD.pack(len(head), len(vector)) + head + vector
        self._file.write(record)
        self._bytes += len(record)
        self.count += 1

    def batches(self, size: int) -> Iterator[list[tuple[str, dict[str, Any], list[float]]]]:
        """The points in the order they were appended, ``size`` at a time."""
        self._file.seek(0)
        batch: list[tuple[str, dict[str, Any], list[float]]] = []
        for _ in range(self.count):
            head_size, vector_size = self._HEAD.unpack(self._file.read(self._HEAD.size))
            point_id, payload = json.loads(self._file.read(head_size))
            vector = array("d")
            vector.frombytes(self._file.read(vector_size))
            batch.append((point_id, payload, vector.tolist()))
            if len(batch) == size:
                yield batch
                batch = []
        if batch:
            yield batch

    @property
    def on_disk(self) -> bool:
        """Whether the points outgrew memory (SpooledTemporaryFile rolls over past ``max_size``)."""
        return self._bytes > self._max_memory

    def fileno(self) -> int:
        """The descriptor of the temporary file (this moves a spool still in memory to disk)."""
        return self._file.fileno()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "PointSpool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BatchFailure(QmemError):
    """Batch ``failed`` of ``total`` could not be written; the ones before it (``written`` points) were."""

    category = "destination"

    def __init__(self, *, failed: int, total: int, written: int, cause: str) -> None:
        done = (f"batches 1-{failed - 1} ({written} points) were committed and stay"
                if failed > 1 else "no batch was committed")
        super().__init__(f"batch {failed} of {total} failed ({cause}); {done}; batch {failed} may be partly "
                         f"written; run the same --approve again to finish (it overwrites, never duplicates)")
        self.failed = failed
        self.total = total
        self.written = written


class PlanMismatch(QmemError):
    category = "plan"

    def __init__(self) -> None:
        super().__init__("source changed — run --dry-run again (nothing was written)")


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


def _import_request(ctx: AdminContext, args: Any) -> ImportRequest:
    """Every argument checked before any I/O (exit 2 on a bad one)."""
    if args.approve is not None and not _PLAN_ID.fullmatch(args.approve):
        raise UsageError("--approve needs the plan id the dry-run printed: 64 lowercase hex digits")
    if not 1 <= args.batch_size <= 1000:
        raise UsageError("--batch-size must be between 1 and 1000")
    url = _source_url_argument(args.source_url)
    collection = _name_argument(args.source_collection, "--source-collection", _NAME)
    destination = ctx.recall.qdrant_url
    if destination is not None and (endpoint_identity(url), collection) == (endpoint_identity(destination),
                                                                             ctx.recall.collection):
        raise UsageError("the source is the destination collection itself; import from the Hermes collection")
    project = _name_argument(args.project, "--project", _NAME) if args.project is not None else None
    if args.source_model is None:
        raise UsageError(f"declare the source's embedding model with --source-model (vectors are copied, not "
                         f"re-embedded, so it must be recall.embeddingModel, {ctx.recall.embedding_model!r})")
    model = _name_argument(args.source_model, "--source-model", _MODEL)
    return ImportRequest(source_url=url, source_collection=collection, profile=args.profile,
                         target_host=args.target_host, project=project, declared_model=model,
                         approve=args.approve, batch_size=args.batch_size)


def _check_destination(destination: AdminQdrant, recall: RecallConfig) -> None:
    layout = destination.collection_info()
    if layout is None:
        raise QmemError(f"the destination collection {recall.collection} does not exist; run "
                        f"`python3 -m qmem.admin init` first", category="destination")
    problems = layout_problems(layout, recall)
    if problems:
        raise QmemError(f"the destination collection {recall.collection} does not match the configuration: "
                        f"{'; '.join(problems)}", category="destination")


def _source_layout(source: SourceProjection, request: ImportRequest) -> CollectionLayout:
    layout = source.collection_info()
    if layout is None:
        raise QmemError(f"the source collection {request.source_collection} does not exist", category="source")
    return layout


def _plan_inputs(layout: CollectionLayout, request: ImportRequest, recall: RecallConfig) -> PlanInputs:
    """The plan's inputs, once the source collection is known to fit the profile and the destination."""
    profile = PROFILES[request.profile]
    vector = layout.vectors.get(profile.vector_name)
    if vector is None:
        other = next(name for name in PROFILES if name != profile.name)
        expected = f"a vector named {profile.vector_name!r}" if profile.vector_name else "one unnamed vector"
        raise QmemError(f"the source collection {request.source_collection} does not have {expected} as profile "
                        f"{profile.name} expects (is it --profile {other}?)", category="contract")
    inputs = PlanInputs(
        profile=request.profile, target_host=request.target_host, project=request.project,
        source_endpoint=endpoint_identity(request.source_url), source_collection=request.source_collection,
        source_dimension=vector.dimension, source_distance=vector.distance,
        destination_collection=recall.collection, destination_dimension=recall.dimension,
        destination_distance=recall.distance, destination_vector_name=recall.vector_name,
        configured_model=recall.embedding_model, declared_model=request.declared_model)
    problems = compatibility_problems(inputs)
    if problems:
        raise QmemError(f"vectors cannot be copied from this source: {'; '.join(problems)}; nothing was planned",
                        category="contract")
    return inputs


def page_size_for(dimension: int) -> int:
    """Points per scroll page: whole vectors travel in each, so fewer of them when they are long."""
    return max(1, min(MAX_PAGE_POINTS, PAGE_TARGET_BYTES // (dimension * 24)))


def read_source(source: SourceProjection, inputs: PlanInputs, *, spool: PointSpool | None = None,
                progress: Callable[[int], None] | None = None) -> tuple[ImportReport, bytes]:
    """One complete read: every point normalized, counted, hashed (and spooled when given)."""
    profile = inputs.spec
    manifest = PlanManifest(inputs)
    report = ImportReport()
    for raw in source.points(vector_name=profile.vector_name, payload_fields=profile.requested_fields,
                             page_size=page_size_for(inputs.source_dimension)):
        outcome = normalize_point(raw, inputs)
        manifest.add(outcome)
        report.add(outcome)
        if spool is not None and isinstance(outcome, Accepted):
            spool.append(outcome)
        if progress is not None:
            progress(report.read)
    return report, manifest.finish()


def write_points(destination: AdminQdrant, spool: PointSpool, *, plan_id: str, vector_name: str | None,
                 batch_size: int, progress: Callable[[str], None]) -> int:
    """Upsert the spooled points in batches (``wait=true``); the number of batches written."""
    total = -(-spool.count // batch_size)
    written = 0
    for number, batch in enumerate(spool.batches(batch_size), 1):
        points = [{"id": point_id, "vector": {vector_name: vector} if vector_name else vector,
                   "payload": {**payload, "import_run_id": plan_id}} for point_id, payload, vector in batch]
        try:
            destination.upsert(points)
        except AdminQdrantError as exc:
            raise BatchFailure(failed=number, total=total, written=written, cause=exc.message) from None
        written += len(points)
        progress(f"batch {number}/{total} committed ({written}/{spool.count} points)")
    return total


def _import_document(inputs: PlanInputs, report: ImportReport, plan_id: str, mode: str) -> dict[str, Any]:
    return {
        "mode": mode,
        "plan_id": plan_id,
        "profile": inputs.profile,
        "target_host": inputs.target_host,
        "project": inputs.project,
        "source": {"collection": inputs.source_collection, "dimension": inputs.source_dimension,
                   "distance": inputs.source_distance, "vector_name": inputs.spec.vector_name,
                   "model": inputs.declared_model},
        "destination": {"collection": inputs.destination_collection, "dimension": inputs.destination_dimension,
                        "distance": inputs.destination_distance, "vector_name": inputs.destination_vector_name},
        "counts": report.to_json(),
        "written": 0,
    }


def render_counts(inputs: PlanInputs, report: ImportReport) -> str:
    skipped = sum(report.skipped.values())
    rejected = sum(report.rejected.values())
    line = (f"read {report.read} points from {inputs.source_collection} ({inputs.profile}): "
            f"{report.accepted} accepted, {rejected} rejected")
    if skipped:
        line += f", {skipped} skipped (identity point)"
    if rejected:
        line += "\nrejected: " + ", ".join(f"{reason} {count}" for reason, count in sorted(report.rejected.items()))
    return line


def _cmd_import(ctx: AdminContext, args: Any) -> tuple[dict[str, Any], str]:
    request = _import_request(ctx, args)
    recall = ctx.recall
    destination = ctx.destination()
    source = ctx.source(request.source_url, request.source_collection)
    spool = PointSpool() if request.approve is not None else None
    try:
        _check_destination(destination, recall)
        layout = _source_layout(source, request)
        inputs = _plan_inputs(layout, request, recall)
        reading = Progress("reading the source")  # a terminal-only counter; the output stays as documented
        try:
            report, digest = read_source(source, inputs, spool=spool,
                                         progress=lambda done: reading(done, max(done, layout.points or 0)))
        finally:
            reading.finish()
        plan_id = digest.hex()
        counts = render_counts(inputs, report)
        if spool is None:
            document = _import_document(inputs, report, plan_id, "dry-run")
            target = f"{recall.collection} for {inputs.target_host}" + (
                f", project {inputs.project}" if inputs.project else "")
            return document, (f"dry-run: nothing was written.\n{counts}\nplan id: {plan_id}\n"
                              f"To write these {report.accepted} points into {target}, run the same command "
                              f"with --approve {plan_id} instead of --dry-run.")
        assert request.approve is not None
        if not hmac.compare_digest(bytes.fromhex(request.approve), digest):
            raise PlanMismatch()
        ctx.progress(f"plan {plan_id[:12]}… matches; writing {spool.count} points "
                     f"in batches of {request.batch_size}")
        batches = write_points(destination, spool, plan_id=plan_id, vector_name=recall.vector_name,
                               batch_size=request.batch_size, progress=ctx.progress)
        document = _import_document(inputs, report, plan_id, "apply")
        document.update(written=spool.count, batches={"size": request.batch_size, "total": batches,
                                                      "committed": batches})
        return document, (f"{counts}\nwrote {spool.count} points into {recall.collection} in {batches} "
                          f"batch{'es' if batches != 1 else ''}; import_run_id {plan_id}")
    finally:
        if spool is not None:
            spool.close()
        source.close()
        destination.close()


# --- running -------------------------------------------------------------------------------------

_COMMANDS = {"init": _cmd_init, "status": _cmd_status, "import-hermes": _cmd_import}


def _stderr_progress(line: str) -> None:
    sys.stderr.write(f"{PROG}: {line}\n")
    sys.stderr.flush()


def _error_document(exc: QmemError) -> dict[str, Any]:
    document: dict[str, Any] = {"error": {"category": exc.category, "message": exc.message}}
    if isinstance(exc, (_InitMismatch, _StatusProblems)):
        document = {**exc.document, **document}
    elif isinstance(exc, BatchFailure):
        document.update(written=exc.written, batches={"total": exc.total, "committed": exc.failed - 1,
                                                      "failed": exc.failed})
    elif isinstance(exc, PlanMismatch):
        document["written"] = 0
    return document


def run(argv: Sequence[str], *, env: Mapping[str, str] | None = None,
        progress: Callable[[str], None] | None = None) -> Outcome:
    """Run one command line and return what it produced; never raises for user errors."""
    env = os.environ if env is None else env
    argv = list(argv)
    bad = undecodable_argument(argv)
    if bad is not None:
        return error_outcome(EXIT_ERROR, "input", bad, as_json=wants_json(argv))
    try:
        args = build_parser().parse_args(argv)
    except HelpRequested as help_text:
        return Outcome(stdout=str(help_text))
    except UsageError as exc:
        return error_outcome(EXIT_USAGE, "usage", str(exc), as_json=wants_json(argv))
    runtime: Runtime | None = None
    try:
        runtime = Runtime(env)
        ctx = AdminContext(runtime=runtime, progress=progress or _stderr_progress)
        document, text = _COMMANDS[args.command](ctx, args)
    except UsageError as exc:
        return error_outcome(EXIT_USAGE, "usage", str(exc), as_json=args.json)
    except QmemError as exc:
        if args.json:
            stdout = to_json_text(_error_document(exc))
        else:
            stdout = exc.text if isinstance(exc, _StatusProblems) else ""
        return Outcome(code=EXIT_ERROR, error=exc.message, stdout=stdout, json=args.json)
    finally:
        if runtime is not None:
            runtime.close()
    return Outcome(stdout=to_json_text(document) if args.json else text, json=args.json)


def main(argv: Sequence[str] | None = None) -> int:
    if sys.stderr.isatty():
        set_wait_observer(WaitLine(sys.stderr))
    return emit(run(sys.argv[1:] if argv is None else argv), PROG)


if __name__ == "__main__":
    sys.exit(main())
