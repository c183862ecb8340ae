"""``status``: a read-only look at everything the admin and runtime lanes depend on.

:func:`run_status` reports the destination collection (admin key), a Hermes source when
one is given (source key), runtime health with the runtime's read-only key (``/healthz``
and the collection readable), the breakers of the gateway, Qdrant and embeddings URLs,
and the local index if its file exists (it is never created).  It writes nothing, and
when anything checked is unhealthy it raises :class:`StatusProblems` carrying the whole
report, so that the report is printed and the exit status is 1.  Warnings
(:mod:`qmem.secretscan.audit`: the admin key reused for the runtime or the source, a config
value that looks like a credential, such a config readable by others) are reported and do
not change the exit status.  No string the credential scanner flags is printed: a collection
named like a token is shown as ``[redacted: <family>]``.
"""

from __future__ import annotations

from .. import config as config_mod
from ..clients.qdrant import QdrantError, ReadOnlyQdrant
from ..config import RecallConfig
from ..errors import QmemError
from ..localindex import LocalIndex
from ..secretscan.audit import audit, hide_flagged
from .args import status_source
from .context import AdminContext, key_state
from .create import layout_problems
from .hermespoint import PROFILES
from .qdrant import AdminQdrant, CollectionLayout, SourceProjection
from .render import render_status

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["StatusProblems", "run_status"]


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
    report: dict[str, Any] = {"collection": ctx.recall.collection, "key": key_state("admin_qdrant", ctx.env)}
    layout, reached = _read_layout(ctx.destination())
    if not reached["reachable"]:
        return {**report, **reached}
    if layout is None:
        return {**report, "reachable": True, "exists": False,
                "problems": ["the collection does not exist; run `python3 -m qmem.admin init`"]}
    return {**report, "reachable": True, **_describe_layout(layout, ctx.recall.vector_name),
            "problems": layout_problems(layout, ctx.recall)}


def _source_status(ctx: AdminContext, url: str, collection: str) -> dict[str, Any]:
    report: dict[str, Any] = {"checked": True, "collection": collection, "key": key_state("source_qdrant", ctx.env)}
    layout, reached = _read_layout(ctx.source(url, collection))
    if not reached["reachable"]:
        return {**report, **reached}
    if layout is None:
        return {**report, "reachable": True, "exists": False, "problems": ["the source collection does not exist"]}
    recall = ctx.recall
    fits = [name for name, profile in PROFILES.items()
            if _fits(layout.vectors.get(profile.vector_name), recall)]
    described = _describe_layout(layout, PROFILES["qdrant-memory"].vector_name if layout.named else None)
    return {**report, "reachable": True, **described, "importable_as": fits, "problems": []}


def _fits(vector: Any, recall: RecallConfig) -> bool:
    return vector is not None and vector.dimension == recall.dimension and vector.distance == recall.distance


def _runtime_status(ctx: AdminContext) -> dict[str, Any]:
    recall = ctx.recall
    report: dict[str, Any] = {"recall_enabled": recall.active, "key": key_state("qdrant", ctx.env)}
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


class StatusProblems(QmemError):
    """Something checked is unhealthy: ``document`` and ``text`` are the whole report, still printed."""

    category = "status"

    def __init__(self, problems: list[str], document: dict[str, Any], text: str) -> None:
        super().__init__(f"status: {', '.join(problems)}")
        self.document = document
        self.text = text


def run_status(ctx: AdminContext, args: Any) -> tuple[dict[str, Any], str]:
    """``status``: the JSON document and its text (raises :class:`StatusProblems` when unhealthy)."""
    checked = status_source(args)
    source: dict[str, Any] = {"checked": False}
    if checked is not None:
        source = _source_status(ctx, *checked)
    document: dict[str, Any] = {
        "destination": _destination_status(ctx),
        "source": source,
        "runtime": _runtime_status(ctx),
        "breakers": _breaker_status(ctx),
        "local_index": _local_index_status(ctx),
    }
    problems = _status_problems(document)
    document["ok"] = not problems
    document["warnings"] = audit(ctx.env)
    document = hide_flagged(document)
    text = render_status(document)
    if problems:
        raise StatusProblems(problems, document, text)
    return document, text
