"""The Hermes Agent adapter: ``register(ctx)`` for a ``qmem`` folder in ``~/.hermes/plugins/``.

Promises:

* Registers the plugin core's tools in the ``qmem`` toolset with OpenAI function schemas
  (``ctx.register_tool(name, toolset, schema, handler)``).  A handler takes the arguments
  dict (plus keyword arguments Hermes adds) and always returns a JSON string — ``{"ok":
  true, "text", "details"}`` or ``{"ok": false, "error", "category"}`` — because Hermes'
  registry accepts only strings.
* Registers ``/qmem:local`` (the same subcommands as ``python3 -m qmem.local``) and
  ``/qmem:config`` (quick mode: ``url``, ``apikey`` — for this process only — ``test``, ``show``).
* **No automatic recall**: Hermes stores the context its ``pre_llm_call`` hook returns in its
  session database and sends it again on later turns, which would break the promise that
  recalled memory is never persisted.  So no hook is registered; ``memory_search`` is
  registered as a tool only where it can work: recall configured and on in the config, and
  ``QMEM_HOST=pi|prime`` naming whose curated memories to use (read once, at registration).
* Imports only host-neutral modules (nothing of the pi adapter), relatively, because Hermes
  imports this folder as ``hermes_plugins.qmem``.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from .diagnostics import Warnings
from .errors import QmemError
from .plugin import PluginSession
from .tools import COMMANDS

__all__ = ["register", "TOOLSET"]

TOOLSET = "qmem"

_session: PluginSession | None = None
_session_lock = threading.Lock()


def _current_session() -> PluginSession:
    """One session per Hermes process, made on the first tool call or command."""
    global _session
    with _session_lock:
        if _session is None:
            host = os.environ.get("QMEM_HOST")
            _session = PluginSession(host=host if host in ("pi", "prime") else None, cwd=Path.cwd(),
                                     env=dict(os.environ), warnings=Warnings())
        return _session


def _tool_handler(name: str) -> Any:
    def handle(args: Any, **_context: Any) -> str:
        # Hermes passes task_id, session_id, user_task… as keywords; qmem needs none of them.
        session = _current_session()
        if name == "memory_search" and session.host is None:
            return json.dumps({"ok": False, "category": "configuration",
                               "error": "memory_search: recall is not configured (set QMEM_HOST=pi or prime)"})
        try:
            result = session.call_tool(name, args if isinstance(args, dict) else {})
        except QmemError as exc:
            return json.dumps({"ok": False, "error": exc.message, "category": exc.category}, ensure_ascii=False)
        return json.dumps({"ok": True, "text": result["content"][0]["text"], "details": result.get("details")},
                          ensure_ascii=False)

    handle.__name__ = f"qmem_{name}_handler"
    return handle


def _command_handler(name: str) -> Any:
    def handle(raw_args: str = "", **_context: Any) -> str:
        try:
            return _current_session().command(name, raw_args or "")
        except QmemError as exc:
            return f"{name}: {exc.message}"

    return handle


def register(ctx: Any) -> None:
    """Hermes' entry point: register the qmem tools and commands on ``ctx``."""
    for tool in _current_session().offered_tools():
        schema = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
        ctx.register_tool(tool.name, TOOLSET, schema, _tool_handler(tool.name), description=tool.description)
    for name, description in COMMANDS.items():
        hint = "[url <URL> | apikey <KEY> | test | show]" if name == "qmem:config" else \
            "status | import | find <words> | queue | flush | enrich [--all] | pull | breaker [reset] | doctor"
        ctx.register_command(name, _command_handler(name), description=description, args_hint=hint)
