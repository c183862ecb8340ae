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
  Results are kept per (host, project, prompt), so a prompt costs one embedding and one
  search per lane however many tool-loop turns follow — failures are kept too.
* **Never holds up a turn.**  A prompt's recall runs in the background (:meth:`Recall.start`,
  at the first host event that surely carries the prompt, else at its first request), bounded by
  ``recall.timeoutMs``: one embedding, then the two lane searches at once.  The requests of a
  prompt together wait at most ``recall.waitMs`` for it (name resolution and connecting
  happen in the background too); a request that stops waiting goes on without a block and
  without a word in the context, and the block, once ready, joins the next request of the
  same prompt.  A new prompt never gets an older prompt's block: blocks are keyed by prompt.
  A call slower than ``waitMs`` counts toward its service's breaker like a failure, so a
  service that answers too late to help stops being asked.  Each recall's outcome goes to
  the recall log (:mod:`qmem.recalllog`, ids and numbers only).
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

from .breaker import Breaker
from .clients.embeddings import EmbeddingError, EmbeddingsClient
from .clients.qdrant import CollectionInfo, QdrantError, ReadOnlyQdrant, ScoredPoint
from .config import RecallConfig, credential_variable
from .diagnostics import SENTENCES
from .errors import InputError, QmemError
from .fence.memorycontext import Excerpt, render_block, unique_excerpts
from .hosts.recalljobs import RecallJob, run_together
from .hosts.recallservices import RecallServices
from .recalllog import entry as recall_log_entry
from .records import check_unicode, credential_findings, describe_credentials, parse_rfc3339
from .valueclass import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
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
    """A recall failure; ``category`` is one of the warning categories, or ``breaker_open``
    (nothing was sent), whose ``warning`` names the service that is down."""

    def __init__(self, message: str, *, category: str, warning: str | None = None) -> None:
        super().__init__(message, category=category)
        self.warning = warning or (category if category in SENTENCES else "retrieval")


def _late() -> RecallError:
    return RecallError("out of time", category="timeout")


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
        self._jobs: OrderedDict[tuple[str, str, str], RecallJob] = OrderedDict()
        self._closed = threading.Event()  # ends every background recall
        self._qdrant: ReadOnlyQdrant | None = None
        self._embeddings: EmbeddingsClient | None = None
        self._qdrant_breaker: Breaker | None = None
        self._collection: CollectionInfo | None = None
        self.upstream_calls = {"embedding": 0, "search": 0}  # for tests and benchmarks

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            jobs = list(self._jobs.values())
        for job in jobs:
            job.superseded = True
            self._settle(job)
        for client in (self._qdrant, self._embeddings):
            if client is not None:
                client.close()

    def wait_background(self, timeout: float) -> bool:
        """For shutdown and tests: wait until every background recall has ended; True if they did."""
        until = time.monotonic() + timeout
        with self._lock:
            jobs = list(self._jobs.values())
        return all(job.done.wait(max(until - time.monotonic(), 0)) for job in jobs)

    # -- clients, built on first use

    def _clients(self) -> tuple[ReadOnlyQdrant, EmbeddingsClient]:
        cfg = self.settings.config
        timeout = cfg.timeout_ms / 1000
        slow = cfg.wait_ms / 1000  # a call slower than a request may wait counts toward its breaker
        assert cfg.qdrant_url is not None and cfg.embeddings_url is not None  # search() checked
        with self._lock:  # two background recalls may start at once
            if self._qdrant is None:
                self._qdrant_breaker = self.services.breaker_for(cfg.qdrant_url)
                self._qdrant = ReadOnlyQdrant(cfg.qdrant_url, cfg.collection,
                                              api_key=self.services.credential("qdrant"),
                                              search_endpoint=cfg.search_endpoint, timeout_s=timeout,
                                              breaker=self._qdrant_breaker, slow_s=slow)
            if self._embeddings is None:
                self._embeddings = EmbeddingsClient(cfg.embeddings_url, cfg.embedding_model,
                                                    api_key=self.services.credential("embedding"),
                                                    timeout_s=timeout, slow_s=slow,
                                                    breaker=self.services.breaker_for(cfg.embeddings_url))
            return self._qdrant, self._embeddings

    # -- the pipeline

    def search(self, query: str, *, limit: int, cancel: threading.Event | None = None) -> list[Excerpt]:
        """Embed ``query``, search both lanes, keep only eligible points.  Raises RecallError."""
        return self._search_lanes(query, limit=limit, cancel=cancel)[0]

    def _search_lanes(self, query: str, *, limit: int,
                      cancel: threading.Event | None = None) -> tuple[list[Excerpt], dict[str, int]]:
        """(excerpts, eligible hits per lane).  One embedding, then the two lane searches at once
        (on the first prompt the collection's description is asked for beside them)."""
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

        project = self.settings.project
        try:
            qdrant, embeddings = self._clients()
            assert self._qdrant_breaker is not None
            state = self._qdrant_breaker.snapshot()["state"]
            if state == "open":  # no embedding for a search that cannot run
                raise RecallError("Qdrant is marked unreachable (circuit breaker open)", category="breaker_open",
                                  warning="retrieval")
            sequential = state != "closed"  # half-open: one call is the probe, the others wait for it
            self.upstream_calls["embedding"] += 1
            vector = embeddings.embed(query, budget=budget(), cancel=cancel)
            collection = self._collection
            expected = collection.dimension if collection is not None else self.settings.config.dimension
            if len(vector) != expected:  # before any search: a mismatch is a configuration error, not noise
                raise RecallError("the embedding dimension differs from the collection's", category="configuration")
            # Until the collection has answered once, the configured vector name is the guess.
            name = collection.vector_name if collection is not None else self.settings.config.vector_name

            def lane_call(lane: str, vector_name: str | None) -> Callable[[], list[ScoredPoint]]:
                return lambda: qdrant.search(vector, query_filter=lane_filter(host, project, lane), limit=limit,
                                             vector_name=vector_name, budget=budget(), cancel=cancel)

            calls = [lane_call(lane, name) for lane in LANES]
            if collection is None:
                calls.append(lambda: qdrant.collection_info(self.settings.config.vector_name, budget=budget(),
                                                            cancel=cancel))
            self.upstream_calls["search"] += len(LANES)
            results = run_together(calls, sequential=sequential, join_s=budget() + 1, late=_late())
            if collection is None:
                info, error = results.pop()
                if error is not None:
                    raise error
                self._collection = collection = info
            if len(vector) != collection.dimension:
                raise RecallError("the embedding dimension differs from the collection's", category="configuration")
            if collection.vector_name != name:  # a named vector the config does not name: once per session
                self.upstream_calls["search"] += len(LANES)
                results = run_together([lane_call(lane, collection.vector_name) for lane in LANES],
                                       sequential=sequential, join_s=budget() + 1, late=_late())
            excerpts: list[Excerpt] = []
            searched: dict[str, int] = {}
            for lane, (points, error) in zip(LANES, results):
                if error is not None:
                    raise error
                eligible = [_excerpt(p, lane) for p in sorted(points, key=lambda p: -p.score)
                            if is_eligible(p.payload, host=host, project=project, lane=lane)]
                searched[lane] = len(eligible)
                excerpts += eligible
            budget()
        except (QdrantError, EmbeddingError) as exc:
            if exc.category == "refused_key":  # which service refused: memory_search names its variable
                raise RecallError(exc.message, category="qdrant_key" if isinstance(exc, QdrantError)
                                  else "embedding_key") from None
            raise RecallError(exc.message, category=exc.category,
                              warning="embedding" if isinstance(exc, EmbeddingError) and exc.category == "breaker_open"
                              else None) from None
        return unique_excerpts(excerpts)[:limit], searched

    def block_for(self, query: str, *, limit: int, cancel: threading.Event | None = None) -> str | None:
        """The rendered block for ``query`` (None when nothing eligible was found)."""
        return self._render(self.search(query, limit=limit, cancel=cancel))

    def _render(self, excerpts: list[Excerpt]) -> str | None:
        try:
            return render_block(excerpts, max_chars=self.settings.config.max_chars)
        except Exception as exc:  # rendering is pure; a failure here is a bug, reported as "formatting"
            raise RecallError(f"formatting failed ({exc.__class__.__name__})", category="formatting") from None

    def context(self, messages: Sequence[Any], *, rlm_depth: object = None, depth_given: bool = False,
                cancel: threading.Event | None = None, began: float | None = None) -> list[Any]:
        """The host's context hook: the messages for this LLM call, with at most one recall block.
        ``began``: when the request started waiting (``time.monotonic()``), if before this call."""
        try:
            if not self._allowed(rlm_depth, depth_given):
                return without_recall(messages)
            prompt = prompt_of(messages)
            return with_recall(messages, None if prompt is None else self._recalled(prompt, cancel, began))
        except Exception:  # fail open: whatever happened, the turn goes on without memory
            self.services.warnings.warn("retrieval")
            return without_recall(messages) if isinstance(messages, (list, tuple)) else list(messages or [])

    def auto_recall(self, prompt: str | None, *, rlm_depth: object = None, depth_given: bool = False,
                    cancel: threading.Event | None = None, began: float | None = None) -> str | None:
        """Automatic recall for a host that places the block itself: the block for ``prompt``,
        or None (nothing to add).  The same gate, cache and warnings as :meth:`context`; never raises."""
        try:
            if not self._allowed(rlm_depth, depth_given) or prompt is None:
                return None
            return self._recalled(prompt, cancel, began)
        except Exception:  # fail open, as context() does
            self.services.warnings.warn("retrieval")
            return None

    def start(self, prompt: str | None, *, rlm_depth: object = None, depth_given: bool = False,
              warm_only: bool = False) -> None:
        """Begin the automatic recall of ``prompt`` in the background, at the first host event
        that carries it, so the prompt's first LLM request waits as little as possible.  The
        same gate as :meth:`context`; never raises, never waits.

        ``warm_only``: the event's text may never become the request's prompt (Prime runs
        ``before_agent_start`` for a sub-agent's completion notice too, which reaches the model
        as a custom message): do what costs nothing upstream — load the credential scanner and
        scan the text, build the clients — and leave the embedding to the request."""
        try:
            text = prompt.strip()[:MAX_PROMPT_CHARS] if isinstance(prompt, str) else ""
            if not text or not self._allowed(rlm_depth, depth_given):
                return
            if warm_only:
                threading.Thread(target=self._warm, args=(text,), name="qmem-recall-warm", daemon=True).start()
            else:
                self._job(text)  # the key prompt_of() gives the same prompt in the context hook
        except Exception:
            self.services.warnings.warn("retrieval")

    def _warm(self, text: str) -> None:
        try:
            self._clients()
            _sendable(text)  # the scanner's first use loads it: the request's recall starts without that
        except Exception:
            pass  # only a head start: the request's own recall says what is wrong

    def _allowed(self, rlm_depth: object, depth_given: bool) -> bool:
        """Whether automatic recall runs for this call (warns once when the host is in doubt)."""
        if not self.settings.config.active:
            return False  # off or not configured: nothing sent, nothing said
        allowed, warning = auto_recall_gate(self.settings.host, rlm_depth, depth_given=depth_given)
        if warning:
            self.services.warnings.warn(warning)
        return allowed

    # -- background recall and the wait budget

    def _job(self, prompt: str) -> RecallJob:
        """The job of ``prompt``, started now if there is none (one per (host, project, prompt))."""
        key = (self.settings.host or "", self.settings.project, prompt)
        evicted: list[RecallJob] = []
        with self._lock:
            job = self._jobs.get(key)
            if job is not None:
                self._jobs.move_to_end(key)
                return job
            for other in self._jobs.values():
                other.superseded = True  # a new prompt: the older ones get no further request
            job = self._jobs[key] = RecallJob(wait_left=self.settings.config.wait_ms / 1000)
            while len(self._jobs) > CACHE_ENTRIES:
                evicted.append(self._jobs.popitem(last=False)[1])
            older = [other for other in self._jobs.values() if other is not job]
        threading.Thread(target=self._run, args=(job, prompt), name="qmem-recall", daemon=True).start()
        for other in older + evicted:
            self._settle(other)
        return job

    def _run(self, job: RecallJob, prompt: str) -> None:
        """The background half: the whole recall, bounded by ``recall.timeoutMs``."""
        try:
            if not _sendable(prompt):
                job.outcome, job.category = "skipped", "credential"  # never sent: nothing to say either
            else:
                job.excerpts, job.searched = self._search_lanes(prompt, limit=self.settings.config.limit,
                                                                cancel=self._closed)
                job.block = self._render(job.excerpts)
                job.outcome = "found" if job.block else "none"
        except RecallError as exc:
            self.services.warnings.warn(exc.warning)
            job.block, job.category = None, exc.category
            job.outcome = "skipped" if exc.category == "breaker_open" else "failed"
        except Exception:  # a bug costs this prompt its recall, never the turn
            self.services.warnings.warn("retrieval")
            job.block, job.outcome, job.category = None, "failed", "internal"
        finally:
            with self._lock:
                job.total_ms = (time.monotonic() - job.started) * 1000
                job.finished = True
            self._settle(job)
            job.done.set()  # after the log line: whoever waited for the recall finds it logged

    def _recalled(self, prompt: str, cancel: threading.Event | None, began: float | None = None) -> str | None:
        """The block for ``prompt`` if it is ready within what is left of the prompt's wait budget
        (counted from ``began``: a first request also waited for this lane to load), else None: the
        recall goes on, and a later request of the same prompt gets its block."""
        job = self._job(prompt)
        with self._lock:
            left = job.wait_left
        began = time.monotonic() if began is None else began
        until = began + left
        while not job.done.is_set() and (cancel is None or not cancel.is_set()):
            remaining = until - time.monotonic()
            if remaining <= 0:
                break
            # A cancelled request stops waiting within 50 ms; the recall itself goes on.
            job.done.wait(remaining if cancel is None else min(remaining, 0.05))
        waited = time.monotonic() - began
        with self._lock:
            job.wait_left = max(job.wait_left - waited, 0.0)
            first = job.first_wait_ms is None
            if first:
                job.first_wait_ms = waited * 1000
        if not job.done.is_set():
            self._settle(job)  # an outcome without a block (none, failed…) is known now if the recall ended
            return None
        self._settle(job, delivered="delivered" if first else "late")
        return job.block

    def _settle(self, job: RecallJob, *, delivered: str | None = None) -> None:
        """Write the job's line in the recall log once its outcome is known (see :mod:`qmem.recalllog`)."""
        log = self.services.log
        with self._lock:
            if job.logged or not job.finished or job.first_wait_ms is None:
                return  # still running, or no request has asked yet: the outcome is not known
            if job.outcome == "found":
                if delivered is None and not job.superseded:
                    return  # ready, and a later request of the prompt may still take it
                outcome = delivered or "lost"
            else:
                outcome = job.outcome
            job.logged = True
        if log is None:
            return
        hits = [(e.id, e.lane, e.score) for e in job.excerpts] if outcome in ("delivered", "late", "lost") else []
        log.append(recall_log_entry(host=self.settings.host, outcome=outcome, category=job.category, hits=hits,
                                    searched=job.searched, chars=len(job.block or "") if hits else 0,
                                    wait_ms=job.first_wait_ms or 0.0, total_ms=job.total_ms))

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
            raise RecallError(SENTENCES[exc.warning], category=exc.warning) from None
        details = {"qmem": 1, "recall": [{"id": e.id, "lane": e.lane, "score": e.score} for e in excerpts]}
        return {"text": block or "No eligible memories matched.", "details": details}
