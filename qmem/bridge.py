"""``python3 -m qmem.bridge``: the pi / Prime adapter's Python side, JSON lines on stdio.

The JavaScript shim (``index.js``) spawns this module and relays the host's events.
Every line is one JSON object; stdout carries nothing else (``print`` goes to stderr).

Shim → bridge, requests (each answered once, by ``id``)::

    {"id": 1, "method": "session_start", "params": {"cwd", "extensionDir", "loaded", "hostProcess", "header"}}
    {"id": 2, "method": "tool", "params": {"name", "args"}}
    {"id": 3, "method": "context", "params": {"messages", "rlmDepth", "depthGiven"}}
    {"id": 4, "method": "before_agent_start", "params": {"activeTools", "prompt", "rlmDepth", "depthGiven"}}
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
``session_start`` carries the facts :func:`qmem.hosts.identity.identify_host` decides the host
from: ``loaded`` (the host's ``sourceInfo`` of this extension: ``path``, ``baseDir``…, or
null), ``hostProcess`` (``process.title``) and ``header`` (``{"rlmDepth", "hasRlmDepth"}``),
and where they truly conflict, the user's ``QMEM_HOST`` or ``recall.host``; ``cwd`` is the session's directory, data only: the bridge runs in its own directory.
The ``session_start`` answer is ``{"host", "recall"}``: ``recall`` says whether
``memory_search`` is offered (recall configured and on, host identified), which the shim
registers only then.  Requests run concurrently on worker threads; stdin EOF or
``shutdown`` ends the process.

No line ends the conversation (reading and writing: :mod:`qmem.jsonlines`):

* A message with an ``id`` is a request and gets exactly one answer.  The id is a string or
  an integer (any length), echoed exactly; another id (``null``, ``1.5``, a list, an object) is
  refused with an error that echoes it when it can be written as strict JSON, else carries
  ``null``.  ``cancel`` and ``ui_result`` are notifications: sent with an id, they are refused.
  A cancel names its request by JSON type and value (``true`` does not cancel ``1``).
* A line that is not JSON (``NaN``/``Infinity`` included, or nested deeper than the parser
  follows) or not an object is dropped with the ``bridge_protocol`` warning (once a session);
  if it still shows a top-level ``id``, that request is refused with an error.  So is a line
  over 16 MiB (``jsonlines.LINE_LIMIT``), read in bounded memory, refused naming the limit
  when its first 4 KiB show its id.  Invalid UTF-8
  inside a string reads as U+FFFD.  Every line written is strict JSON.
* At stdin EOF or ``shutdown`` every request read is answered before the process exits:
  running ones finish (reads among them cancelled, open dialogs closed; a running write was
  queued before it was sent, so the shim's kill loses nothing); of those not yet started,
  writes (``qmem_store``, ``qmem_correct``) are queued locally at once without contacting
  the gateway (answered "Queued locally as …, NOT yet shared"; the next session's flush
  sends them; with ``offlineQueue`` off they are refused as not stored), pings run, the
  others are answered "not run".  ``shutdown`` is answered last.

On a Python older than 3.10 the bridge never reports ready: it prints one line on stderr,
``qmem needs Python ≥ 3.10, found 3.9 (set QMEM_PYTHON)``, and exits 1; the shim shows that
line as its one warning.
"""

if __name__ == "__main__":  # `python3 -m qmem.bridge`: nothing more from the working directory (see qmem/entryguard.py)
    from .entryguard import drop_working_directory

    drop_working_directory()

from .entryguard import require_supported_python  # noqa: E402

require_supported_python(" (set QMEM_PYTHON)")

import itertools  # noqa: E402  (after the version check: one line on an old Python, no traceback)
import os  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from concurrent.futures import Future, ThreadPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

from . import __version__  # noqa: E402
from .config import recall_host  # noqa: E402
from .diagnostics import Warnings  # noqa: E402
from .errors import QmemError  # noqa: E402
from .hosts.identity import HostEvidence, identify_host  # noqa: E402
from .hosts.session import PluginSession  # noqa: E402
from .jsonlines import UnreadableLine, decode_line, echoable_id, encode_line, id_key, read_lines  # noqa: E402
from .valueclass import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, BinaryIO

__all__ = []

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

    def _ask(self, method: str, params: "dict[str, Any]") -> "Any":
        if not self._has_ui:
            return None
        return self._bridge.ask_ui(method, params)


WRITE_TOOLS = frozenset({"qmem_store", "qmem_correct"})


@dataclass(eq=False)  # two requests are the same only if they are one object
class _Request:
    """An accepted request, from the line that carried it until its one answer is sent."""

    id: "Any"
    key: "tuple[str, Any]"
    method: "Any"
    params: "dict[str, Any]"
    cancel: threading.Event = field(default_factory=threading.Event)
    started: "Future[None] | None" = None  # the worker's run, once submitted

    def runs_at_shutdown(self) -> bool:
        """A ping (instant) or a write (queued locally, never sent, when it starts after the
        bridge began closing: its data would be lost otherwise): run even when closing."""
        return self.method == "ping" or (self.method == "tool" and self.params.get("name") in WRITE_TOOLS)


class Bridge:
    def __init__(self, stdin: "BinaryIO", stdout: "BinaryIO", env: dict[str, str]) -> None:
        self._in = stdin
        self._out = stdout
        self._env = env
        self._write_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="qmem-bridge")
        self._live: "dict[tuple[str, Any], list[_Request]]" = {}
        self._ui_waits: "dict[str, tuple[threading.Event, list[Any]]]" = {}
        self._ui_ids = itertools.count(1)
        self._state_lock = threading.Lock()
        self._closing = threading.Event()
        self.warnings = Warnings(lambda sentence: self.send({"event": "warning", "message": sentence}))
        self.session: PluginSession | None = None
        # A session made for a request that came before session_start (the shim restarted the
        # bridge, or a command raced the start): it knows neither the host nor the project, and
        # session_start replaces it; replaced sessions are closed at the end.
        self._provisional = False
        self._replaced: list[PluginSession] = []

    # -- output

    def send(self, message: "dict[str, Any]") -> None:
        """Write one line; TypeError if ``message`` is not JSON data (the caller answers otherwise)."""
        data = encode_line(message)
        with self._write_lock:
            try:
                self._out.write(data)
                self._out.flush()
            except (BrokenPipeError, ValueError, OSError):
                self._closing.set()  # the shim is gone: nobody to answer

    def ask_ui(self, method: str, params: "dict[str, Any]") -> "Any":
        uid = f"u{next(self._ui_ids)}"
        done, box = threading.Event(), []
        with self._state_lock:
            if self._closing.is_set():
                return None  # shutting down: nobody will answer a dialog now
            self._ui_waits[uid] = (done, box)
        self.send({"ui": uid, "method": method, "params": params})
        done.wait(UI_TIMEOUT_S)
        with self._state_lock:
            self._ui_waits.pop(uid, None)
        return box[0] if box else None

    def _refuse(self, request_id: "Any", reason: str) -> None:
        self.send({"id": echoable_id(request_id), "error": {"message": reason, "category": "bridge"}})

    # -- input

    def serve(self) -> None:
        """Answer requests until stdin ends or ``shutdown``; every request read is answered once."""
        self.send({"event": "ready", "version": __version__, "pid": os.getpid()})
        for raw in read_lines(self._in):
            if self._closing.is_set():
                break
            if not isinstance(raw, UnreadableLine) and not raw.strip():
                continue
            try:
                if isinstance(raw, UnreadableLine):  # over the line limit (16 MiB), read in bounded memory
                    raise raw
                message = decode_line(raw)
            except UnreadableLine as unreadable:
                self.warnings.warn("bridge_protocol")
                if unreadable.members is not None and "id" in unreadable.members:
                    self._refuse(unreadable.members["id"], f"the request could not be read: {unreadable.reason}")
                continue
            if not isinstance(message, dict):
                self.warnings.warn("bridge_protocol")
                continue
            method = message.get("method")
            params = message.get("params") if isinstance(message.get("params"), dict) else {}
            if "id" not in message:
                if method == "shutdown":
                    self._finish(None)
                    return
                self._notification(method, params)
                continue
            request_id = message["id"]
            key = id_key(request_id)
            if key is None:
                self._refuse(request_id, "the request id must be a string or an integer")
            elif method in ("cancel", "ui_result"):
                self._refuse(request_id, f"{method} is a notification: it takes no id")
            elif method == "shutdown":
                self._finish(request_id)
                return
            else:
                self._accept(_Request(request_id, key, method, params))
        self._finish(None)

    def _notification(self, method: "Any", params: "dict[str, Any]") -> None:
        if method == "cancel":
            key = id_key(params.get("id"))  # by JSON type and value: true does not cancel 1
            with self._state_lock:
                for request in self._live.get(key, ()) if key is not None else ():
                    request.cancel.set()
        elif method == "ui_result" and isinstance(params.get("id"), str):
            with self._state_lock:
                wait = self._ui_waits.get(params["id"])
            if wait is not None:
                wait[1].append(params.get("value"))
                wait[0].set()

    def _accept(self, request: _Request) -> None:
        with self._state_lock:
            self._live.setdefault(request.key, []).append(request)
            request.started = self._pool.submit(self._run, request)

    def _finish(self, request_id: "Any") -> None:
        """Close: every accepted request is answered, then ``shutdown`` (if it was one) last.

        The shim kills the bridge two seconds after ``shutdown``.  Requests already running
        finish, reads among them cancelled (a running write was queued before it was sent: if
        the kill comes first, the next flush sends it).  Those not yet started are answered
        here at once, never behind the running ones: a write is queued locally without
        contacting the gateway, a ping is answered, anything else is refused as not run.
        Dialogs close unanswered.
        """
        self._closing.set()
        with self._state_lock:
            live = [request for requests in self._live.values() for request in requests]
            waits = list(self._ui_waits.values())
        for request in live:
            if not request.runs_at_shutdown():
                request.cancel.set()
        for done, _ in waits:
            done.set()
        # A request whose worker has not picked it up is taken back and run here (queue-only
        # for writes, see _run); one a worker picked up meanwhile sees the bridge closing too.
        for request in live:
            if request.started is not None and request.started.cancel():
                self._run(request)
        self._pool.shutdown(wait=True)
        session = self.session
        if session is not None:
            session.wait_for_flush(timeout=2.0)
        for done in (*self._replaced, *([session] if session is not None else [])):
            done.close()
        if request_id is not None:
            self.send({"id": request_id, "result": {"ok": True}})

    def _run(self, request: _Request) -> None:
        try:
            closing = self._closing.is_set()
            if closing and not request.runs_at_shutdown():
                self._refuse(request.id, "not run: the bridge was shutting down")
            else:
                # A write that starts once the bridge is closing would not finish before the
                # shim's kill: it is queued locally, at once, and the next flush sends it.
                self._handle(request, closing=closing)
        finally:
            with self._state_lock:
                requests = self._live.get(request.key, [])
                if request in requests:
                    requests.remove(request)
                if not requests:
                    self._live.pop(request.key, None)

    def _handle(self, request: _Request, *, closing: bool = False) -> None:
        request_id = request.id
        try:
            result = self._dispatch(request.method, request.params, request.cancel, closing=closing)
        except QmemError as exc:
            answer = {"id": request_id, "error": {"message": exc.message, "category": exc.category}}
        except Exception as exc:  # a bug must not kill the bridge: report it as a failed request
            answer = {"id": request_id, "error": {"message": f"qmem internal error ({exc.__class__.__name__})",
                                                  "category": "internal"}}
        else:
            answer = {"id": request_id, "result": result}
        try:
            self.send(answer)
        except (TypeError, ValueError, RecursionError):  # a result that is not JSON data: still one answer
            self.send({"id": request_id, "error": {"message": "qmem internal error (unwritable result)",
                                                   "category": "internal"}})

    def _session(self, start: "dict[str, Any] | None" = None) -> PluginSession:
        """The session; ``start`` is session_start's params, which say where the session is.

        Before session_start, a provisional session answers: host unknown (no automatic
        recall) and the user's home as its directory (no project suggested) — never the
        bridge's own directory, which is qmem's checkout, not the user's project.
        """
        with self._state_lock:
            if start is not None and self._provisional and self.session is not None:
                self._replaced.append(self.session)
                self.session = None
            if self.session is None:
                params = start or {}
                evidence = HostEvidence.from_session_start(params)
                host = identify_host(evidence, self._env)
                if host is None and start is not None:  # a true conflict: the user's QMEM_HOST / recall.host settles it
                    host = identify_host(evidence, self._env, recall_host(self._env))
                cwd = params.get("cwd") if isinstance(params.get("cwd"), str) else self._env.get("HOME") or "/"
                self.session = PluginSession(host=host if start is not None else None, cwd=Path(cwd),
                                             env=dict(self._env), warnings=self.warnings)
                self._provisional = start is None
            return self.session

    def _dispatch(self, method: "Any", params: "dict[str, Any]", cancel: threading.Event, *,
                  closing: bool = False) -> "Any":
        if method == "ping":
            return {"pong": True}
        if method == "session_start":
            session = self._session(params)
            session.session_start()
            return {"host": session.host, "recall": session.recall_offered()}
        session = self._session()
        if method == "tool":
            args = params.get("args") if isinstance(params.get("args"), dict) else {}
            return session.call_tool(str(params.get("name")), args, cancel=cancel, closing=closing)
        if method == "context":
            messages = params.get("messages") if isinstance(params.get("messages"), list) else []
            out = session.context(messages, rlm_depth=params.get("rlmDepth"),
                                  depth_given=params.get("depthGiven") is True, cancel=cancel)
            from .recall import recall_patch  # loaded by the session's recall lane by now (see qmem.hosts.session)

            return recall_patch(messages, out)
        if method == "before_agent_start":
            if isinstance(params.get("prompt"), str):  # the first event with the prompt: recall gets ready now,
                # on its own thread: loading the lane must not hold up this answer (pi waits for it)
                threading.Thread(target=session.start_recall, args=(params["prompt"],), daemon=True,
                                 kwargs={"rlm_depth": params.get("rlmDepth"), "warm_only": True,
                                         "depth_given": params.get("depthGiven") is True},
                                 name="qmem-recall-start").start()
            active = params.get("activeTools")
            addition = session.system_prompt_addition(active if isinstance(active, list) else None)
            return {"append": addition}
        if method == "command":
            ui = _BridgeUI(self, params.get("hasUI") is True)
            return {"text": session.command(str(params.get("name")), str(params.get("args") or ""), ui)}
        named = repr(method[:100]) if isinstance(method, str) else "(none)"
        raise QmemError(f"unknown bridge method {named}", category="bridge")


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
