"""What one point of a Hermes agent's Qdrant collection becomes: source contracts and normalization.

Everything here is pure (no I/O), so that each rule can be tested on its own.
``python3 -m qmem.admin import-hermes`` reads the source through
:class:`qmem.curation.qdrant.SourceProjection` and passes every point to
:func:`normalize_point`, whose outcomes the plan (:mod:`qmem.curation.plan`) counts and
hashes; only the admin surface uses this module, and nothing on the runtime path imports it.

What it promises.

* **Source contracts** (:data:`PROFILES`).  ``qdrant-memory`` is schema v1 of
  hermes-plugin-qdrant-memory: a named vector ``dense`` and the payload ``text, user_id,
  agent_id, source, session_id, category[], importance, metadata{}, created_at,
  updated_at, content_hash, schema_version: 1``; its reserved identity point (the one
  carrying ``_qdrant_memory_schema``) is skipped, not imported.  ``mem0`` is Hermes'
  mem0 provider in self-hosted mode: one unnamed vector and the payload ``data, hash,
  created_at, updated_at, user_id, agent_id, run_id``.  Only these fields are read;
  everything else in a source payload is dropped.
* **Normalization** (:func:`normalize_point`) turns one scrolled point into exactly one
  of :class:`Accepted`, :class:`Rejected` (with a reason from :data:`REASONS` or
  ``secret:<family>``, never with the text) or :class:`Skipped`.  An accepted point's
  payload passes :func:`qmem.recall.is_eligible` for its lane once ``import_run_id`` is
  set: ``host``, ``status: "active"``, ``secret_scan: "passed"``, ``project`` when given,
  bounded ``tags``, and the provenance of DESIGN §7.  Tags, labels, ids and names are
  bounded, and a field of the wrong type or out of bounds rejects the record (an explicit
  reason beats a silently altered memory); of ``metadata`` only plain scalar entries with
  tame keys are kept, at most 32.  The credential scanner of
  ``qmem_store`` runs over the complete text, the mapped metadata (as ``key: value``, so
  ``db_password: hunter22`` is caught) and the provenance values.
* **Deterministic ids** (:func:`destination_point_id`): a UUID5 of target host, source
  collection and source point id, so approving the same import again overwrites the same
  points instead of adding copies.
* **Each outcome's manifest entry** (``manifest_entry()``): what the plan id covers of it.

Decisions, and why.

* **Vectors are kept as base64 strings of their IEEE-754 float64 little-endian bytes.**
  Each vector is copied, not re-embedded, so the plan must cover every bit of it; the
  string form is lossless (a JSON number parses to exactly one double, and those bytes are
  what is hashed and what is sent on) and deterministic.  Writing 1024 numbers per point
  the JCS way costs about 0.7 ms in Python (~70 s for 100,000 points); ``array("d")``
  plus base64 runs at C speed (~15 µs).  Finiteness is checked at C speed as well:
  ``sum()`` of a vector holding NaN or an infinity is never finite, so only a vector whose
  sum overflows needs the element-by-element check.
* **Source ids become strings**: decimal for integer ids, the canonical lower-case form
  for UUIDs.  Qdrant ids go up to 2**64 - 1, beyond what RFC 8785 can write as a number,
  and the two forms cannot collide.
* **A missing ``created_at`` falls back to ``updated_at``**; a record with neither is
  rejected (``bad_timestamp``), and so is one whose timestamp is present but not RFC 3339
  with a zone.  Timestamps are normalized to UTC (``…Z``).
"""

from __future__ import annotations

import base64
import functools
import json
import math
import re
import sys
import uuid
from array import array
from datetime import timezone
from typing import Union

from ..records import MAX_TEXT_CHARS, parse_rfc3339
from ..secretscan.engine import scan
from ..valueclass import dataclass
from .canonjson import MAX_SAFE_INTEGER, CanonicalJSONError, canonical_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = []

#: Written into every imported point; bump it when the mapping below changes meaning.
TRANSFORM_VERSION = "hermes-v1"
MANIFEST_FORMAT = "qmem-hermes-import-manifest/1"
VECTOR_ENCODING = "base64(float64 little-endian)"

#: Fixed forever: changing it would make a re-import add copies instead of overwriting.
_POINT_ID_NAMESPACE = uuid.UUID("6f0d1c52-3a8e-4e57-9d0b-5c1f2a7b9e34")

#: Why a point was rejected (besides ``secret:<family>``).
REASONS = ("bad_id", "bad_payload", "bad_vector", "bad_text", "text_too_long", "bad_timestamp")

MAX_TAGS = 32  # recall.is_eligible's bound
MAX_TAG_CHARS = 64
MAX_NAME_CHARS = 128  # user, agent, session ids and labels
MAX_METADATA_ENTRIES = 32
MAX_METADATA_VALUE_CHARS = 512
MAX_SOURCE_METADATA_BYTES = 16 * 1024  # raw metadata as covered by the manifest

_UNSAFE_CHARS = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_METADATA_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,63}")
_NUMBER_TYPES = frozenset({float, int})


class _Reject(Exception):
    """Raised inside normalization; becomes a :class:`Rejected` with this reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# --- source contracts ------------------------------------------------------------------------

@dataclass(frozen=True)
class SourceProfile:
    """One Hermes memory provider's Qdrant layout: its vector and its payload allowlist."""

    name: str
    vector_name: str | None  # None: one unnamed vector
    source_type: str  # the destination's ``source_type``
    text_field: str
    payload_fields: tuple[str, ...]  # the allowlist: read, covered by the plan, the rest dropped
    map_fields: Callable[[Mapping[str, Any]], dict[str, Any]]  # allowlisted payload -> destination fields
    identity_fields: tuple[str, ...] = ()  # present on a reserved non-memory point (the first marks it)

    @property
    def requested_fields(self) -> tuple[str, ...]:
        """What the scroll asks for: the allowlist plus what marks an identity point."""
        return self.payload_fields + self.identity_fields


def _map_qdrant_memory(payload: Mapping[str, Any]) -> dict[str, Any]:
    schema = payload.get("schema_version")
    if type(schema) is not int or schema != 1:
        raise _Reject("bad_payload")  # a later schema may mean something else by the same names
    _optional_name(payload.get("content_hash"))
    return {
        "user_id": _optional_name(payload.get("user_id")),
        "agent_id": _optional_name(payload.get("agent_id")),
        "session_id": _optional_name(payload.get("session_id")),
        "source_label": _optional_name(payload.get("source")),
        "tags": _tags(payload.get("category")),
        "importance": _importance(payload.get("importance")),
        "metadata": _metadata(payload.get("metadata")),
    }


def _map_mem0(payload: Mapping[str, Any]) -> dict[str, Any]:
    _optional_name(payload.get("hash"))
    return {
        "user_id": _optional_name(payload.get("user_id")),
        "agent_id": _optional_name(payload.get("agent_id")),
        "session_id": _optional_name(payload.get("run_id")),
    }


PROFILES: dict[str, SourceProfile] = {
    "qdrant-memory": SourceProfile(
        name="qdrant-memory", vector_name="dense", source_type="hermes-qdrant-memory", text_field="text",
        payload_fields=("text", "user_id", "agent_id", "source", "session_id", "category", "importance",
                        "metadata", "created_at", "updated_at", "content_hash", "schema_version"),
        map_fields=_map_qdrant_memory,
        identity_fields=("_qdrant_memory_schema", "embedding_fingerprint"),
    ),
    "mem0": SourceProfile(
        name="mem0", vector_name=None, source_type="hermes-mem0", text_field="data",
        payload_fields=("data", "hash", "created_at", "updated_at", "user_id", "agent_id", "run_id"),
        map_fields=_map_mem0,
    ),
}


# --- field rules -----------------------------------------------------------------------------

def _bounded(value: Any, limit: int) -> bool:
    return (isinstance(value, str) and 0 < len(value) <= limit and value.strip() == value
            and not _UNSAFE_CHARS.search(value))


def _optional_name(value: Any) -> str | None:
    if value is None:
        return None
    if not _bounded(value, MAX_NAME_CHARS):
        raise _Reject("bad_payload")
    return value


def _tags(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > MAX_TAGS or not all(_bounded(t, MAX_TAG_CHARS) for t in value):
        raise _Reject("bad_payload")
    return list(dict.fromkeys(value)) or None


def _importance(value: Any) -> float | None:
    if value is None:
        return None
    if type(value) not in _NUMBER_TYPES or not math.isfinite(value) or not 0 <= value <= 1:
        raise _Reject("bad_payload")
    return float(value)


def _metadata(value: Any) -> dict[str, Any] | None:
    """The mapped metadata: plain scalar entries with tame keys; nested or odd entries are dropped."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _Reject("bad_payload")
    try:
        size = len(canonical_bytes(value))  # the raw value is covered by the plan: it must have a canonical form
    except CanonicalJSONError:
        raise _Reject("bad_payload") from None
    if size > MAX_SOURCE_METADATA_BYTES:
        raise _Reject("bad_payload")
    kept: dict[str, Any] = {}
    for key in sorted(value):
        item = value[key]
        if not _METADATA_KEY.fullmatch(key):
            continue
        kind = type(item)
        if kind is str:
            if not 0 < len(item) <= MAX_METADATA_VALUE_CHARS or _UNSAFE_CHARS.search(item):
                continue
        elif kind is int:
            if abs(item) > MAX_SAFE_INTEGER:
                continue
        elif kind is not bool and kind is not float:  # floats are finite: canonical_bytes passed
            continue
        kept[key] = item
        if len(kept) == MAX_METADATA_ENTRIES:
            break
    return kept or None


def _timestamp(value: Any) -> str | None:
    """RFC 3339 with a zone, normalized to UTC ``…Z``; None when absent."""
    if value is None:
        return None
    moment = parse_rfc3339(value) if isinstance(value, str) else None
    if moment is None:
        raise _Reject("bad_timestamp")
    try:
        utc = moment.astimezone(timezone.utc)
    except OverflowError:  # year 1 or 9999 pushed over the edge by its offset
        raise _Reject("bad_timestamp") from None
    fraction = f".{utc.microsecond:06d}".rstrip("0") if utc.microsecond else ""
    return utc.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or _SURROGATE.search(value):
        raise _Reject("bad_text")
    if len(value) > MAX_TEXT_CHARS:
        raise _Reject("text_too_long")
    return value


# --- ids and vectors -------------------------------------------------------------------------

def parse_source_id(value: Any) -> tuple[str, tuple[int, int]] | None:
    """``(id as a string, Qdrant's scroll-order key)`` for a valid point id, else None.

    Qdrant ids are unsigned 64-bit integers or UUIDs; it scrolls integers first, then
    UUIDs, each ascending.
    """
    if type(value) is int:
        return (str(value), (0, value)) if 0 <= value < 2**64 else None
    if isinstance(value, str) and len(value) <= 64:
        try:
            parsed = uuid.UUID(value)
        except ValueError:
            return None
        return str(parsed), (1, parsed.int)
    return None


def encode_vector(value: Any, dimension: int, *, distance: str) -> tuple[array, str] | None:
    """``(float64 array, base64 of its little-endian bytes)`` for a valid vector, else None.

    Valid: a list of exactly ``dimension`` JSON numbers (not booleans), all finite, and not
    all zero under Cosine (Qdrant cannot normalize a zero vector).
    """
    if type(value) is not list or len(value) != dimension:
        return None
    if not _NUMBER_TYPES.issuperset(map(type, value)):  # bool, str, None, a nested list …
        return None
    try:
        vector = array("d", value)
    except OverflowError:  # an integer beyond any double
        return None
    # NaN and infinities survive any sum, so a finite sum proves every element finite;
    # only an overflowing sum of finite values needs the slow look.
    if not math.isfinite(sum(value)) and not all(map(math.isfinite, value)):
        return None
    if distance == "Cosine" and not any(value):
        return None
    raw = vector
    if sys.byteorder != "little":
        raw = array("d", vector)
        raw.byteswap()
    return vector, base64.b64encode(raw.tobytes()).decode("ascii")


def destination_payload(payload: Mapping[str, Any], plan_id: str) -> dict[str, Any]:
    """What a point's payload becomes at the destination: the mapped allowlist, stamped with the plan
    that wrote it (the plan id is ``import_run_id``)."""
    return {**payload, "import_run_id": plan_id}


def destination_point_id(target_host: str, source_collection: str, source_id: str) -> str:
    """The destination point id: the same inputs give the same id, forever."""
    name = json.dumps([target_host, source_collection, source_id], ensure_ascii=False, separators=(",", ":"))
    return str(uuid.uuid5(_POINT_ID_NAMESPACE, name))


# --- outcomes --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Accepted:
    """A point to import: the destination point, and what it was made from."""

    source_id: str
    point_id: str
    vector: array  # float64, exactly as received
    vector_b64: str
    source_payload: dict[str, Any]  # the allowlisted source fields, as received
    payload: dict[str, Any]  # the destination payload, without import_run_id

    def manifest_entry(self) -> dict[str, Any]:
        """The entry without its vector (see :class:`PlanManifest`)."""
        return {"point": {"id": self.point_id, "payload": self.payload}, "source_id": self.source_id,
                "source_payload": self.source_payload}


@dataclass(frozen=True)
class Rejected:
    source_id: str | None
    reason: str

    def manifest_entry(self) -> dict[str, Any]:
        return {"rejected": self.reason, "source_id": self.source_id}


@dataclass(frozen=True)
class Skipped:
    """A reserved non-memory point (qdrant-memory's pipeline identity)."""

    source_id: str
    identity: dict[str, Any]

    def manifest_entry(self) -> dict[str, Any]:
        return {"identity": self.identity, "skipped": "identity", "source_id": self.source_id}


Outcome = Union[Accepted, Rejected, Skipped]


# --- normalization ---------------------------------------------------------------------------

def _identity(payload: Mapping[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    identity: dict[str, Any] = {}
    for name in fields:
        value = payload.get(name)
        if (type(value) is int and abs(value) <= MAX_SAFE_INTEGER) or _bounded(value, 256):
            identity[name] = value
        else:
            identity[name] = None  # absent or malformed: recorded as such, never copied
    return identity


# --- one run's inputs (the plan, qmem.curation.plan, covers them all) -------------------------

@dataclass(frozen=True)
class PlanInputs:
    """Everything besides the points that shapes an import, all of it covered by the plan id."""

    profile: str
    target_host: str
    project: str | None
    source_endpoint: str  # endpoint_identity(): scheme://host:port/path, nothing secret
    source_collection: str
    source_dimension: int
    source_distance: str
    destination_collection: str
    destination_dimension: int
    destination_distance: str
    destination_vector_name: str | None
    configured_model: str
    declared_model: str

    @property
    def spec(self) -> SourceProfile:
        return PROFILES[self.profile]

    def header(self) -> dict[str, Any]:
        return {
            "format": MANIFEST_FORMAT,
            "transform_version": TRANSFORM_VERSION,
            "target_host": self.target_host,
            "project": self.project,
            "profile": self.profile,
            "vector_encoding": VECTOR_ENCODING,
            "source": {"endpoint": self.source_endpoint, "collection": self.source_collection,
                       "dimension": self.source_dimension, "distance": self.source_distance,
                       "vector_name": self.spec.vector_name},
            "destination": {"collection": self.destination_collection, "dimension": self.destination_dimension,
                            "distance": self.destination_distance, "vector_name": self.destination_vector_name},
            "model": {"configured": self.configured_model, "declared": self.declared_model},
        }


def normalize_point(raw: Any, inputs: PlanInputs) -> Outcome:
    """What becomes of one point from the source's scroll answer (see the module docstring)."""
    parsed = parse_source_id(raw.get("id")) if isinstance(raw, dict) else None
    if parsed is None:
        return Rejected(None, "bad_id")
    source_id = parsed[0]
    profile = inputs.spec
    payload = raw.get("payload")
    if not isinstance(payload, dict):
        return Rejected(source_id, "bad_payload")
    if profile.identity_fields and profile.identity_fields[0] in payload:
        return Skipped(source_id, _identity(payload, profile.identity_fields))
    vector = raw.get("vector")
    if profile.vector_name is not None:
        vector = vector.get(profile.vector_name) if isinstance(vector, dict) else None
    encoded = encode_vector(vector, inputs.source_dimension, distance=inputs.source_distance)
    if encoded is None:
        return Rejected(source_id, "bad_vector")
    relevant = {name: payload[name] for name in profile.payload_fields if name in payload}
    try:
        text = _text(relevant.get(profile.text_field))
        mapped = profile.map_fields(relevant)
        created = _timestamp(relevant.get("created_at"))
        updated = _timestamp(relevant.get("updated_at"))
    except _Reject as rejection:
        return Rejected(source_id, rejection.reason)
    if created is None:
        created = updated  # the documented fallback; neither: rejected below
    if created is None:
        return Rejected(source_id, "bad_timestamp")

    destination: dict[str, Any] = {
        "text": text,
        "host": inputs.target_host,
        "status": "active",
        "secret_scan": "passed",
        "source_type": profile.source_type,
        "source_collection": inputs.source_collection,
        "source_id": source_id,
        "transform_version": TRANSFORM_VERSION,
        "created_at": created,
    }
    if inputs.project is not None:
        destination["project"] = inputs.project
    if updated is not None:
        destination["updated_at"] = updated
    destination.update((name, value) for name, value in mapped.items() if value is not None)

    finding = _first_secret(destination)
    if finding is not None:
        return Rejected(source_id, f"secret:{finding}")
    vector_array, vector_b64 = encoded
    return Accepted(source_id=source_id,
                    point_id=destination_point_id(inputs.target_host, inputs.source_collection, source_id),
                    vector=vector_array, vector_b64=vector_b64, source_payload=relevant, payload=destination)


# Provenance values a person or agent could have typed; the rest are qmem's own constants
# (or an id that parsed as a number or UUID) and were checked once per run.
_SCANNED_FIELDS = ("user_id", "agent_id", "session_id", "source_label")


def _first_secret(payload: Mapping[str, Any]) -> str | None:
    """The family of the first credential-like value in the mapped payload, or None.

    Each value is scanned on its own, as :func:`qmem.secretscan.engine.scan_values` does.
    """
    found = _secret_family(payload["text"])
    if found is not None:
        return found
    values = [payload[name] for name in _SCANNED_FIELDS if name in payload]
    values += payload.get("tags", ())
    for key, value in (payload.get("metadata") or {}).items():
        # With its key, so that the assignment rule sees ``db_password: hunter22``.
        values.append(f"{key}: {value}" if isinstance(value, str) else key)
    for value in values:
        found = _short_value_secret(value)
        if found is not None:
            return found
    return None


def _secret_family(value: str) -> str | None:
    findings = scan(value)
    return findings[0].family if findings else None


# Provenance, tags and metadata repeat across a source's records (one user, a few agents and
# labels), and scanning is pure: remembering the answer for short values halves the scan time.
_short_value_secret = functools.lru_cache(maxsize=4096)(_secret_family)
