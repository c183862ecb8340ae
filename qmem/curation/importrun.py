"""``import-hermes``: one read of a Hermes source planned, and an approved plan written exactly.

:func:`run_import` checks the destination (it must match what ``init`` creates) and the
source's contract, then :func:`read_source` reads the source once through a projection
that can only read, normalizing, counting and hashing every point.  A dry-run stops
there and writes nothing.  An approval repeats the read, compares the digest with the
plan id (:func:`hmac.compare_digest`) and, on a match, :func:`write_points` upserts
exactly the points that were hashed — kept in a :class:`PointSpool` while hashing, never
read from the source again — in batches with ``wait=true``, reporting progress and, if a
batch fails, which ones committed (:class:`BatchFailure`).  A source that changed since
the dry-run writes nothing (:class:`PlanMismatch`).
"""

from __future__ import annotations

import hmac
import json
import struct
import tempfile
from array import array

from ..cli.frontend import Progress
from ..config import RecallConfig
from ..errors import QmemError
from .args import ImportRequest, import_request
from .context import AdminContext
from .create import layout_problems
from .hermespoint import PROFILES, Accepted, destination_payload, normalize_point
from .plan import ImportReport, PlanInputs, PlanManifest, compatibility_problems, endpoint_identity
from .qdrant import AdminQdrant, AdminQdrantError, CollectionLayout, SourceProjection
from .render import render_import

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

__all__ = ["BatchFailure", "PlanMismatch", "run_import"]

#: Accepted points stay in memory up to this size, then go to a private temporary file.
SPOOL_MEMORY_BYTES = 16 * 1024 * 1024
#: Scroll pages are sized to stay near this many bytes of JSON (about 24 bytes a number).
PAGE_TARGET_BYTES = 8_000_000
MAX_PAGE_POINTS = 256


class PointSpool:
    """The accepted points of one read, kept so that an approval writes exactly what was hashed.

    In memory up to ``max_memory`` bytes, then in an anonymous temporary file (mode 0600,
    unlinked at creation, gone when closed).  Each record is two little-endian lengths, the
    ``[id, payload]`` JSON and the vector's raw float64 bytes.
    """

    _HEAD = struct.Struct("<II")

    def __init__(self, max_memory: int = SPOOL_MEMORY_BYTES) -> None:
        self._file = tempfile.SpooledTemporaryFile(max_size=max_memory, mode="w+b")
        self.count = 0

    def append(self, point: Accepted) -> None:
        head = json.dumps([point.point_id, point.payload], ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        vector = point.vector.tobytes()
        record = self._HEAD.pack(len(head), len(vector)) + head + vector
        self._file.write(record)
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
                   "payload": destination_payload(payload, plan_id)} for point_id, payload, vector in batch]
        try:
            destination.upsert(points)
        except AdminQdrantError as exc:
            raise BatchFailure(failed=number, total=total, written=written, cause=exc.message) from None
        written += len(points)
        progress(f"batch {number}/{total} committed ({written}/{spool.count} points)")
    return total


def import_document(inputs: PlanInputs, report: ImportReport, plan_id: str, mode: str) -> dict[str, Any]:
    """``import-hermes``'s JSON answer before anything is written (``mode`` ``dry-run`` or ``apply``)."""
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


def run_import(ctx: AdminContext, args: Any) -> tuple[dict[str, Any], str]:
    """``import-hermes``: a dry-run's plan, or an approved plan written; the JSON document and its text."""
    request = import_request(args, ctx.recall)
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
        if spool is None:
            document = import_document(inputs, report, plan_id, "dry-run")
            return document, render_import(document)
        assert request.approve is not None
        if not hmac.compare_digest(bytes.fromhex(request.approve), digest):
            raise PlanMismatch()
        ctx.progress(f"plan {plan_id[:12]}… matches; writing {spool.count} points "
                     f"in batches of {request.batch_size}")
        batches = write_points(destination, spool, plan_id=plan_id, vector_name=recall.vector_name,
                               batch_size=request.batch_size, progress=ctx.progress)
        document = import_document(inputs, report, plan_id, "apply")
        document.update(written=spool.count, batches={"size": request.batch_size, "total": batches,
                                                      "committed": batches})
        return document, render_import(document)
    finally:
        if spool is not None:
            spool.close()
        source.close()
        destination.close()
