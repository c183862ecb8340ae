"""One prompt's automatic recall as a background job, and calls run at once: the parts of
:mod:`qmem.recall` that make it never hold up a turn.

* :class:`RecallJob` is the state of one prompt's recall: started once, run on its own thread,
  waited for by the LLM requests of that prompt, which together wait at most ``recall.waitMs``
  (``wait_left``); ``done`` is set once its outcome is logged.  It holds the block only in
  memory: nothing here writes anything.
* :func:`run_together` runs a recall's upstream calls (the two lane searches, and on a
  session's first prompt the collection's description) at the same moment, or one after the
  other when a breaker is half-open and one of them must be the probe.
"""

from __future__ import annotations

import threading
import time

from ..valueclass import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:  # only named: excerpts are made by the recall lane
    from collections.abc import Callable, Sequence
    from typing import Any
    from ..fence.memorycontext import Excerpt

__all__ = ["RecallJob", "run_together"]


def run_together(calls: Sequence[Callable[[], Any]], *, sequential: bool, join_s: float,
                 late: BaseException) -> list[tuple[Any, BaseException | None]]:
    """Run ``calls`` at once (each but the first on its own thread), or one after the other;
    (value, exception) for each.  A call still running after ``join_s`` gets ``late`` (its own
    deadline ends it soon after: every call a recall makes carries the recall's budget)."""
    results: list[tuple[Any, BaseException | None] | None] = [None] * len(calls)

    def run(index: int) -> None:
        try:
            results[index] = (calls[index](), None)
        except BaseException as exc:  # handed to the caller, which raises it in its own thread
            results[index] = (None, exc)

    if sequential or len(calls) < 2:
        for index in range(len(calls)):
            run(index)
    else:
        threads = [threading.Thread(target=run, args=(index,), name="qmem-recall-lane", daemon=True)
                   for index in range(1, len(calls))]
        for thread in threads:
            thread.start()
        run(0)
        until = time.monotonic() + join_s
        for thread in threads:
            thread.join(max(until - time.monotonic(), 0))
    return [result if result is not None else (None, late) for result in results]


@dataclass
class RecallJob:
    """One prompt's automatic recall: run once in the background, waited for by the requests of
    that prompt, which together wait at most ``recall.waitMs``."""

    wait_left: float  # seconds the prompt's requests may still wait
    started: float = field(default_factory=time.monotonic)
    done: threading.Event = field(default_factory=threading.Event)
    block: str | None = None
    excerpts: list[Excerpt] = field(default_factory=list)
    searched: dict[str, int] | None = None  # eligible hits per lane; None when no search answered
    outcome: str = "none"  # when done: "found", "none", "skipped" or "failed"
    category: str | None = None
    total_ms: float = 0.0
    first_wait_ms: float | None = None  # what the prompt's first request waited (None: none asked yet)
    superseded: bool = False  # a newer prompt started: no later request of this one will come
    finished: bool = False  # the outcome is set (``done`` follows once it is logged)
    logged: bool = False
