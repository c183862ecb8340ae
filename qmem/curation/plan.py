"""The plan of a Hermes import: what shapes one run, and the plan id that covers all of it.

``python3 -m qmem.admin import-hermes`` builds one :class:`PlanInputs` from its arguments,
the source collection and the ``recall`` section, then feeds every outcome of
:func:`qmem.curation.hermespoint.normalize_point` to a :class:`PlanManifest` and an
:class:`ImportReport`.  Everything here is pure (no I/O); nothing on the runtime path
imports it.

What it promises.

* **Compatibility** (:func:`compatibility_problems`): vectors are copied, not re-embedded,
  so the source's dimension and distance must be the destination's and the declared source
  model must be ``recall.embeddingModel``.
* **The source's identity** (:func:`endpoint_identity`) is ``scheme://host:port/path``,
  nothing secret; :func:`validate_source_url` refuses a URL with anything that looks like a
  credential, without echoing it.
* **The plan id** is the SHA-256 of one RFC 8785 canonical JSON document (layout in
  :func:`manifest_document`): the inputs as a header, then one entry per point read, in
  scroll order.  :class:`PlanManifest` hashes it as it streams by, so memory stays bounded
  however many points the source has, and any change to an input, a payload or one bit of
  a vector changes the id.

Decisions, and why.

* **RFC 8785 holds for the whole document at C speed.** :class:`PlanManifest` writes each
  entry as canonical bytes whose last member is the ``"vector"`` string (base64 of the
  float64 bytes, :data:`qmem.curation.hermespoint.VECTOR_ENCODING`: base64 needs no escaping, and
  ``vector`` sorts after the entry's other keys), and a test proves the streamed bytes
  equal ``canonical_bytes(manifest_document(...))``.
* **``import_run_id`` is not in the manifest's destination payloads**: it *is* the plan
  id, which cannot cover itself.  It is added to each point when an approved plan is
  written.
* **Rejected and skipped points are in the manifest by id and reason only**: nothing of
  theirs is written, and the counts the dry-run showed are then part of what is approved.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from urllib.parse import urlsplit

from ..config import validate_url
from ..errors import ConfigError, InputError
from ..secretscan.engine import scan
from ..valueclass import dataclass, field
from .canonjson import canonical_bytes
from .hermespoint import Accepted, Outcome, PlanInputs, Skipped

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

__all__ = []



def compatibility_problems(inputs: PlanInputs) -> list[str]:
    """Why vectors from this source cannot be copied into this destination (empty: they can)."""
    problems = []
    if inputs.source_dimension != inputs.destination_dimension:
        problems.append(f"the source's dimension is {inputs.source_dimension}, the destination's "
                        f"recall.dimension is {inputs.destination_dimension}")
    if inputs.source_distance != inputs.destination_distance:
        problems.append(f"the source's distance is {inputs.source_distance}, the destination's "
                        f"recall.distance is {inputs.destination_distance}")
    if inputs.declared_model != inputs.configured_model:
        problems.append(f"the declared source model {inputs.declared_model!r} is not recall.embeddingModel "
                        f"{inputs.configured_model!r}")
    return problems


def endpoint_identity(url: str) -> str:
    """``scheme://host:port/path`` of a validated URL: what the plan records about the source."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}:{port}{parts.path.rstrip('/')}"


def validate_source_url(url: str) -> str:
    """The ``--source-url`` if it is a plain http(s) URL with nothing that looks like a credential.

    Raises :class:`~qmem.errors.InputError` naming the problem, never echoing the URL.
    """
    try:
        checked = validate_url(url, name="--source-url")
    except ConfigError as exc:
        raise InputError(exc.message) from None
    findings = scan(url)
    if findings:
        raise InputError(f"--source-url looks like it contains a credential ({findings[0].family}); "
                         "export QMEM_SOURCE_QDRANT_API_KEY instead")
    return checked


# --- the report and the manifest -------------------------------------------------------------

@dataclass
class ImportReport:
    """Counts of one read of the source; the rejected ones by reason, never with their text."""

    read: int = 0
    accepted: int = 0
    skipped: Counter = field(default_factory=Counter)
    rejected: Counter = field(default_factory=Counter)

    def add(self, outcome: Outcome) -> None:
        self.read += 1
        if isinstance(outcome, Accepted):
            self.accepted += 1
        elif isinstance(outcome, Skipped):
            self.skipped["identity"] += 1
        else:
            self.rejected[outcome.reason] += 1

    def to_json(self) -> dict[str, Any]:
        return {"read": self.read, "accepted": self.accepted, "skipped": dict(sorted(self.skipped.items())),
                "rejected": {"total": sum(self.rejected.values()), "by_reason": dict(sorted(self.rejected.items()))}}


def manifest_document(inputs: PlanInputs, outcomes: Iterable[Outcome]) -> dict[str, Any]:
    """The manifest as one JSON value: the definition the plan id is the SHA-256 of.

    ``{"header": PlanInputs.header(), "points": [entry, …]}`` with one entry per point read,
    in scroll order: ``{"point": {"id", "payload"}, "source_id", "source_payload",
    "vector"}`` for an accepted point, ``{"rejected": reason, "source_id"}`` and
    ``{"identity", "skipped": "identity", "source_id"}`` for the others.  Holds every
    vector in memory; :class:`PlanManifest` hashes the same bytes without doing so.
    """
    points = []
    for outcome in outcomes:
        entry = outcome.manifest_entry()
        if isinstance(outcome, Accepted):
            entry["vector"] = outcome.vector_b64
        points.append(entry)
    return {"header": inputs.header(), "points": points}


class PlanManifest:
    """The plan id, computed while the manifest streams by: SHA-256 of its RFC 8785 bytes.

    The bytes are those of ``canonical_bytes(manifest_document(inputs, outcomes))``,
    assembled from canonical pieces: ``{"header":<header>,"points":[`` + entries + ``]}``
    (``header`` sorts before ``points``).  An accepted entry is the canonical entry
    without its vector, with ``,"vector":"<base64>"`` spliced in before the closing
    brace — ``vector`` sorts after ``point``, ``source_id`` and ``source_payload``, and
    base64 needs no escaping, so the splice is exactly what the canonicalizer would write,
    at C speed.
    """

    def __init__(self, inputs: PlanInputs) -> None:
        self._digest = hashlib.sha256(b'{"header":' + canonical_bytes(inputs.header()) + b',"points":[')
        self._entries = 0
        self._finished = False

    def add(self, outcome: Outcome) -> None:
        if self._finished:
            raise RuntimeError("the manifest is finished")
        data = canonical_bytes(outcome.manifest_entry())
        if isinstance(outcome, Accepted):
            data = data[:-1] + b',"vector":"' + outcome.vector_b64.encode("ascii") + b'"}'
        self._digest.update(b"," + data if self._entries else data)
        self._entries += 1

    def finish(self) -> bytes:
        """The 32-byte digest (``.hex()`` is the plan id); the manifest takes no more entries."""
        if not self._finished:
            self._digest.update(b"]}")
            self._finished = True
        return self._digest.digest()
