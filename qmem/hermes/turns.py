"""Which Hermes turns get automatic recall, and the one block each turn gets.

Hermes' middleware is told the turn (``turn_id``) but not the prompt, and it runs for every
kind of agent: the user's own turns, sub-agents, background tasks, the review fork, cron.
:class:`Turns` promises:

* **Only a main turn recalls** (:func:`main_turn`): ``platform`` ``"cli"`` (the interactive
  CLI, ``hermes chat -q``, ``hermes -z``), Hermes' write origin ``"assistant_tool"`` (the
  background review fork shares its parent's platform and session but not this), a task and
  session id that do not start with ``bg_`` (``/background``), no ``HERMES_KANBAN_TASK`` in
  the environment (a kanban worker), and a text prompt.  Everything else — sub-agents
  (``"subagent"``), cron, the curator, the gateway's platforms, the TUI, the API server, a
  turn whose prompt was never seen — is off: unknown means off.
* **The prompt** is what Hermes gives its ``pre_llm_call`` hook (:meth:`Turns.observe`,
  which returns None, so Hermes injects and stores nothing), stripped, text parts only.
* **The recall starts with the turn**: :meth:`Turns.observe` hands a main turn's prompt to
  ``start`` (the recall runs in the background from the ``pre_llm_call`` hook on, before the
  first provider request is even built).
* **One block per request, the recall's own**: :meth:`Turns.block` asks ``recall`` on every
  provider request of the turn.  The recall keeps one answer per prompt (so a prompt costs one
  embedding) and waits for it at most ``recall.waitMs`` over the whole prompt: a block that
  was not ready for the first request joins the next request of the same turn.
* **Bounded and locked**: at most :data:`MAX_TURNS` turns are remembered (least recently
  used first out; a long-lived gateway never grows), and callbacks may come from several
  threads at once (sessions, sub-agents, forks).  A block is computed outside the lock.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ..valueclass import dataclass
from .request import text_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = []

MAX_TURNS = 256
MAIN_PLATFORM = "cli"
MAIN_WRITE_ORIGIN = "assistant_tool"
BACKGROUND_PREFIX = "bg_"
KANBAN_VARIABLE = "HERMES_KANBAN_TASK"


def main_turn(*, platform: object, write_origin: object, task_id: object, session_id: object,
              env: Mapping[str, str]) -> bool:
    """Whether these are the marks of a main turn the user typed (see the module docstring)."""
    return (platform == MAIN_PLATFORM and write_origin == MAIN_WRITE_ORIGIN
            and isinstance(task_id, str) and not task_id.startswith(BACKGROUND_PREFIX)
            and isinstance(session_id, str) and not session_id.startswith(BACKGROUND_PREFIX)
            and not (env.get(KANBAN_VARIABLE) or "").strip())


def prompt_text(user_message: object) -> str | None:
    """The text of a prompt as ``pre_llm_call`` gives it (a string, or multimodal parts)."""
    text = text_of(user_message).strip() if isinstance(user_message, (str, list)) else ""
    return text or None


@dataclass
class _Turn:
    prompt: str


class Turns:
    """The prompts of recent main turns; ``recall(prompt)`` gives a block or None, ``start(prompt)``
    begins a recall in the background."""

    def __init__(self, recall: Callable[[str], str | None], *, start: Callable[[str], None] | None = None,
                 max_turns: int = MAX_TURNS) -> None:
        self._recall = recall
        self._start = start
        self._max = max_turns
        self._turns: OrderedDict[str, _Turn] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._turns)

    def observe(self, *, turn_id: object, user_message: object, main: bool) -> None:
        """Note the prompt of a turn that starts (``main``: :func:`main_turn` said yes)."""
        prompt = prompt_text(user_message) if main else None
        if not isinstance(turn_id, str) or not turn_id or prompt is None:
            return
        with self._lock:
            self._turns[turn_id] = _Turn(prompt)
            self._turns.move_to_end(turn_id)
            while len(self._turns) > self._max:
                self._turns.popitem(last=False)
        if self._start is not None:
            self._start(prompt)

    def prompt(self, turn_id: object) -> str | None:
        """The prompt of a main turn noted by :meth:`observe`, or None."""
        with self._lock:
            turn = self._turns.get(turn_id) if isinstance(turn_id, str) else None
            if turn is not None:
                self._turns.move_to_end(turn_id)
            return turn.prompt if turn is not None else None

    def block(self, turn_id: str) -> str | None:
        """The block for this request of the turn (None: none, or not ready yet)."""
        with self._lock:
            turn = self._turns.get(turn_id)
        return None if turn is None else self._recall(turn.prompt)
