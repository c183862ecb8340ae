"""``python3 -m qmem.bridge``: the pi / Prime adapter's Python side, JSON lines on stdio.

The JavaScript shim (``index.js``) spawns this module and relays the host's events.
Every line is one JSON object; stdout carries nothing else (``print`` goes to stderr).

Shim → bridge, requests (each answered once, by ``id``)::

    {"id": 1, "method": "session_start", "params": {"cwd", "extensionDir", "loaded", "hostProcess", "header"}}
    {"id": 2, "method": "tool", "params": {"name", "args"}}
    {"id": 3, "method": "context", "params": {"messages", "rlmDepth", "depthGiven"}}
    {"id": 4, "method": "before_agent_start", "params": {"activeTools"}}
    {"id": 5, "method": "command", "params": {"name", "args", "hasUI"}}
    {"id": 6, "method": "shutdown"}

and notifications: ``{"method": "cancel", "params": {"id": 2}}``, ``{"method": "ui_result",
"params": {"id": "u1", "value": …}}``.

Bridge → shim: ``{"event": "ready"}`` first; answers ``{"id", "result"}`` or ``{"id", "error":
{"message", "category"}}``; UI requests ``{"ui": "u1", "method": "select"|"input"|"confirm",
"params"}`` (answered by ``ui_result``) and ``{"ui": null, "method": "notify", …}``; warnings
``{"event": "warning", "message"}`` (fixed sentences, each at most once).

The context answer is a patch, ``{"drop": [indices], "append": message | null}``: the shim
applies it to its own copy of the messages, so the array crosses the pipe only once.
``session_start`` carries the facts :func:`qmem.hostidentity.identify_host` decides the host
from: ``loaded`` (the host's ``sourceInfo`` of this extension: ``path``, ``baseDir``…, or
null), ``hostProcess`` (``process.title``) and ``header`` (``{"rlmDepth", "hasRlmDepth"}``);
``cwd`` is the session's directory, data only: the bridge runs in its own directory.
The ``session_start`` answer is ``{"host", "recall"}``: ``recall`` says whether
``memory_search`` is offered (recall configured and on, host identified), which the shim
registers only then.  Requests run concurrently on worker threads; stdin EOF or
``shutdown`` ends the process.

On a Python older than 3.10 the bridge never reports ready: it prints one line on stderr,
``qmem needs Python ≥ 3.10, found 3.9 (set QMEM_PYTHON)``, and exits 1; the shim shows that
line as its one warning.
"""

from .pythonversion import require_supported_python

require_supported_python(" (set QMEM_PYTHON)")

import itertools  # noqa: E402  (after the version check: one line on an old Python, no traceback)
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, BinaryIO  # noqa: E402

from . import __version__  # noqa: E402
from .diagnostics import Warnings  # noqa: E402
from .errors import QmemError  # noqa: E402
from .hostidentity import HostEvidence, identify_host  # noqa: E402
from .jsonlines import encode_line  # noqa: E402
from .plugin import PluginSession  # noqa: E402
from .recall import recall_patch  # noqa: E402

__all__ = ["Bridge", "main"]

UI_TIMEOUT_S = 600.0


class _BridgeUI:
    """ctx.ui over the pipe; without a UI every call is a no-op, as in the host."""

    def __init__(self, bridge: "Bridge", has_ui: bool) -> None:
        self._bridge = bridge
        self._has_ui = has_ui

    def select(self, title: str, options: list[str]) -> str | None:
        value = self._ask("select", {"title": title, "options": options})
        return value if isinstance(value, str) and value in options else None

    def input(self, title: str, placeholder: str = "") -> str | None:
        value = self._ask("input", {"title": title, "placeholder": placeholder})
        return value if isinstance(value, str) else None

    def confirm(self, title: str, message: str) -> bool:
        return self._ask("confirm", {"title": title, "message": message}) is True

    def notify(self, message: str, level: str = "info") -> None:
        if self._has_ui:
            self._bridge.send({"ui": None, "method": "notify", "params": {"message": message, "level": level}})

    def _ask(self, method: str, params: dict[str, Any]) -> Any:
        if not self._has_ui:
            return None
        return self._bridge.ask_ui(method, params)


class Bridge:
    def __init__(self, stdin: BinaryIO, stdout: BinaryIO, env: dict[str, str]) -> None:
        self._in = stdin
        self._out = stdout
        self._env = env
        self._write_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="qmem-bridge")
        self._cancels: dict[Any, threading.Event] = {}
        self._ui_waits: dict[str, tuple[threading.Event, list[Any]]] = {}
        self._ui_ids = itertools.count(1)
        self._state_lock = threading.Lock()
        self._closing = threading.Event()
        self.warnings = Warnings(lambda sentence: self.send({"event": "warning", "message": sentence}))
        self.session: PluginSession | None = None

    # -- output

    def send(self, message: dict[str, Any]) -> None:
        data = encode_line(message)
        with self._write_lock:
            try:
                self._out.write(data)
                self._out.flush()
            except (BrokenPipeError, ValueError, OSError):
                self._closing.set()  # the shim is gone: nobody to answer

    def ask_ui(self, method: str, params: dict[str, Any]) -> Any:
        uid = f"u{next(self._ui_ids)}"
        done, box = threading.Event(), []
        with self._state_lock:
            self._ui_waits[uid] = (done, box)
        self.send({"ui": uid, "method": method, "params": params})
        done.wait(UI_TIMEOUT_S)
        with self._state_lock:
            self._ui_waits.pop(uid, None)
        return box[0] if box else None

    # -- input

    def serve(self) -> None:
        self.send({"event": "ready", "version": __version__, "pid": os.getpid()})
        for raw in self._in:
            if self._closing.is_set():
                break
            try:
                message = json.loads(raw)
            except ValueError:
                self.warnings.warn("bridge_protocol")
                continue
            if not isinstance(message, dict):
                continue
            method = message.get("method")
            params = message.get("params") if isinstance(message.get("params"), dict) else {}
            if method == "cancel":
                with self._state_lock:
                    event = self._cancels.get(params.get("id"))
                if event is not None:
                    event.set()
            elif method == "ui_result":
                with self._state_lock:
                    wait = self._ui_waits.get(str(params.get("id")))
                if wait is not None:
                    wait[1].append(params.get("value"))
                    wait[0].set()
            elif method == "shutdown":
                self._finish(message.get("id"))
                return
            elif "id" in message:
                cancel = threading.Event()
                with self._state_lock:
                    self._cancels[message["id"]] = cancel
                self._pool.submit(self._handle, message["id"], method, params, cancel)
        self._finish(None)

    def _finish(self, request_id: Any) -> None:
        self._closing.set()
        for done, _ in list(self._ui_waits.values()):
            done.set()
        session = self.session
        if session is not None:
            session.wait_for_flush(timeout=2.0)
        self._pool.shutdown(wait=True, cancel_futures=True)
        if session is not None:
            session.close()
        if request_id is not None:
            self.send({"id": request_id, "result": {"ok": True}})

    def _handle(self, request_id: Any, method: Any, params: dict[str, Any], cancel: threading.Event) -> None:
        try:
            result = self._dispatch(method, params, cancel)
        except QmemError as exc:
            self.send({"id": request_id, "error": {"message": exc.message, "category": exc.category}})
        except Exception as exc:  # a bug must not kill the bridge: report it as a failed request
            self.send({"id": request_id, "error": {"message": f"qmem internal error ({exc.__class__.__name__})",
                                                   "category": "internal"}})
        else:
            self.send({"id": request_id, "result": result})
        finally:
            with self._state_lock:
                self._cancels.pop(request_id, None)

    def _session(self, params: dict[str, Any] | None = None) -> PluginSession:
        with self._state_lock:
            if self.session is None:
                params = params or {}
                host = identify_host(HostEvidence.from_session_start(params), self._env)
                cwd = params.get("cwd") if isinstance(params.get("cwd"), str) else os.getcwd()
                self.session = PluginSession(host=host, cwd=Path(cwd),
                                             env=dict(self._env), warnings=self.warnings)
            return self.session

    def _dispatch(self, method: Any, params: dict[str, Any], cancel: threading.Event) -> Any:
        if method == "session_start":
            session = self._session(params)
            session.session_start()
            return {"host": session.host, "recall": session.recall_offered()}
        session = self._session()
        if method == "tool":
            args = params.get("args") if isinstance(params.get("args"), dict) else {}
            return session.call_tool(str(params.get("name")), args, cancel=cancel)
        if method == "context":
            messages = params.get("messages") if isinstance(params.get("messages"), list) else []
            out = session.context(messages, rlm_depth=params.get("rlmDepth"),
                                  depth_given=params.get("depthGiven") is True, cancel=cancel)
            return recall_patch(messages, out)
        if method == "before_agent_start":
            active = params.get("activeTools")
            addition = session.system_prompt_addition(active if isinstance(active, list) else None)
            return {"append": addition}
        if method == "command":
            ui = _BridgeUI(self, params.get("hasUI") is True)
            return {"text": session.command(str(params.get("name")), str(params.get("args") or ""), ui)}
        if method == "ping":
            return {"pong": True}
        raise QmemError(f"unknown bridge method {method!r}", category="bridge")


def main() -> int:
    # stdout is the protocol channel: anything printed by mistake goes to stderr instead.
    out = sys.stdout.buffer
    sys.stdout = sys.stderr
    bridge = Bridge(sys.stdin.buffer, out, dict(os.environ))
    try:
        bridge.serve()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
