"""One progress line on a terminal while a command waits on the network.

:class:`ProgressLine` is a wait observer: a command line front end installs it with
:func:`set_wait_observer` when its stderr is a terminal, and :mod:`qmem.clients.transport` tells the
installed observer (:func:`wait_observer`) about every request.  The slot is here, not in the
transport, so that installing the line does not load the HTTP stack for a command that never
uses it.  A request that has not
finished after :data:`QUIET_S` seconds gets one line on stderr, rewritten in place once a
second — what it waits for, for how long, and its timeout::

    waiting for the Memory Gateway: 3 s (gives up after 15 s)

— and ended with a newline when the request ends, so that the command's own message (which
names the real cause: refused, timed out, DNS, TLS, 401 …) follows on a line of its own.  It
names only the service, never an endpoint, a body or a credential.  A request that answers
within a second prints nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import TextIO

__all__ = ["ProgressLine", "set_wait_observer"]

QUIET_S = 1.0

#: ``observer(service, timeout_s)`` -> a context manager around each request, or None.
#: A CLI on a terminal installs :class:`ProgressLine` to say what it waits for.
WaitObserver = Callable[[str, float], AbstractContextManager[None]]
_wait_observer: WaitObserver | None = None


def set_wait_observer(observer: WaitObserver | None) -> None:
    """Install (or remove, with None) the process-wide observer of waits on the network."""
    global _wait_observer
    _wait_observer = observer


def wait_observer() -> WaitObserver | None:
    """The observer installed, if any."""
    return _wait_observer


class ProgressLine:
    def __init__(self, stream: TextIO, *, quiet_s: float = QUIET_S, every_s: float = 1.0) -> None:
        self._stream = stream
        self._quiet = quiet_s
        self._every = every_s
        self._lock = threading.Lock()

    @contextmanager
    def __call__(self, service: str, timeout_s: float) -> Iterator[None]:
        done = threading.Event()
        shown = threading.Event()
        started = time.monotonic()

        def tick() -> None:
            if done.wait(self._quiet):
                return
            while True:
                with self._lock:
                    if done.is_set():
                        return
                    elapsed = time.monotonic() - started
                    self._stream.write(f"\rwaiting for the {service}: {elapsed:.0f} s "
                                       f"(gives up after {timeout_s:g} s)")
                    self._stream.flush()
                    shown.set()
                if done.wait(self._every):
                    return

        ticker = threading.Thread(target=tick, name="qmem-wait-line", daemon=True)
        ticker.start()
        try:
            yield
        finally:
            with self._lock:
                done.set()
                if shown.is_set():
                    self._stream.write("\n")
                    self._stream.flush()
            ticker.join()
