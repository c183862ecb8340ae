"""Learning records from pi and Prime session files (``import``).

Where: pi keeps sessions in ``$PI_CODING_AGENT_DIR`` (default ``~/.pi/agent``) under
``sessions/--<cwd>--/*.jsonl`` (or in ``$PI_CODING_AGENT_SESSION_DIR``); Prime in
``$PRIME_AGENT_CODING_AGENT_DIR`` (default ``~/.prime/agent``) under ``sessions/*.jsonl`` and
``session-artifacts/*/sub-*/*.jsonl``.

What: each assistant ``toolCall`` block of a qmem tool is paired with the
``toolResult`` message of the same ``toolCallId`` (also across runs, for a call whose
result was not written yet).  ``qmem_store`` / ``qmem_correct`` give a gateway id and
the full text, ``qmem_get`` a full record, ``qmem_search`` the records it saw (text
may be an excerpt, so coverage is partial).  The record is read from the result's
``details`` (``{"qmem": 1, "record" | "results": …}``) and otherwise from a JSON object
in its text.  A store that was only *queued* comes back into the outbox under its
original local id, so rebuilding the index never loses a write and never sends it
twice — unless one of its fields carries a credential, or it fails today's checks (a text
too long, a NUL, no ``project_id``): then it is kept as a failed outbox record naming the
family or the cause (``queue`` lists it), counted, and never sent.  Results of the recall lane (``memory_search``) and qmem's own lexical
fallback answers are never imported.

How cheaply: an unchanged file costs one ``stat``; an appended file is read from the
offset where the last run stopped, but only when it is provably the same file grown:
same inode, at least that long, the same first bytes *and* the same bytes just before
the offset.  Anything else — truncated, replaced, or rewritten in place and grown past
the old offset — is read again from the start; learning is a merge, so that re-read
duplicates nothing.  Lines that do not mention ``qmem_`` are skipped
without being parsed.  Malformed JSON, unknown entry types, non-UTF-8 lines and a
half-written last line are counted and skipped, never fatal; the half-written line is
read again next time, once it is complete.

How safely: what a file teaches, the queued writes it restores and how far it was read are
saved in one transaction.  An import stopped anywhere (the index busy, the disk full,
Ctrl-C) saves none of them, and the next import reads the file again and restores them.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from hashlib import sha256
from pathlib import Path
from stat import S_ISREG

from ..errors import InputError
from ..hostdirs import agent_directory, session_directory
from ..localindex import ImportedFile, LocalIndex
from ..records import (
    RECORD_FIELDS, NewRecord, credential_findings, describe_credentials, is_local_id, validate_new_record,
)
from ..valueclass import asdict, dataclass, field
from .outbox import Outbox
from .record import Observation, observation_from_record, this_machine

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from typing import Any, BinaryIO

__all__ = ["ImportReport", "SessionImporter", "session_roots"]

QMEM_TOOLS = frozenset({"qmem_store", "qmem_correct", "qmem_get", "qmem_search"})
HEAD_BYTES = 4096
TAIL_BYTES = 4096  # how much before the saved offset must still be there to resume at it
CHUNK_BYTES = 1 << 20
MAX_TEXT_SCAN = 1 << 20  # JSON fallback: largest text content worth parsing

# Entry types pi 0.73 and Prime 0.8 write; anything else is counted as unknown.
KNOWN_ENTRY_TYPES = frozenset({
    "session", "message", "model_change", "thinking_level_change", "compaction", "branch_summary",
    "custom", "custom_message", "label", "session_info",
    "service_tier_change", "session_state", "child_usage_attributed",  # Prime
})


@dataclass(frozen=True)
class SessionRoot:
    label: str  # prefix of the file keys: "pi", "prime", "pi-session-dir"
    host: str  # "pi" | "prime"
    root: Path
    patterns: tuple[str, ...]

    def directories(self) -> list[str]:
        """The directories under :attr:`root` that ``import`` reads (``sessions/`` …), with a slash."""
        return sorted({p.split("/", 1)[0] + "/" for p in self.patterns if "/" in p and "*" not in p.split("/", 1)[0]})

    def found(self) -> bool:
        """Whether :attr:`root` has a directory ``import`` reads."""
        tops = [top.rstrip("/") for top in self.directories()]
        return self.root.is_dir() and (not tops or any((self.root / top).is_dir() for top in tops))


_SESSION_PATTERNS = {
    "pi": ("sessions/*.jsonl", "sessions/*/*.jsonl"),
    "prime": ("sessions/*.jsonl", "sessions/*/*.jsonl", "session-artifacts/*/sub-*/*.jsonl"),
}


def session_roots(env: Mapping[str, str] | None = None) -> list[SessionRoot]:
    """Where pi and Prime keep session files, in their agent directories as the hosts resolve them
    (:mod:`qmem.hostdirs`: a directory variable holding a relative path names no root)."""
    env = os.environ if env is None else env
    roots = []
    for host, patterns in _SESSION_PATTERNS.items():
        directory = agent_directory(host, env).path
        if directory is not None:
            roots.append(SessionRoot(host, host, directory, patterns))
    pi_sessions, _ = session_directory(env)
    if pi_sessions is not None:
        # pi's own override of its session directory (--session-dir has the same effect).
        roots.append(SessionRoot("pi-session-dir", "pi", pi_sessions, ("*.jsonl", "*/*.jsonl")))
    return roots


@dataclass
class ImportReport:
    files: int = 0
    unchanged: int = 0
    read: int = 0
    reread: int = 0  # truncated or replaced, read again from the start
    unreadable: int = 0
    bytes: int = 0
    records_added: int = 0
    records_updated: int = 0
    queued_restored: int = 0
    queued_refused: int = 0  # restored as failed: a field carries a credential, or it is invalid now
    queued_invalid: int = 0  # of those, failing today's checks (the cause is kept with the record)
    malformed_lines: int = 0
    unknown_entries: int = 0
    non_utf8_lines: int = 0
    incomplete_last_lines: int = 0
    by_host: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class QueuedWrite:
    """A store that was only queued when the session ran: back into the outbox."""

    local_id: str
    record: NewRecord
    tool: str
    invalid: str | None = None  # why today's checks refuse it: then kept as failed, never sent


# --- what one call teaches (pure) ------------------------------------------------------

def _payload(result: Mapping[str, Any]) -> Mapping[str, Any] | None:
    details = result.get("details")
    if isinstance(details, dict) and details.get("qmem") == 1:
        return details
    parts = result.get("content")
    if isinstance(parts, str):
        text = parts
    elif isinstance(parts, list):
        text = "\n".join(p.get("text", "") for p in parts
                         if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str))
    else:
        return None
    if len(text) > MAX_TEXT_SCAN:
        return None
    for candidate in (text, text[text.find("{"): text.rfind("}") + 1]):
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _observation(rec: Mapping[str, Any], *, coverage: str, tool: str, session_file: str,
                 fallback: Mapping[str, Any] | None = None) -> Observation | None:
    return observation_from_record(rec, coverage=coverage, state="observed", tool=tool, session_file=session_file,
                                   machine=this_machine(), fallback=fallback)


_LONG_AGO = datetime(1970, 1, 1, tzinfo=timezone.utc)


def learned_from_call(name: str, arguments: Mapping[str, Any], result: Mapping[str, Any],
                      session_file: str) -> list[Observation | QueuedWrite]:
    """What a finished qmem tool call teaches: observations and queued writes."""
    if result.get("isError") is True:
        return []
    payload = _payload(result)
    if payload is None:
        return []
    if name in ("qmem_store", "qmem_correct"):
        rec = payload.get("record") if isinstance(payload.get("record"), dict) else payload
        record_id = rec.get("id")
        if is_local_id(record_id) or payload.get("queued") is True:
            if not is_local_id(record_id):
                return []
            try:
                # An expiry that has passed since is not a reason to drop the write.
                return [QueuedWrite(local_id=record_id, record=validate_new_record(arguments, now=_LONG_AGO),
                                    tool=name)]
            except InputError as exc:  # the host said "queued locally": kept, failed, with the cause
                return [QueuedWrite(local_id=record_id, record=_as_written(arguments), tool=name,
                                    invalid=f"restored from a session but not valid now: {exc.message}")]
        learned: list[Observation | QueuedWrite] = []
        obs = _observation(rec, coverage="full", tool=name, session_file=session_file, fallback=arguments)
        if obs is not None:
            learned.append(obs)
            target = obs.supersedes_id
            if target and not is_local_id(target):
                learned.append(Observation(id=target, superseded_by=obs.id, supersede_reason=obs.supersede_reason,
                                           tool=name, session_file=session_file))
        return learned
    if name == "qmem_get":
        if payload.get("fallback") is not None:
            return []  # the local copy, not the gateway's word
        rec = payload.get("record") if isinstance(payload.get("record"), dict) else payload
        obs = _observation(rec, coverage="full", tool=name, session_file=session_file)
        return [obs] if obs is not None else []
    if name == "qmem_search":
        if payload.get("fallback") is not None:
            return []  # answered by a local index, not the gateway: nothing new
        results = payload.get("results")
        if not isinstance(results, list):
            return []
        seen = (_observation(r, coverage="partial", tool=name, session_file=session_file)
                for r in results if isinstance(r, dict))
        return [obs for obs in seen if obs is not None]
    return []


def _kept_text(value: Any) -> str | None:
    """A field as a failed row can keep it: a string (lone surrogates, which the index cannot
    store, as U+FFFD), another JSON value as its JSON text."""
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _as_written(arguments: Mapping[str, Any]) -> NewRecord:
    """A write that fails today's checks, as the session holds it, for a failed outbox row."""
    fields = {name: _kept_text(arguments.get(name)) for name in RECORD_FIELDS}
    return NewRecord(**{**fields, "text": fields["text"] or "", "project_id": fields["project_id"] or "",
                        "kind": fields["kind"] or "fact"})


# --- reading files -----------------------------------------------------------------------

def _head_digest(data: bytes) -> str:
    return f"{len(data)}:{sha256(data).hexdigest()}"


def _tail_digest(handle: BinaryIO, offset: int) -> str:
    """The digest of the (at most) :data:`TAIL_BYTES` bytes that end at ``offset``."""
    start = max(offset - TAIL_BYTES, 0)
    handle.seek(start)
    return _head_digest(handle.read(offset - start))


def _same_file_grown(handle: BinaryIO, stat: os.stat_result, state: ImportedFile) -> bool:
    """True when the file is the one imported before, only appended to since.

    Same inode and at least as long is not enough: a file truncated and rewritten in place
    can grow past the old offset with the same header.  The bytes at both ends of what
    was read must still be there.
    """
    if stat.st_ino != state.inode or stat.st_size < state.offset or not state.tail:
        return False
    head_len = int(state.head.split(":", 1)[0])
    if _head_digest(handle.read(head_len)) != state.head:
        return False
    return _tail_digest(handle, state.offset) == state.tail


class SessionImporter:
    """Incremental import of session files into a :class:`LocalIndex`."""

    def __init__(self, index: LocalIndex) -> None:
        self.index = index
        self.outbox = Outbox(index)

    def run(self, roots: list[SessionRoot], *, progress: Callable[[int, int], None] | None = None) -> ImportReport:
        """Import every session file under ``roots``; ``progress(done, total)`` is told after each file."""
        report = ImportReport()
        known = self.index.imported_files()
        found = [(root, item) for root in roots for item in _discover(root)]
        for done, (root, (key, path, stat)) in enumerate(found, 1):
            if progress is not None:
                progress(done, len(found))
            report.files += 1
            report.by_host[root.host] = report.by_host.get(root.host, 0) + 1
            state = known.get(key)
            if state is not None and (state.size, state.mtime_ns, state.inode) == (
                    stat.st_size, stat.st_mtime_ns, stat.st_ino):
                report.unchanged += 1
                continue
            try:
                self._import_file(key, path, stat, state, report)
            except OSError:
                report.unreadable += 1
        return report

    def _import_file(self, key: str, path: Path, stat: os.stat_result, state: ImportedFile | None,
                     report: ImportReport) -> None:
        with open(path, "rb") as handle:
            offset = state.offset if state is not None and _same_file_grown(handle, stat, state) else 0
            if state is not None and offset == 0 and state.offset > 0:
                report.reread += 1
            handle.seek(offset)
            calls = {} if offset == 0 else self.index.calls_awaiting_results(key)
            learned: list[Observation | QueuedWrite] = []
            consumed = offset
            rest = b""
            while True:
                chunk = handle.read(CHUNK_BYTES)
                if not chunk:
                    break
                report.bytes += len(chunk)
                lines = (rest + chunk).split(b"\n")
                rest = lines.pop()
                for line in lines:
                    consumed += len(line) + 1
                    if b"qmem_" in line:
                        self._line(line, key, calls, learned, report)
            if rest:
                report.incomplete_last_lines += 1
            # Fingerprint the start and the end of what was consumed, to notice next time a file
            # that was replaced or rewritten in place.
            handle.seek(0)
            head = _head_digest(handle.read(min(HEAD_BYTES, consumed)))
            tail = _tail_digest(handle, consumed)
        report.read += 1
        self._commit(key, stat, consumed, head, tail, calls, learned, report)

    def _line(self, line: bytes, key: str, calls: dict[str, tuple[str, dict[str, Any]]],
              learned: list[Observation | QueuedWrite], report: ImportReport) -> None:
        try:
            entry = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            report.non_utf8_lines += 1
            return
        except ValueError:
            report.malformed_lines += 1
            return
        if not isinstance(entry, dict):
            report.malformed_lines += 1
            return
        kind = entry.get("type")
        if kind not in KNOWN_ENTRY_TYPES:
            report.unknown_entries += 1
            return
        message = entry.get("message")
        if kind != "message" or not isinstance(message, dict):
            return
        role = message.get("role")
        if role == "assistant" and isinstance(message.get("content"), list):
            for block in message["content"]:
                if (isinstance(block, dict) and block.get("type") == "toolCall" and block.get("name") in QMEM_TOOLS
                        and isinstance(block.get("id"), str) and isinstance(block.get("arguments"), dict)):
                    calls[block["id"]] = (block["name"], block["arguments"])
        elif role == "toolResult":
            call = calls.pop(message.get("toolCallId"), None) if isinstance(message.get("toolCallId"), str) else None
            if call is not None:
                learned.extend(learned_from_call(call[0], call[1], message, key))

    def _commit(self, key: str, stat: os.stat_result, offset: int, head: str, tail: str,
                calls: dict[str, tuple[str, dict[str, Any]]], learned: list[Observation | QueuedWrite],
                report: ImportReport) -> None:
        restored = []
        # Rare: looked up one by one, so that a write restored by an earlier run is not counted again.
        invalid_new = sum(1 for item in learned if isinstance(item, QueuedWrite) and item.invalid
                          and self.index.queued_state(item.local_id) is None)
        for item in learned:
            if isinstance(item, QueuedWrite):
                # Whatever wrote the session file, a credential found now keeps the write here, unsent.
                findings = credential_findings(item.record.to_request())
                refused = describe_credentials(findings) if findings else item.invalid
                restored.append(self.outbox.restored_row(item.local_id, item.record, tool=item.tool,
                                                         session_file=key, refused=refused))
        # One transaction: the offset is saved with the writes it restores, or neither is.
        counts = self.index.record_import(
            key, ImportedFile(stat.st_size, stat.st_mtime_ns, stat.st_ino, offset, head, tail),
            [item for item in learned if isinstance(item, Observation)], calls, restored)
        report.records_added += counts["added"]
        report.records_updated += counts["updated"]
        report.queued_restored += counts["queued"]
        report.queued_refused += counts["queued_failed"]
        report.queued_invalid += invalid_new


def _discover(root: SessionRoot) -> Iterator[tuple[str, Path, os.stat_result]]:
    """(key, path, stat) for each session file; the key is host + path under the root."""
    if not root.root.is_dir():
        return
    seen: set[Path] = set()
    for pattern in root.patterns:
        for path in sorted(root.root.glob(pattern)):
            if path in seen:
                continue
            seen.add(path)
            try:
                stat = path.stat()
            except OSError:
                continue
            if not S_ISREG(stat.st_mode):
                continue
            yield f"{root.label}:{path.relative_to(root.root).as_posix()}", path, stat
