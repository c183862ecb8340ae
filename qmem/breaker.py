"""A circuit breaker persisted in ``breaker.json``, shared by every process of the user.

Promises:

* **Keyed by endpoint.**  Each entry is keyed by a SHA-256 of the endpoint's identity
  (scheme, host, port, path); the file never holds a URL.  A changed URL is another key,
  so it starts closed.
* **Definitive failures** (connect, DNS, header timeout) open the breaker at once for
  ``base_ms``; each re-open without a success in between doubles the window, up to
  ``max_ms``.  A failure reported while the breaker is open (a call let through before it
  opened, such as another of the calls a recall makes at once) changes nothing.  **Ambiguous failures** (5xx, 429, slow or cut-off bodies) open it only after
  ``trip_after`` failed *calls* in a row (a caller reports a call once, after its own
  retries).  A call that takes too long to help its caller counts as such a failure the moment it
  has (:class:`SlowCall`).  :meth:`Breaker.hold` opens it for the time a service asked for
  (``Retry-After``, which the transport caps at 5 minutes).
* **While open**, :meth:`Breaker.check` answers in microseconds without touching the
  network: one read of a small file.  When the window has passed, exactly one caller (in
  any process) is let through as the probe; its success closes the breaker, its failure
  re-opens it with a doubled window.  Others keep failing fast until the probe reports or
  its lease ends.
* **Safe sharing.**  Changes happen under an ``flock`` on ``breaker.json.lock`` and are
  written atomically, so two processes never corrupt or clobber each other.  A corrupt
  file counts as closed and is rewritten, with one warning.  If the file cannot be
  written at all, calls still go through: the breaker fails open.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from .diagnostics import Warnings
from .files.atomicfile import ensure_private_dir, write_atomic
from .files.smallfile import MIB, UnreadableFile, decode_json, read_small_file
from .valueclass import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

__all__ = ["Breaker", "BreakerPolicy", "SlowCall"]

FILE_VERSION = 1
STALE_ENTRY_MS = 30 * 86_400_000


def endpoint_key(url: str) -> str:
    """The key of an endpoint: a hash of scheme, host, port and path (no URL is stored)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    identity = f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}{parts.path.rstrip('/')}"
    return hashlib.sha256(identity.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class BreakerPolicy:
    base_ms: int = 120_000
    max_ms: int = 600_000
    trip_after: int = 3
    probe_lease_ms: int = 60_000  # how long one probe may take before another is allowed


@dataclass(frozen=True)
class Decision:
    """Whether a call may touch the network now."""

    allowed: bool
    retry_in_ms: int = 0
    probe: bool = False  # this caller is the one probe after an open window


class Breaker:
    """The breaker of one endpoint, backed by a shared state file."""

    def __init__(self, path: Path, url: str, policy: BreakerPolicy, *, warnings: Warnings | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self.key = endpoint_key(url)
        self.policy = policy
        self._warnings = warnings or Warnings()
        self._clock = clock
        self._lock_path = self.path.with_name(self.path.name + ".lock")
        self._parsed: tuple[tuple[int, int, int], dict[str, Any], bool] | None = None  # identity, doc, corrupt

    def _now(self) -> int:
        return int(self._clock() * 1000)

    # -- file access

    def _read(self) -> tuple[dict[str, Any], bool]:
        """(document, corrupt).  A missing file is an empty document.

        Every call asks the file system (one ``stat``), so a change by any process is seen at
        once; the parse is reused while the file is the same one (it is only ever replaced
        atomically, so a change means another inode, size or time).  A flush asks twice per
        record: this keeps that to two ``stat`` calls.
        """
        try:
            stat = os.stat(self.path)
        except OSError:
            return _empty(), False
        identity = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if self._parsed is not None and self._parsed[0] == identity:
            return _copy(self._parsed[1]), self._parsed[2]
        try:
            # Read the safe way: a FIFO or a device put here must not hang every call, nor a
            # deep nesting crash one; whatever cannot be read counts as corrupt (closed, rewritten).
            data = read_small_file(self.path, MIB)
            if data is None:  # gone since the stat
                return _empty(), False
            document = decode_json(data, self.path)
        except UnreadableFile as exc:
            if exc.reason == "io":  # a read that failed, as before: closed, and the file left alone
                return _empty(), False
            document, corrupt = _empty(), True
        else:
            corrupt = (not isinstance(document, dict) or document.get("version") != FILE_VERSION
                       or not isinstance(document.get("endpoints"), dict))
            if corrupt:
                document = _empty()
        self._parsed = (identity, _copy(document), corrupt)
        return document, corrupt

    def _entry(self, document: dict[str, Any]) -> dict[str, int]:
        entry = document["endpoints"].get(self.key)
        if not isinstance(entry, dict):
            return {}
        return {k: v for k, v in entry.items() if isinstance(v, int) and not isinstance(v, bool)}

    @contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        """Read-modify-write under the lock; the yielded document is written back."""
        try:
            ensure_private_dir(self.path.parent)
            lock_fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            self._warnings.warn("breaker_storage")
            yield _empty()  # fail open: the change is simply not persisted
            return
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            document, corrupt = self._read()
            if corrupt:
                self._warnings.warn("breaker")
            before = json.dumps(document, sort_keys=True)
            yield document
            now = self._now()
            endpoints = document["endpoints"]
            for key in [k for k, v in endpoints.items()
                        if not isinstance(v, dict) or now - v.get("updated", 0) > STALE_ENTRY_MS]:
                del endpoints[key]
            after = json.dumps(document, sort_keys=True)
            if corrupt or after != before:
                try:
                    write_atomic(self.path, (after + "\n").encode("utf-8"), mode=0o600)
                except OSError:
                    self._warnings.warn("breaker_storage")
        finally:
            os.close(lock_fd)  # closing the descriptor releases the flock

    # -- decisions

    def check(self) -> Decision:
        """May a call go to the network now?  Claims the probe when the window has passed."""
        document, corrupt = self._read()
        if corrupt:
            with self._locked():
                pass  # rewrites the file as closed, with one warning
            return Decision(True)
        decision = _decide(self._entry(document), self._now())
        if decision is not None:
            return decision
        with self._locked() as document:  # the window has passed: claim the probe, once
            entry = self._entry(document)
            now = self._now()
            decision = _decide(entry, now)
            if decision is not None:
                return decision
            entry["probe_until"] = now + self.policy.probe_lease_ms
            entry["updated"] = now
            document["endpoints"][self.key] = entry
        return Decision(True, probe=True)

    def success(self) -> None:
        """A call got an answer: close the breaker (no write when it was already closed)."""
        document, corrupt = self._read()
        if not corrupt and not self._entry(document):
            return
        with self._locked() as document:
            document["endpoints"].pop(self.key, None)

    def definitive_failure(self) -> int:
        """Nobody answered: open now.  Returns the window in ms (0 when it was open already)."""
        with self._locked() as document:
            entry = self._entry(document)
            if self._open_now(entry):
                return 0  # a call that began before the breaker opened: no re-open, no doubling
            return self._open(document, entry)

    def ambiguous_failure(self) -> int:
        """A bad or slow answer: open after ``trip_after`` in a row (or when a probe fails).

        Returns the window in ms if this opened the breaker, else 0.
        """
        with self._locked() as document:
            entry = self._entry(document)
            if self._open_now(entry):
                return 0  # a call that began before the breaker opened: no re-open, no doubling
            failures = entry.get("failures", 0) + 1
            probing = entry.get("open_until", 0) > 0
            if probing or failures >= self.policy.trip_after:
                return self._open(document, entry)
            entry.update(failures=failures, updated=self._now())
            document["endpoints"][self.key] = entry
            return 0

    def hold(self, window_ms: int) -> int:
        """The service asked callers to wait (``Retry-After``): open for exactly ``window_ms``.

        Unlike a failure, this does not double the next window; if the breaker is already
        open for longer, it stays so.  Returns the window in ms.
        """
        with self._locked() as document:
            entry = self._entry(document)
            now = self._now()
            until = max(entry.get("open_until", 0), now + max(int(window_ms), 0))
            document["endpoints"][self.key] = {**entry, "open_until": until, "failures": 0, "probe_until": 0,
                                               "updated": now}
            return until - now

    def _open_now(self, entry: dict[str, int]) -> bool:
        """Open and its window not yet passed.  A failure reported now comes from a call that was let
        through before it opened (calls run at once, in this process or another): it is no failed probe."""
        return self._now() < entry.get("open_until", 0)

    def _open(self, document: dict[str, Any], entry: dict[str, int]) -> int:
        now = self._now()
        opens = entry.get("opens", 0) + 1
        window = min(self.policy.base_ms * (2 ** min(opens - 1, 30)), self.policy.max_ms)
        document["endpoints"][self.key] = {"open_until": now + window, "opens": opens, "failures": 0,
                                           "probe_until": 0, "updated": now}
        return window

    def reset(self) -> None:
        with self._locked() as document:
            document["endpoints"].pop(self.key, None)

    def snapshot(self) -> dict[str, Any]:
        """The state for ``breaker`` commands and status: no URL, no path."""
        document, corrupt = self._read()
        entry = self._entry(document)
        now = self._now()
        open_until = entry.get("open_until", 0)
        if not open_until:
            state = "closed"
        elif now < open_until:
            state = "open"
        else:
            state = "half-open"
        return {
            "state": state,
            "retry_in_ms": max(open_until - now, 0) if state == "open" else 0,
            "consecutive_failures": entry.get("failures", 0),
            "consecutive_opens": entry.get("opens", 0),
            "endpoints_tracked": len(document["endpoints"]),
            "file_corrupt": corrupt,
        }


class SlowCall:
    """A watch on one call to a service behind ``breaker``, and the one place its outcome is told.

    The moment the call has taken ``seconds``, it counts toward ``breaker`` as an ambiguous
    failure — while the caller still waits, not when the answer comes, so a service that keeps
    every caller waiting opens its breaker as early as it can (resilience4j's slow-call rule,
    applied at the threshold).  :meth:`end` stops the watch and says whether the call was counted;
    then :meth:`failed` or :meth:`succeeded` tells the breaker the outcome, except what was counted
    already (a success would undo the count).  No breaker: nothing is told; no ``seconds``: no watch.
    """

    def __init__(self, breaker: Breaker | None, seconds: float | None) -> None:
        self._breaker = breaker
        self._lock = threading.Lock()
        self._state = "running"
        self._timer: threading.Timer | None = None
        if breaker is not None and seconds is not None:
            self._timer = threading.Timer(seconds, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def failed(self, definitive: bool) -> None:
        """The call failed: ``definitive`` (nobody answered) opens the breaker now, slow or not;
        an ambiguous failure counts unless the call already counted as slow."""
        if self._breaker is None:
            return
        if definitive:
            self._breaker.definitive_failure()
        elif self._state != "slow":
            self._breaker.ambiguous_failure()

    def succeeded(self) -> None:
        """The service answered: a success, unless the call already counted as slow."""
        if self._breaker is not None and self._state != "slow":
            self._breaker.success()

    def _fire(self) -> None:
        with self._lock:
            if self._state != "running":
                return
            self._state = "slow"
        self._breaker.ambiguous_failure()

    def end(self) -> bool:
        """Stop watching; True if the call was counted as slow."""
        with self._lock:
            slow = self._state == "slow"
            self._state = "slow" if slow else "ended"
        if self._timer is not None:
            self._timer.cancel()
        return slow


def _decide(entry: dict[str, int], now: int) -> Decision | None:
    """The decision an entry implies, or None when the window has passed and a probe may go."""
    open_until = entry.get("open_until", 0)
    if not open_until:
        return Decision(True)
    if now < open_until:
        return Decision(False, retry_in_ms=open_until - now)
    if entry.get("probe_until", 0) > now:
        return Decision(False, retry_in_ms=entry["probe_until"] - now)
    return None


def _empty() -> dict[str, Any]:
    return {"version": FILE_VERSION, "endpoints": {}}


def _copy(document: dict[str, Any]) -> dict[str, Any]:
    """A copy callers may change: the document is two levels of dicts of ints."""
    return {**document, "endpoints": {key: dict(entry) if isinstance(entry, dict) else entry
                                      for key, entry in document["endpoints"].items()}}
