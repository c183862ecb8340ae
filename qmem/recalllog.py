"""What automatic recall did, kept as ids and numbers only: ``recall-log.jsonl`` in the data directory.

Promises:

* **Nothing of the conversation.**  An entry holds a time, the host, the outcome (``delivered``,
  ``late``, ``lost``, ``none``, ``skipped``, ``failed`` with a category), per lane its outcome
  and hit count, the record ids with their lane and score, the characters delivered and two
  latencies in milliseconds.  :func:`entry` builds every entry from those values and nothing
  else; a record id that is not a plain Qdrant id (digits, or hex and dashes) is written as
  ``"?"``, so even a server that sends text as an id cannot put it in the file.  Never the
  prompt, the query, memory text or a vector.
* **Bounded.**  Entries are appended one line at a time (``O_APPEND``: concurrent processes
  never interleave a line); once the file passes :data:`MAX_BYTES` it is rewritten, under a
  lock, to the newest :data:`KEEP_ENTRIES` entries.  The file never holds much more than
  :data:`MAX_BYTES` plus one line.
* **Private.**  Created with mode ``0600`` in a private directory.
* **Never in the way.**  A log that cannot be written is skipped silently (recall goes on);
  a line that cannot be read is left out of :func:`read_entries`.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from pathlib import Path

from .files.atomicfile import ensure_private_dir, write_atomic
from .files.smallfile import UnreadableFile, read_small_file
from .valueclass import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any

__all__ = ["RecallLog", "entry", "last_lane_outcomes", "LOG_NAME", "MAX_BYTES"]

LOG_NAME = "recall-log.jsonl"
MAX_BYTES = 256 * 1024
KEEP_ENTRIES = 400
#: Every outcome an entry may carry (a lane's outcome is one of these too).
OUTCOMES = ("delivered", "late", "lost", "none", "skipped", "failed")
LANES = ("project", "host")
_PLAIN_ID = re.compile(r"[0-9A-Fa-f-]{1,64}")
_CATEGORY = re.compile(r"[a-z_]{1,40}")


def _plain_id(value: object) -> str:
    return value if isinstance(value, str) and _PLAIN_ID.fullmatch(value) else "?"


def _ms(value: float) -> int:
    return max(int(round(value)), 0)


def entry(*, host: str | None, outcome: str, category: str | None, hits: Sequence[tuple[str, str, float]],
          searched: Mapping[str, int] | None, chars: int, wait_ms: float, total_ms: float,
          now: float | None = None) -> dict[str, Any]:
    """One log entry.  ``hits``: (record id, lane, score) of what the block holds; ``searched``:
    eligible hits per lane, or None when no search answered (skipped, failed before searching)."""
    if outcome not in OUTCOMES:
        raise ValueError("unknown recall outcome")
    lanes: dict[str, dict[str, Any]] = {}
    for lane in LANES:
        if searched is None:
            lane_outcome = outcome if outcome in ("skipped", "failed") else "none"
            lanes[lane] = {"outcome": lane_outcome, "hits": 0}
        else:
            count = sum(1 for _, hit_lane, _ in hits if hit_lane == lane)
            lanes[lane] = {"outcome": outcome if count else "none", "hits": int(searched.get(lane, 0))}
    stamp = time.gmtime(time.time() if now is None else now)
    return {
        "v": 1,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", stamp),
        "host": host if host in ("pi", "prime") else None,
        "outcome": outcome,
        "category": category if isinstance(category, str) and _CATEGORY.fullmatch(category) else None,
        "lanes": lanes,
        "ids": [{"id": _plain_id(record), "lane": lane if lane in LANES else "?",
                 "score": round(float(score), 4)} for record, lane, score in hits],
        "chars": int(chars),
        "wait_ms": _ms(wait_ms),
        "total_ms": _ms(total_ms),
    }


@dataclass(frozen=True)
class RecallLog:
    """The log file of one data directory."""

    path: Path

    @classmethod
    def in_directory(cls, data_dir: Path) -> RecallLog:
        return cls(Path(data_dir) / LOG_NAME)

    def append(self, item: Mapping[str, Any]) -> None:
        """Add one entry (built by :func:`entry`); never raises."""
        line = (json.dumps(item, separators=(",", ":"), sort_keys=True) + "\n").encode("utf-8")
        try:
            ensure_private_dir(self.path.parent)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, line)
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            if size > MAX_BYTES:
                self._compact()
        except OSError:
            pass  # the log is a convenience: recall never fails for it

    def _compact(self) -> None:
        lock_fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            try:
                data = read_small_file(self.path, MAX_BYTES * 4)
            except UnreadableFile:
                data = b""  # too large or unreadable: start again
            if data is not None and len(data) <= MAX_BYTES:
                return  # another process compacted it meanwhile
            lines = [line for line in (data or b"").splitlines() if line.strip()][-KEEP_ENTRIES:]
            write_atomic(self.path, b"".join(line + b"\n" for line in lines), mode=0o600)
        finally:
            os.close(lock_fd)

    def read_entries(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The entries, newest first (at most ``limit``)."""
        try:
            data = read_small_file(self.path, MAX_BYTES * 4)
        except (UnreadableFile, OSError):
            return []
        if not data:
            return []
        out: list[dict[str, Any]] = []
        for line in reversed(data.splitlines()):
            try:
                item = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                continue
            if isinstance(item, dict) and item.get("outcome") in OUTCOMES:
                out.append(item)
                if limit is not None and len(out) >= limit:
                    break
        return out


def last_lane_outcomes(entries: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, str | None, str]]:
    """lane -> (outcome, category, time) of the newest entry (``entries`` newest first)."""
    for item in entries:
        lanes = item.get("lanes")
        if isinstance(lanes, dict):
            return {lane: (str(lanes[lane].get("outcome")), item.get("category"), str(item.get("time")))
                    for lane in LANES if isinstance(lanes.get(lane), dict)}
    return {}
