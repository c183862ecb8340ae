"""The Hermes Agent adapter: ``register(ctx)`` for a ``qmem`` folder in ``~/.hermes/plugins/``.

Promises:

* **Tools**: the plugin core's tools in the ``qmem`` toolset with OpenAI function schemas
  (``ctx.register_tool(name, toolset, schema, handler)``).  A handler takes the arguments
  dict (plus keyword arguments Hermes adds) and always returns a JSON string — ``{"ok":
  true, "text", "details"}`` or ``{"ok": false, "error", "category"}`` — because Hermes'
  registry accepts only strings.  ``memory_search`` is registered only where it can work:
  recall configured and on, and a lane (``QMEM_HOST=pi|prime``, else the config's
  ``recall.host``; read once, at registration).
* **Commands**: ``/qmem:local`` (the subcommands of ``python3 -m qmem.local``) and
  ``/qmem:config`` (quick mode: ``url``, ``apikey`` — for this process only — ``test``,
  ``show``).  **Skill**: ``qmem:qmem`` (``ctx.register_skill``), which the rules name.
* **Rules and automatic recall, never persisted**, through Hermes' ``llm_execution``
  middleware (Hermes 0.17 and later): for each provider request of the main agent loop,
  qmem passes on a copy of the request with the qmem rules at the end of the system text
  (while qmem's tools are offered) and, on a main turn with recall configured, one
  ``<memory-context trust="untrusted">`` block at the end of the turn's user message
  (:mod:`qmem.hermes.request`, :mod:`qmem.hermes.turns`).  Nothing Hermes keeps is touched.

  Why ``llm_execution`` and not ``llm_request`` (which DESIGN §5 first named): Hermes keeps
  using the request an ``llm_request`` callback returns after the call — it writes it to
  ``sessions/request_dump_*.json`` on a provider error and under ``HERMES_DUMP_REQUESTS=1``,
  and hands it to ``pre_api_request`` hooks (request loggers) — so the rules and recalled text
  would reach the disk.  ``llm_execution`` wraps the call itself: Hermes' own ``api_kwargs``
  stay as they were and only the provider sees the copy.  That callback receives the *live*
  request, whose nested lists are the stored conversation's: it is amended copy-on-write.
  ``next_call`` is called exactly once and outside the guard around qmem's own work, so a
  provider error reaches Hermes' retry and fallback unchanged; a failure of qmem's own sends
  the request unamended (fail open).
* **The prompt** comes from a ``pre_llm_call`` hook that only observes and returns None:
  context a ``pre_llm_call`` hook returns is stored in Hermes' ``state.db`` and sent again on
  later turns, so qmem never returns any.
* **On a Hermes without that middleware** the plugin registers tools, commands and the skill
  only, and says once on stderr why the rules and automatic recall are off.  The middleware
  is detected, not inferred from a version: ``ctx.register_middleware`` must exist and
  Hermes' ``VALID_MIDDLEWARE`` (read from the already loaded ``hermes_cli.middleware``) must
  list ``llm_execution``, because Hermes accepts an unknown kind with a mere log line.
* Imports only host-neutral qmem modules (nothing of the pi adapter), relatively, because
  Hermes imports this folder as ``hermes_plugins.qmem``; no Hermes module is imported: the two
  it reads (``hermes_cli.middleware``, ``tools.skill_provenance``) are looked up among the
  modules Hermes has loaded.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

from ..config import recall_host
from ..diagnostics import Warnings, stderr_sink
from ..errors import QmemError
from ..hosts.session import PluginSession
from ..hosts.tools import COMMANDS, TOOL_NAMES
from ..recall import MAX_PROMPT_CHARS
from .request import amended, offered_tools, prompt_found
from .turns import Turns, main_turn

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["register"]

TOOLSET = "qmem"
SKILL = Path(__file__).resolve().parents[1] / "skills" / "qmem" / "SKILL.md"
SKILL_HINT = 'skill_view("qmem:qmem")'
MIDDLEWARE = "llm_execution"
NO_MIDDLEWARE = ("qmem: this Hermes has no llm_execution middleware (Hermes 0.17 added it), so the qmem rules "
                 "and automatic recall are off; the qmem tools work.")

_session: PluginSession | None = None
_turns: Turns | None = None
_session_lock = threading.Lock()
_said_no_middleware = False


def _current_session() -> PluginSession:
    """One session per Hermes process, made on registration."""
    global _session, _turns
    with _session_lock:
        if _session is None:
            session = PluginSession(host=recall_host(os.environ), cwd=Path.cwd(), env=dict(os.environ),
                                    warnings=Warnings(), skill_hint=SKILL_HINT)
            _session = session
            _turns = Turns(lambda prompt: session.auto_recall(prompt[:MAX_PROMPT_CHARS]),
                           start=lambda prompt: session.start_recall(prompt[:MAX_PROMPT_CHARS]))
        return _session


def _current_turns() -> Turns:
    _current_session()
    assert _turns is not None
    return _turns


# --- tools and commands --------------------------------------------------------------------

def _tool_handler(name: str) -> Any:
    def handle(args: Any, **_context: Any) -> str:
        # Hermes passes task_id, session_id, user_task… as keywords; qmem needs none of them.
        session = _current_session()
        if name == "memory_search" and session.host is None:
            return json.dumps({"ok": False, "category": "configuration",
                               "error": "memory_search: recall is not configured (set QMEM_HOST=pi or prime, "
                                        "or recall.host in the config)"})
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


# --- rules and recall ----------------------------------------------------------------------

def _loaded_attribute(module: str, name: str) -> Any:
    """An attribute of a module Hermes has already loaded (None when it has not)."""
    return getattr(sys.modules.get(module), name, None)


def _write_origin() -> object:
    """Hermes' write origin of this thread's turn (None when Hermes has not said)."""
    read = _loaded_attribute("tools.skill_provenance", "get_current_write_origin")
    try:
        return read() if callable(read) else None
    except Exception:  # whatever went wrong there, it is no sign of a main turn
        return None


def _is_main(hermes: Mapping[str, Any]) -> bool:
    return main_turn(platform=hermes.get("platform"), write_origin=_write_origin(), task_id=hermes.get("task_id"),
                     session_id=hermes.get("session_id"), env=os.environ)


def _observe_prompt(**hermes: Any) -> None:
    """``pre_llm_call``: note a main turn's prompt.  Returns None: Hermes adds and stores nothing."""
    try:
        _current_turns().observe(turn_id=hermes.get("turn_id"), user_message=hermes.get("user_message"),
                                 main=_is_main(hermes))
    except Exception:  # a bug here costs this turn its recall, never the turn
        _current_session().warnings.warn("retrieval")
    return None


def _amend(hermes: Mapping[str, Any]) -> dict[str, Any] | None:
    """The request to send instead of ``hermes["request"]``, or None to send it as it is."""
    request, api_mode = hermes.get("request"), hermes.get("api_mode")
    if not isinstance(request, Mapping) or not isinstance(api_mode, str):
        return None
    session = _current_session()
    rules = session.system_prompt_addition(None) if offered_tools(request) & set(TOOL_NAMES) else None
    turns, turn_id = _current_turns(), hermes.get("turn_id")
    prompt = turns.prompt(turn_id) if _is_main(hermes) else None
    if prompt is None or not prompt_found(request, api_mode, prompt):
        prompt = None  # no block, and nothing asked of the recall services
    block = turns.block(turn_id) if prompt is not None else None
    return amended(request, api_mode, rules=rules, prompt=prompt, block=block)


def _llm_execution(**hermes: Any) -> Any:
    """``llm_execution`` middleware: send a copy of the request with the rules and the block."""
    next_call = hermes["next_call"]
    try:
        request = _amend(hermes)
    except Exception:  # fail open: the request goes as Hermes built it
        _current_session().warnings.warn("formatting")
        request = None
    # Outside the guard: a provider error must reach Hermes' own retry and fallback as it is.
    return next_call() if request is None else next_call(request)


def _has_middleware(ctx: Any) -> bool:
    if not callable(getattr(ctx, "register_middleware", None)):
        return False
    kinds = _loaded_attribute("hermes_cli.middleware", "VALID_MIDDLEWARE")
    return isinstance(kinds, (set, frozenset, list, tuple)) and MIDDLEWARE in kinds


def _say_no_middleware() -> None:
    global _said_no_middleware
    with _session_lock:
        if _said_no_middleware:
            return
        _said_no_middleware = True
    stderr_sink(NO_MIDDLEWARE)


def register(ctx: Any) -> None:
    """Hermes' entry point: tools, commands and skill; rules and recall where the middleware exists.

    Safe to call again (``discover_and_load(force=True)`` clears Hermes' registrations first):
    the session and its turns are kept, the callbacks registered anew.
    """
    session = _current_session()
    for tool in session.offered_tools():
        schema = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
        ctx.register_tool(tool.name, TOOLSET, schema, _tool_handler(tool.name), description=tool.description)
    for name, description in COMMANDS.items():
        hint = "[url <URL> | apikey <KEY> | test | show]" if name == "qmem:config" else \
            "status | import | find <words> | queue [retry] | flush | enrich [--all] | pull | breaker [reset] | doctor | recall-log"
        ctx.register_command(name, _command_handler(name), description=description, args_hint=hint)
    if callable(getattr(ctx, "register_skill", None)):
        ctx.register_skill("qmem", SKILL, description="How to use qmem shared long-term memory well")
    if not _has_middleware(ctx):
        _say_no_middleware()
        return
    ctx.register_hook("pre_llm_call", _observe_prompt)
    ctx.register_middleware(MIDDLEWARE, _llm_execution)
