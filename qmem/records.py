"""What a memory record is, and the checks a new one passes before any I/O.

Pure functions only.  :func:`validate_new_record` turns untrusted arguments (from a
model, a CLI or a session file) into a :class:`NewRecord` or raises
:class:`~qmem.errors.InputError` with a one-line message naming the argument — never
its value, which may be long or sensitive.  The rules are the Memory Gateway's
(DESIGN §6) so that a record accepted here is one the gateway will accept.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from datetime import datetime, timedelta, timezone

from .errors import InputError
from .valueclass import asdict, dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = [
    "KINDS", "MAX_TEXT_CHARS", "NewRecord", "validate_new_record", "check_record_id", "is_local_id",
    "new_local_id", "parse_rfc3339", "canonical_time", "format_utc", "normalize_text", "check_unicode",
    "credential_findings", "describe_credentials", "QUEUE_LIMIT", "QUEUED_NOT_SHARED", "RECORD_FIELDS",
]

KINDS = ("fact", "decision", "preference", "episode")

#: How many records ``queue`` lists unless told otherwise.
QUEUE_LIMIT = 200
#: How every answer and listing marks a record that waits in the outbox.
QUEUED_NOT_SHARED = "queued locally, not yet shared"

#: Local ids are the outbox's Idempotency-Keys: ``local-`` + 32 hex digits (a UUID4).
LOCAL_ID_PREFIX = "local-"

#: Memory records are deliberate, structured notes, not documents; longer text is refused.
MAX_TEXT_CHARS = 20_000
MAX_REASON_CHARS = 1_000

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_LOCAL_ID = re.compile(r"local-[0-9a-f]{32}")
# Project, scope and agent names: visible, no spaces, bounded.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}")
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})"
)


@dataclass(frozen=True)
class NewRecord:
    """A record about to be written: the body of ``POST /v1/memories``."""

    text: str
    project_id: str
    kind: str = "fact"
    scope: str | None = None
    agent_id: str | None = None
    source: str | None = None
    expires_at: str | None = None
    supersedes_id: str | None = None
    supersede_reason: str | None = None

    def to_request(self) -> dict[str, Any]:
        """The JSON body for the gateway, without absent optional fields."""
        return {key: value for key, value in asdict(self).items() if value is not None}


def is_local_id(value: object) -> bool:
    """True for an outbox id (a record not yet shared)."""
    return isinstance(value, str) and _LOCAL_ID.fullmatch(value) is not None


def new_local_id() -> str:
    import uuid  # here, not at the top: only a store mints ids, and most users of records never do

    return LOCAL_ID_PREFIX + uuid.uuid4().hex


def check_record_id(value: object, *, name: str = "id") -> str:
    """A well-formed gateway or local record id, or InputError."""
    if not isinstance(value, str) or not (_ID.fullmatch(value) or _LOCAL_ID.fullmatch(value)):
        raise InputError(f"{name} must be a record id (letters, digits and . _ : -, at most 128 characters)")
    return value


def parse_rfc3339(value: str) -> datetime | None:
    """An aware datetime for an RFC 3339 timestamp, or None when it is not one."""
    match = _RFC3339.fullmatch(value)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction = match.group(7)
    micro = int((fraction[1:] + "000000")[:6]) if fraction else 0
    zone = match.group(8)
    if zone in ("Z", "z"):
        tz = timezone.utc
    else:
        sign = 1 if zone[0] == "+" else -1
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        if hours > 23 or minutes > 59:
            return None
        tz = timezone(sign * timedelta(hours=hours, minutes=minutes))
    try:
        # RFC 3339 allows a leap second (60); datetime does not, so clamp it.
        return datetime(year, month, day, hour, minute, min(second, 59), micro, tzinfo=tz)
    except ValueError:
        return None


def format_utc(moment: datetime) -> str:
    """``moment`` (aware) in qmem's one time form: RFC 3339 in UTC with microseconds and an
    upper-case ``T`` and ``Z`` (``2027-01-31T00:00:00.000000Z``).  Every time in that form
    has the same width, so two of them compare as text the way they compare as times, and
    SQLite's ``julianday()`` reads them (it reads no lower-case ``t``)."""
    return moment.astimezone(timezone.utc).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def canonical_time(value: str) -> str | None:
    """``value`` in the form of :func:`format_utc`, or None when it is not an RFC 3339 time
    with a zone (``t``/``z``, offsets and fractions of any length are all RFC 3339) or lies
    outside the years 1–9999 once in UTC."""
    moment = parse_rfc3339(value)
    if moment is None:
        return None
    try:
        return format_utc(moment)
    except (OverflowError, ValueError):
        return None


def normalize_text(text: str) -> str:
    """The form used to spot the same text under different ids: NFKC, casefolded, one space."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _optional_name(args: Mapping[str, Any], key: str) -> str | None:
    value = args.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise InputError(f"{key} must be a name without spaces (letters, digits and . _ : / @ + -, at most 128)")
    return value


def _bounded_text(args: Mapping[str, Any], key: str, limit: int, *, required: bool) -> str | None:
    value = args.get(key)
    if value is None or (isinstance(value, str) and not value.strip() and not required):
        if required:
            raise InputError(f"{key} is required")
        return None
    if not isinstance(value, str):
        raise InputError(f"{key} must be a string")
    if not value.strip():
        raise InputError(f"{key} must not be empty")
    if len(value) > limit:
        raise InputError(f"{key} is too long ({len(value)} characters; the limit is {limit})")
    if "\x00" in value:
        raise InputError(f"{key} must not contain NUL characters")
    check_unicode(value, key)
    return value


def check_unicode(value: str, name: str) -> str:
    """``value`` if it is valid Unicode text, else InputError naming ``name``.

    A lone surrogate (what undecodable bytes and ``"\\ud800"`` escapes in JSON become)
    cannot be stored, sent or printed as UTF-8: it is bad input, refused before any I/O.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{name} is not valid Unicode text (it holds a lone surrogate code point)") from None
    return value


def validate_new_record(args: Mapping[str, Any], *, now: datetime | None = None) -> NewRecord:
    """Check the arguments of a store or correct call; see the module docstring.

    ``project_id`` is required; ``kind`` defaults to ``fact``; ``expires_at`` must be
    an RFC 3339 time with a zone, in the future (it comes back in the form of
    :func:`format_utc`); ids must be well formed.
    """
    text = _bounded_text(args, "text", MAX_TEXT_CHARS, required=True)
    project = args.get("project_id")
    if project is None or project == "":
        raise InputError("project_id is required: name the project this memory belongs to")
    project_id = _optional_name(args, "project_id")
    kind = args.get("kind") or "fact"
    if kind not in KINDS:
        raise InputError(f"kind must be one of: {', '.join(KINDS)}")
    source = _bounded_text(args, "source", 256, required=False)
    if source is not None and any(unicodedata.category(ch) == "Cc" for ch in source):
        raise InputError("source must not contain control characters")
    expires_at = args.get("expires_at")
    if expires_at is not None and expires_at != "":
        moment = parse_rfc3339(expires_at) if isinstance(expires_at, str) else None
        canonical = canonical_time(expires_at) if moment is not None else None
        if moment is None or canonical is None:
            raise InputError("expires_at must be an RFC 3339 time with a zone, e.g. 2027-01-31T00:00:00Z")
        if moment <= (now or datetime.now(timezone.utc)):
            raise InputError("expires_at must be in the future")
        expires_at = canonical
    else:
        expires_at = None
    supersedes = args.get("supersedes_id")
    supersedes_id = check_record_id(supersedes, name="supersedes_id") if supersedes not in (None, "") else None
    reason = _bounded_text(args, "supersede_reason", MAX_REASON_CHARS, required=False)
    if reason is not None and supersedes_id is None:
        raise InputError("supersede_reason needs supersedes_id")
    assert text is not None and project_id is not None
    return NewRecord(
        text=text,
        project_id=project_id,
        kind=kind,
        scope=_optional_name(args, "scope"),
        agent_id=_optional_name(args, "agent_id"),
        source=source,
        expires_at=expires_at,
        supersedes_id=supersedes_id,
        supersede_reason=reason,
    )


#: Every field of a record that a user or a model supplies; all of them pass the scanner.
RECORD_FIELDS = ("text", "project_id", "kind", "scope", "agent_id", "source", "expires_at", "supersedes_id",
                 "supersede_reason")


def credential_findings(fields: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(field, family)`` for each credential the scanner finds in a record's string fields, and
    for each whole occurrence of one of qmem's own configured keys (:data:`OWN_KEY_FAMILY`).

    ``fields`` is a request body, a :class:`NewRecord`'s ``asdict`` or a stored row's
    values; fields outside :data:`RECORD_FIELDS` and non-strings are ignored.  The fields
    are scanned as one text, a line apart (one pass: a flush scans every record it sends),
    and each finding is attributed to the field it starts in.
    """
    starts: list[int] = []
    names: list[str] = []
    parts: list[str] = []
    offset = 0
    for name in RECORD_FIELDS:
        value = fields.get(name)
        if isinstance(value, str) and value:
            starts.append(offset)
            names.append(name)
            parts.append(value)
            offset += len(value) + 2
    from .clients.knownkeys import known_keys  # here, not at the top: most users of records never scan (a local find)
    from .secretscan.engine import scan

    text = "\n\n".join(parts)
    spans = [(finding.start, finding.family) for finding in scan(text)]
    # One of qmem's own configured keys, whole (or whole in an encoding), whatever its shape: shared memory
    # must never hold it, and the local copy must never differ from what the gateway keeps.
    spans += [(start, OWN_KEY_FAMILY) for start, _ in known_keys().whole_spans(text)]
    found: dict[tuple[str, str], None] = {}
    for start, family in sorted(spans):
        found[(names[bisect.bisect_right(starts, start) - 1], family)] = None
    return list(found)


#: The family a finding of one of qmem's own configured keys is reported as.
OWN_KEY_FAMILY = "a configured qmem key"


def describe_credentials(findings: list[tuple[str, str]]) -> str:
    """One line naming the families and fields, never the values."""
    parts = [family if name == "text" else f"{family} in {name}" for name, family in findings]
    return (f"it looks like it contains a credential ({', '.join(dict.fromkeys(parts))}); "
            f"remove it and store a reference instead")
