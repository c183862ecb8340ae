"""The recall lane: curated memories from Qdrant, as untrusted background, never persisted.

Promises (seed 000 is the specification; DESIGN §5, §7, §8):

* **Eligibility is exact** (:func:`is_eligible`): ``host`` = the current host, ``status`` =
  ``"active"``, ``secret_scan`` = ``"passed"``, a non-empty string ``text``, well-formed
  provenance (``source_type``, ``source_collection``, ``source_id``, ``import_run_id`` = 64
  lowercase hex, ``transform_version``, ``created_at`` RFC 3339), bounded ``tags``.  The
  filters (:func:`lane_filter`) are built here — the project lane requires ``project`` =
  the current project, the host lane excludes it — and every returned payload is checked
  again, so a server that ignores the filter cannot leak a record.  A model's arguments
  change only the query text and a bounded limit.
* **Gating** (:func:`auto_recall_gate`): the host must be identified by the adapter as
  ``pi`` or ``prime``; a Prime session with ``rlmDepth > 0`` gets no automatic recall; a
  missing depth counts as root only for Prime; anything invalid or ambiguous turns
  automatic recall off rather than guessing.
* **Auto-recall** (:meth:`Recall.context`) is a pure transform of the host's context
  messages: a new list without earlier qmem recall messages (custom type
  :data:`RECALL_CUSTOM_TYPE`) plus at most one fresh block; the input is never mutated.
  :meth:`Recall.auto_recall` gives the same block alone, for a host that places it itself.
  Results are cached per (host, project, prompt), so a prompt costs one embedding and at
  most two searches however many tool-loop turns follow — failures are cached too.  A
  per-turn time budget bounds the work; cancellation is honoured between steps.
* **Fail-open**: no failure aborts the turn or reaches the model's context.  The first
  failure of each category produces a fixed, redacted warning; repeats are silent.
  Breakers on Qdrant and on the embeddings service make a dead service cost ~0 ms.
* Nothing here writes to a session file, the local index or Qdrant, and a prompt or query
  in which the credential scanner finds something is never sent to the embeddings service.
  :class:`Recall` is given a :class:`~qmem.hosts.recallservices.RecallServices` handle (settings,
  its two credentials, breakers, warnings), never the runtime: this lane cannot reach the
  local index, the outbox or the gateway, and imports none of them.
* Off until configured: with no ``recall.qdrantUrl`` and ``recall.embeddingsUrl`` in the
  config, nothing is sent anywhere and nothing is said about recall.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path

from .clients.embeddings import EmbeddingError, EmbeddingsClient
from .clients.qdrant import CollectionInfo, QdrantError, ReadOnlyQdrant, ScoredPoint
from .config import RecallConfig, credential_variable
from .diagnostics import SENTENCES
from .errors import InputError, QmemError
from .fence.memorycontext import Excerpt, render_block, unique_excerpts
from .hosts.recallservices import RecallServices
from .records import check_unicode, credential_findings, describe_credentials, parse_rfc3339
from .valueclass import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = ["Recall", "recall_patch", "MAX_PROMPT_CHARS"]

#: The private custom type of qmem's recall message in a host's context.
RECALL_CUSTOM_TYPE = "qmem:recall"
HOSTS = ("pi", "prime")
LANES = ("project", "host")
MAX_PROMPT_CHARS = 2_000
MEMORY_SEARCH_MAX_LIMIT = 10
CACHE_ENTRIES = 64

#: RecallError categories of a refused key -> the credential role, and how a message names the service.
_KEY_ROLES = {"qdrant_key": "qdrant", "embedding_key": "embedding"}
_KEY_SERVICES = {"qdrant": "Qdrant", "embedding": "the embeddings service"}

_HEX64 = re.compile(r"[0-9a-f]{64}")
_MAX_FIELD = 256
_MAX_TAGS = 32


class RecallError(QmemError):
    """A recall failure; ``category`` is one of the warning categories."""


# --- gating, project, filters, eligibility (pure) ------------------------------------------

def auto_recall_gate(host: object, rlm_depth: object, *, depth_given: bool) -> tuple[bool, str | None]:
    """(allowed, warning category) for automatic recall in this session.

    ``depth_given`` says whether the session header carried ``rlmDepth`` at all.
    """
    if host not in HOSTS:
        return False, "host"
    if not depth_given:
        return True, None  # pi has no depth; a Prime session without one is the root
    if isinstance(rlm_depth, bool) or not isinstance(rlm_depth, int) or rlm_depth < 0:
        return False, "host"  # invalid: do not guess
    if host == "pi":
        return False, "host"  # pi never writes rlmDepth: a header with one is ambiguous
    return rlm_depth == 0, None


def current_project(cwd: Path, configured: str | None = None) -> str:
    """The project recall scopes to: ``recall.project`` if set, else the name of the git
    top-level directory containing ``cwd`` (found by looking for ``.git`` upwards), else the
    name of ``cwd`` itself.

    Broader than :func:`qmem.hosts.rules.project_suggestion` on purpose: a scope that names no real
    project only splits recall into two lanes that find nothing more or less, while a
    ``project_id`` the rules suggest is written into records, so it must be a real project."""
    if configured:
        return configured
    path = Path(cwd).resolve()
    for candidate in (path, *path.parents):
        if (candidate / ".git").exists():
            return candidate.name or str(candidate)
    return path.name or "/"


def lane_filter(host: str, project: str, lane: str) -> dict[str, Any]:
    """The Qdrant filter of a lane; built only here, from the host and the project."""
    must: list[dict[str, Any]] = [
        {"key": "host", "match": {"value": host}},
        {"key": "status", "match": {"value": "active"}},
        {"key": "secret_scan", "match": {"value": "passed"}},
    ]
    if lane == "project":
        return {"must": must + [{"key": "project", "match": {"value": project}}]}
    if lane == "host":
        return {"must": must, "must_not": [{"key": "project", "match": {"value": project}}]}
    raise ValueError("unknown lane")


def _short_string(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= _MAX_FIELD and value.strip() == value


def is_eligible(payload: Mapping[str, Any], *, host: str, project: str, lane: str) -> bool:
    """True when ``payload`` passes DESIGN §7 exactly, for ``lane``."""
    if payload.get("host") != host or payload.get("status") != "active" or payload.get("secret_scan") != "passed":
        return False
    text = payload.get("text")
    if not isinstance(text, str) or not text.strip():
        return False
    for name in ("source_type", "source_collection", "transform_version"):
        if not _short_string(payload.get(name)):
            return False
    source_id = payload.get("source_id")
    if not (_short_string(source_id) or (isinstance(source_id, int) and not isinstance(source_id, bool)
                                         and source_id >= 0)):
        return False
    run = payload.get("import_run_id")
    if not isinstance(run, str) or not _HEX64.fullmatch(run):
        return False
    created = payload.get("created_at")
    if not isinstance(created, str) or parse_rfc3339(created) is None:
        return False
    tags = payload.get("tags")
    if tags is not None and not (isinstance(tags, list) and len(tags) <= _MAX_TAGS
                                 and all(isinstance(t, str) and 0 < len(t) <= 64 for t in tags)):
        return False
    item_project = payload.get("project")
    if item_project is not None and not isinstance(item_project, str):
        return False
    if lane == "project":
        return item_project == project
    return item_project != project


def _excerpt(point: ScoredPoint, lane: str) -> Excerpt:
    payload = point.payload
    source = f"{payload.get('source_type')}:{payload.get('source_collection')}"
    return Excerpt(id=point.id, text=payload["text"], lane=lane, score=point.score, source=source,
                   created=str(payload.get("created_at")))


# --- the host's message array (pure) ------------------------------------------------------

def _is_recall_message(message: Any) -> bool:
    return isinstance(message, Mapping) and message.get("customType") == RECALL_CUSTOM_TYPE


def without_recall(messages: Sequence[Any]) -> list[Any]:
    """A new list without qmem's earlier recall messages (the input is not touched)."""
    return [message for message in messages if not _is_recall_message(message)]


def with_recall(messages: Sequence[Any], block: str | None, *, now_ms: int | None = None) -> list[Any]:
    """A new list: earlier recall messages removed, then ``block`` appended as one custom message."""
    out = without_recall(messages)
    if block:
        out.append({"role": "custom", "customType": RECALL_CUSTOM_TYPE, "content": block, "display": False,
                    "timestamp": now_ms if now_ms is not None else int(time.time() * 1000)})
    return out


def recall_patch(messages: Sequence[Any], transformed: Sequence[Any]) -> dict[str, Any]:
    """``transformed`` (an output of :func:`with_recall` on ``messages``) as a patch:
    ``{"drop": [indices of earlier recall messages], "append": the new block message or None}``.
    Applying it to ``messages`` gives ``transformed``; adapters send this instead of the array."""
    drop = [index for index, message in enumerate(messages) if _is_recall_message(message)]
    append = transformed[-1] if transformed and _is_recall_message(transformed[-1]) else None
    return {"drop": drop, "append": append}


def prompt_of(messages: Sequence[Any]) -> str | None:
    """The text of the last user message (the current prompt), bounded; None if there is none."""
    for message in reversed(messages):
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            text = content
        elif isinstance(content, list):
            text = "\n".join(part.get("text", "") for part in content
                             if isinstance(part, Mapping) and part.get("type") == "text"
                             and isinstance(part.get("text"), str))
        else:
            continue
        text = text.strip()
        return text[:MAX_PROMPT_CHARS] if text else None
    return None


def _sendable(prompt: str) -> bool:
    """A prompt may go to the embeddings service: valid Unicode, and no credential in it."""
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError:
        return False
    from .secretscan.engine import scan  # here, not at the top: with the first prompt, not at Hermes' start

    return not scan(prompt)


# --- the service ---------------------------------------------------------------------------

@dataclass(frozen=True)
class RecallSettings:
    host: str | None
    project: str
    config: RecallConfig


class Recall:
    """Recall for one host session.  ``host`` comes from the adapter, never from a model."""

    def __init__(self, services: RecallServices, *, host: str | None, cwd: Path | None = None) -> None:
        if not isinstance(services, RecallServices):  # above all not the Runtime, which can write the index
            raise TypeError(f"Recall needs a RecallServices handle, not {type(services).__name__}")
        self.services = services
        cfg = services.config
        self.settings = RecallSettings(host=host if host in HOSTS else None,
                                       project=current_project(cwd or Path.cwd(), cfg.project), config=cfg)
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, str, str], str | None] = OrderedDict()
        self._qdrant: ReadOnlyQdrant | None = None
        self._embeddings: EmbeddingsClient | None = None
        self._collection: CollectionInfo | None = None
        self.upstream_calls = {"embedding": 0, "search": 0}  # for tests and benchmarks

    def close(self) -> None:
        for client in (self._qdrant, self._embeddings):
            if client is not None:
                client.close()

    # -- clients, built on first use

    def _clients(self) -> tuple[ReadOnlyQdrant, EmbeddingsClient]:
        cfg = self.settings.config
        timeout = cfg.timeout_ms / 1000
        assert cfg.qdrant_url is not None and cfg.embeddings_url is not None  # search() checked
        if self._qdrant is None:
            self._qdrant = ReadOnlyQdrant(cfg.qdrant_url, cfg.collection,
                                          api_key=self.services.credential("qdrant"),
                                          search_endpoint=cfg.search_endpoint, timeout_s=timeout,
                                          breaker=self.services.breaker_for(cfg.qdrant_url))
        if self._embeddings is None:
            self._embeddings = EmbeddingsClient(cfg.embeddings_url, cfg.embedding_model,
                                                api_key=self.services.credential("embedding"),
                                                timeout_s=timeout,
                                                breaker=self.services.breaker_for(cfg.embeddings_url))
        return self._qdrant, self._embeddings

    # -- the pipeline

    def search(self, query: str, *, limit: int, cancel: threading.Event | None = None) -> list[Excerpt]:
        """Embed ``query``, search both lanes, keep only eligible points.  Raises RecallError."""
        host = self.settings.host
        if not self.settings.config.configured:
            raise RecallError("recall is not configured", category="recall_not_configured")
        if host is None:
            raise RecallError("the host is not identified as pi or prime", category="host")
        if not self.settings.config.enabled:
            raise RecallError("recall is disabled in the configuration", category="recall_disabled")
        deadline = time.monotonic() + self.settings.config.timeout_ms / 1000

        def budget() -> float:
            if cancel is not None and cancel.is_set():
                raise RecallError("cancelled", category="cancellation")
            left = deadline - time.monotonic()
            if left <= 0:
                raise RecallError("out of time", category="timeout")
            return left

        try:
            qdrant, embeddings = self._clients()
            self.upstream_calls["embedding"] += 1
            vector = embeddings.embed(query, budget=budget(), cancel=cancel)
            if self._collection is None:
                self._collection = qdrant.collection_info(self.settings.config.vector_name, budget=budget(),
                                                          cancel=cancel)
            if len(vector) != self._collection.dimension:
                raise RecallError("the embedding dimension differs from the collection's", category="configuration")
            excerpts: list[Excerpt] = []
            for lane in LANES:
                query_filter = lane_filter(host, self.settings.project, lane)
                self.upstream_calls["search"] += 1
                points = qdrant.search(vector, query_filter=query_filter, limit=limit,
                                       vector_name=self._collection.vector_name, budget=budget(),
                                       cancel=cancel)
                excerpts += [_excerpt(p, lane) for p in sorted(points, key=lambda p: -p.score)
                             if is_eligible(p.payload, host=host, project=self.settings.project, lane=lane)]
            budget()
        except (QdrantError, EmbeddingError) as exc:
            if exc.category == "refused_key":  # which service refused: memory_search names its variable
                raise RecallError(exc.message, category="qdrant_key" if isinstance(exc, QdrantError)
                                  else "embedding_key") from None
            raise RecallError(exc.message, category=exc.category) from None
        return unique_excerpts(excerpts)[:limit]

    def block_for(self, query: str, *, limit: int, cancel: threading.Event | None = None) -> str | None:
        """The rendered block for ``query`` (None when nothing eligible was found)."""
        excerpts = self.search(query, limit=limit, cancel=cancel)
        try:
            return render_block(excerpts, max_chars=self.settings.config.max_chars)
        except Exception as exc:  # rendering is pure; a failure here is a bug, reported as "formatting"
            raise RecallError(f"formatting failed ({exc.__class__.__name__})", category="formatting") from None

    def context(self, messages: Sequence[Any], *, rlm_depth: object = None, depth_given: bool = False,
                cancel: threading.Event | None = None) -> list[Any]:
        """The host's context hook: the messages for this LLM call, with at most one recall block."""
        try:
            if not self._allowed(rlm_depth, depth_given):
                return without_recall(messages)
            prompt = prompt_of(messages)
            return with_recall(messages, None if prompt is None else self._recalled(prompt, cancel))
        except Exception:  # fail open: whatever happened, the turn goes on without memory
            self.services.warnings.warn("retrieval")
            return without_recall(messages) if isinstance(messages, (list, tuple)) else list(messages or [])

    def auto_recall(self, prompt: str | None, *, rlm_depth: object = None, depth_given: bool = False,
                    cancel: threading.Event | None = None) -> str | None:
        """Automatic recall for a host that places the block itself: the block for ``prompt``,
        or None (nothing to add).  The same gate, cache and warnings as :meth:`context`; never raises."""
        try:
            if not self._allowed(rlm_depth, depth_given) or prompt is None:
                return None
            return self._recalled(prompt, cancel)
        except Exception:  # fail open, as context() does
            self.services.warnings.warn("retrieval")
            return None

    def _allowed(self, rlm_depth: object, depth_given: bool) -> bool:
        """Whether automatic recall runs for this call (warns once when the host is in doubt)."""
        if not self.settings.config.active:
            return False  # off or not configured: nothing sent, nothing said
        allowed, warning = auto_recall_gate(self.settings.host, rlm_depth, depth_given=depth_given)
        if warning:
            self.services.warnings.warn(warning)
        return allowed

    def _recalled(self, prompt: str, cancel: threading.Event | None) -> str | None:
        """The block for ``prompt``, cached per (host, project, prompt); failures warn and give None."""
        key = (self.settings.host or "", self.settings.project, prompt)
        with self._lock:
            cached = key in self._cache
            block = self._cache.get(key)
            if cached:
                self._cache.move_to_end(key)
        if cached:
            return block
        if not _sendable(prompt):
            block = None  # cached like any answer: the prompt is scanned once, not on every tool-loop turn
        else:
            try:
                block = self.block_for(prompt, limit=self.settings.config.limit, cancel=cancel)
            except RecallError as exc:
                self.services.warnings.warn(exc.category if exc.category in SENTENCES else "retrieval")
                if exc.category == "cancellation":
                    return None  # not cached: the next call may try again
                block = None
        with self._lock:
            self._cache[key] = block
            while len(self._cache) > CACHE_ENTRIES:
                self._cache.popitem(last=False)
        return block

    def _refused_key_message(self, role: str) -> str:
        """What memory_search says when a service refused (401/403): which variable, set or not;
        never its value nor the endpoint (``doctor`` shows those)."""
        service, variable = _KEY_SERVICES[role], credential_variable(role)
        if self.services.credential(role) is None:
            return (f"memory_search is unavailable: {service} wants an API key and {variable} is not set in this "
                    f"process's environment (an MCP client passes only the variables its server entry names: "
                    f"`python3 -m qmem.local mcp-config` prints one).")
        return (f"memory_search is unavailable: {service} refused the key in {variable}; "
                f"`python3 -m qmem.local doctor` checks it.")

    def memory_search(self, args: Mapping[str, Any], *, cancel: threading.Event | None = None) -> dict[str, Any]:
        """The ``memory_search`` tool: ``query`` and a bounded ``limit``; anything else is ignored.

        Returns ``{"text": block, "details": {...}}``; raises InputError for a bad query or
        limit, RecallError (with a fixed sentence) when recall is unavailable.
        """
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise InputError("query is required")
        query = check_unicode(query.strip()[:MAX_PROMPT_CHARS], "query")
        findings = credential_findings({"text": query})
        if findings:
            raise InputError(f"query not sent: {describe_credentials(findings)}")
        limit = args.get("limit", self.settings.config.limit)
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not math.isfinite(limit):
            raise InputError(f"limit must be a whole number (1 to {MEMORY_SEARCH_MAX_LIMIT})")
        limit = max(1, min(int(limit), MEMORY_SEARCH_MAX_LIMIT))
        try:
            excerpts = self.search(query, limit=limit, cancel=cancel)
            block = render_block(excerpts, max_chars=self.settings.config.max_chars)
        except RecallError as exc:
            if exc.category in _KEY_ROLES:
                raise RecallError(self._refused_key_message(_KEY_ROLES[exc.category]), category="credential") from None
            category = exc.category if exc.category in SENTENCES else "retrieval"
            raise RecallError(SENTENCES[category], category=category) from None
        details = {"qmem": 1, "recall": [{"id": e.id, "lane": e.lane, "score": e.score} for e in excerpts]}
        return {"text": block or "No eligible memories matched.", "details": details}
