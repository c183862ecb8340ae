"""One host session of the qmem plugin: the tools, hooks and commands an adapter relays.

An adapter (the pi/Prime bridge, the MCP server, the Hermes plugin) creates one
:class:`PluginSession` per host session and relays to it; no adapter holds memory logic.
The session opens its services on first use (the :class:`~qmem.runtime.Runtime` for the
gateway lane, :class:`~qmem.recall.Recall` — given only the recall handle — for the recall
lane) and promises:

* :meth:`~PluginSession.call_tool` returns ``{"content": [{"type": "text", "text"}],
  "details": {"qmem": 1, …}}`` and raises :class:`~qmem.errors.QmemError` for a failure,
  which the host shows as a tool error; text that is not valid Unicode is refused first.
* :meth:`~PluginSession.offered_tools` lists the definitions of :mod:`qmem.hosts.tools`
  (``memory_search`` only where recall is on for an identified host).
* Hooks: :meth:`~PluginSession.session_start` starts a background flush and returns at
  once (records it marks failed are one warning per session);
  :meth:`~PluginSession.system_prompt_addition` gives the rules block (:mod:`qmem.hosts.rules`)
  while a qmem tool is active; :meth:`~PluginSession.context` and
  :meth:`~PluginSession.auto_recall` are automatic recall (:mod:`qmem.recall`) and never raise;
  :meth:`~PluginSession.start_recall` begins it at the first event that carries the prompt.
* :meth:`~PluginSession.command` runs ``/qmem:config`` and ``/qmem:local``
  (:mod:`qmem.hosts.commands`).

Lanes: the session imports each lane where it first uses it — the gateway tools
(:mod:`qmem.store`, :mod:`qmem.sync`) at the first tool call or flush, recall (:mod:`qmem.recall`)
at the first hook or ``memory_search``, the commands at the first command — so an adapter
answers its handshake (the tool list, the rules) without loading the HTTP stack, SQLite or the
credential scanner.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from ..diagnostics import Warnings
from ..errors import ConfigError, InputError, QmemError, ToolError
from ..jsonlines import LONE_SURROGATE
from ..runtime import Runtime
from ..valueclass import dataclass, field
from .rules import machine_identity, project_suggestion, rules_block
from .tools import TOOL_NAMES, TOOLS, ToolDefinition

TYPE_CHECKING = False
if TYPE_CHECKING:  # each lane is imported where a session first uses it (see "Lanes" above)
    from collections.abc import MutableMapping, Sequence
    from typing import Any
    from .commands import HostUI
    from ..recall import Recall

__all__ = ["PluginSession"]


def _check_text(args: Mapping[str, Any]) -> None:
    """InputError naming the first argument holding text that is not valid Unicode (a lone
    surrogate: what undecodable bytes and a ``"\\ud800"`` escape become), before any tool runs."""
    for name, value in args.items():
        if isinstance(name, str) and LONE_SURROGATE.search(name):
            raise InputError("an argument name is not valid Unicode text (it holds a lone surrogate code point)")
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, str) and LONE_SURROGATE.search(item):
                raise InputError(f"{name} is not valid Unicode text (it holds a lone surrogate code point)")
            if isinstance(item, Mapping):
                stack += [*item.keys(), *item.values()]
            elif isinstance(item, list):
                stack += item


@dataclass
class PluginSession:
    """One host session.  ``host`` ("pi", "prime" or None) comes from the adapter (the MCP server
    and Hermes take it from :func:`qmem.config.recall_host`)."""

    host: str | None
    cwd: Path | None  # where the session works; None: the host does not say (Codex's plugin MCP server)
    env: MutableMapping[str, str] = field(default_factory=lambda: dict(os.environ))
    warnings: Warnings = field(default_factory=Warnings)
    skill_hint: str | None = None  # how the host loads the qmem skill, named in the rules (Hermes)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._runtime: Runtime | None = None
        self._recall: Recall | None = None
        self._flusher: threading.Thread | None = None
        self._rules: str | None = None

    # -- services, opened on first use

    @property
    def runtime(self) -> Runtime:
        with self._lock:
            if self._runtime is None:
                self._runtime = Runtime(self.env, warnings=self.warnings)
            return self._runtime

    @property
    def recall(self) -> Recall:
        from ..recall import Recall  # the recall lane (see "Lanes" above)

        runtime = self.runtime
        with self._lock:
            if self._recall is None:
                self._recall = Recall(runtime.recall_services(), host=self.host, cwd=self.cwd)
            return self._recall

    def recall_offered(self) -> bool:
        """Whether ``memory_search`` is offered: the host is pi or Prime and recall is configured and on."""
        if self.host not in ("pi", "prime"):
            return False
        try:
            return self.runtime.config.recall.active
        except QmemError:
            return False

    def offered_tools(self) -> tuple[ToolDefinition, ...]:
        """The tools to list for this session (``memory_search`` only where recall is on)."""
        recall = self.recall_offered()
        return tuple(tool for tool in TOOLS if recall or not tool.needs_recall)

    def close(self) -> None:
        with self._lock:
            recall, runtime = self._recall, self._runtime
            self._recall = self._runtime = None
        if recall is not None:
            recall.close()
        if runtime is not None:
            runtime.close()

    # -- tools

    def call_tool(self, name: str, args: Mapping[str, Any], *, cancel: threading.Event | None = None,
                  closing: bool = False) -> dict:
        """Run a qmem tool; raises QmemError (ToolError, InputError, RecallError…) on failure.

        ``closing``: the host session is ending (a bridge that received ``shutdown``), so a write
        (``qmem_store``, ``qmem_correct``) could not finish before the host's kill: it is queued
        locally without contacting the gateway, as ``store --queue-only`` does, or, with
        ``offlineQueue`` off (nothing may wait in the outbox), refused as not stored."""
        if not isinstance(args, Mapping):
            raise ToolError("tool arguments must be an object")
        _check_text(args)
        if name == "memory_search":
            answer = self.recall.memory_search(args, cancel=cancel)
            return {"content": [{"type": "text", "text": answer["text"]}], "details": answer["details"]}
        from ..store import TOOLS as GATEWAY_TOOLS  # the gateway lane (see "Lanes" above)

        tool = GATEWAY_TOOLS.get(name)
        if tool is None:
            raise ToolError(f"unknown tool {name!r}")
        if name in ("qmem_store", "qmem_correct"):
            if closing and not self.runtime.config.offline_queue:
                raise ToolError("not stored: the session was ending and offlineQueue is off")
            result = tool(self.runtime, args, flush_soon=self.flush_in_background, queue_only=closing)
        else:
            result = tool(self.runtime, args)
        return result.to_host()

    # -- hooks

    def session_start(self) -> None:
        """Send queued records in the background; returns at once."""
        self.flush_in_background()

    def flush_in_background(self) -> None:
        with self._lock:
            if self._flusher is not None and self._flusher.is_alive():
                return
            self._flusher = threading.Thread(target=self._flush_quietly, name="qmem-flush", daemon=True)
            self._flusher.start()

    def _flush_quietly(self) -> None:
        from ..sync import flush  # the gateway lane (see "Lanes" above)

        try:
            runtime = self.runtime
            if runtime.gateway is not None and runtime.outbox.pending_count() and flush(runtime).failed:
                self.warnings.warn("queue_failed")  # the rest went on; the user learns which and why
        except QmemError:
            pass  # a failed background flush changes nothing: the records stay queued
        except Exception:
            self.warnings.warn("gateway")

    def wait_for_flush(self, timeout: float | None = None) -> None:
        """For shutdown and tests: wait until a running background flush ends."""
        thread = self._flusher
        if thread is not None:
            thread.join(timeout)

    def system_prompt_addition(self, active_tools: Sequence[str] | None) -> str | None:
        """The rules block, if any qmem tool is active (None: the host did not say, assume active).

        Built once per session: the host calls this before every prompt, and neither the
        project nor the machine changes meanwhile.
        """
        if active_tools is not None and not any(name in TOOL_NAMES for name in active_tools):
            return None
        if self._rules is None:
            try:
                configured = self.runtime.config.recall.project
            except ConfigError:
                configured = None
            home = (self.env.get("HOME") or "").strip()
            if self.cwd is None:
                project = configured or None
            else:
                project = project_suggestion(self.cwd, configured, Path(home) if home else None)
            self._rules = rules_block(project, *machine_identity(), memory_search=self.recall_offered(),
                                      skill=self.skill_hint, where_told=self.cwd is not None)
        return self._rules

    def context(self, messages: Sequence[Any], *, rlm_depth: object = None, depth_given: bool = False,
                cancel: threading.Event | None = None) -> list[Any]:
        """Auto-recall for one LLM call (never raises)."""
        began = time.monotonic()  # the wait budget counts the recall lane's first load too
        try:
            recall = self.recall
        except QmemError:
            self.warnings.warn("configuration")
            return list(messages)
        return recall.context(messages, rlm_depth=rlm_depth, depth_given=depth_given, cancel=cancel, began=began)

    def auto_recall(self, prompt: str | None, *, rlm_depth: object = None, depth_given: bool = False,
                    cancel: threading.Event | None = None) -> str | None:
        """Automatic recall for a host that places the block itself: the block for ``prompt`` or
        None (never raises).  The same gate, cache and warnings as :meth:`context`."""
        began = time.monotonic()
        try:
            recall = self.recall
        except QmemError:
            self.warnings.warn("configuration")
            return None
        return recall.auto_recall(prompt, rlm_depth=rlm_depth, depth_given=depth_given, cancel=cancel, began=began)

    def start_recall(self, prompt: str | None, *, rlm_depth: object = None, depth_given: bool = False,
                     warm_only: bool = False) -> None:
        """Begin the automatic recall of ``prompt`` in the background, at the first host event that
        carries it (Hermes' ``pre_llm_call``; ``warm_only`` for pi's and Prime's ``before_agent_start``,
        whose text may not be the prompt: see :meth:`qmem.recall.Recall.start`); never raises, never waits."""
        try:
            recall = self.recall
        except QmemError:
            return  # the context hook says so, once
        recall.start(prompt, rlm_depth=rlm_depth, depth_given=depth_given, warm_only=warm_only)

    # -- commands

    def command(self, name: str, args: str, ui: HostUI | None = None) -> str:
        """Run ``/qmem:config`` or ``/qmem:local``; returns the text to show."""
        from .commands import NoUI, config_command, local_command  # the commands (see "Lanes" above)

        ui = ui or NoUI()
        if name == "qmem:local":
            return local_command(self.env, args)
        if name == "qmem:config":
            return config_command(self, args, ui)
        raise ToolError(f"unknown command {name!r}")

    def reload_gateway(self) -> None:
        """Forget the gateway client after ``/qmem:config`` changed the URL or the key."""
        with self._lock:
            runtime = self._runtime
        if runtime is not None:
            runtime.reload_gateway(self.env)
