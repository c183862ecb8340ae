"""``python3 -m qmem.mcp``: the qmem tools for any MCP client, over stdio, standard library only.

Promises:

* **Framing.** Newline-delimited JSON-RPC 2.0 on stdin/stdout; stdout carries protocol
  messages only (anything printed by mistake goes to stderr, with the logs); the server exits
  when stdin ends.
* **Handshake.** ``initialize`` echoes the client's protocol version when it is one of
  :data:`PROTOCOL_VERSIONS` and answers the latest otherwise; ``notifications/initialized`` is
  never answered; ``ping`` answers ``{}``.  Features follow the negotiated version: tool
  annotations from 2025-03-26, ``title`` and ``structuredContent`` from 2025-06-18 (never for
  ``memory_search``, whose text is the fenced block: clients that show structuredContent in place of
  the text would drop the fence).
* **No line ends the session** (reading and writing: :mod:`qmem.jsonlines`).  A line that is
  not JSON — ``NaN``/``Infinity`` included, or nested deeper than the parser follows — is
  -32700 with the request's id when it can still be read, else id null; invalid UTF-8 inside
  a string reads as U+FFFD, as in the official SDKs.  Not an object → -32600; a batch array is
  answered as one array under 2024-11-05 and 2025-03-26 (``initialize`` refused inside it),
  and is -32600 under later versions, which removed batches.  An unknown method → -32601, also
  before ``initialize`` (newer SDK clients probe with ``server/discover`` and fall back on
  that answer); a line over 16 MiB (``jsonlines.LINE_LIMIT``) → -32600 naming the limit, read in
  bounded memory, with the id when its first 4 KiB show it; bad ``params`` or an unknown tool → -32602.  A tool that fails is a result
  with ``isError: true``, not a protocol error.  Every line written is strict JSON.
* **Ids** are strings or integers written without fraction or exponent, of any length, and
  are echoed exactly (an integer too long for ``int()`` digit for digit, a lone surrogate as
  ``\\udXXX``); another id (``null``, ``true``, ``1.0``, a list) is -32600 with id null.
* **Order.** Requests are answered one at a time, in the order they arrived, so pipelined
  requests are never lost or reordered; ``notifications/cancelled`` cancels the one in flight
  when its ``requestId`` has the same JSON type and value (``true`` and ``"1"`` are not ``1``).
  Every request read before stdin ends is answered before the server exits (each tool call
  bounded by its own timeouts).
* **Tools** are the plugin core's (``qmem_store`` … ``memory_search``), same logic as in pi.
  ``memory_search`` is listed only where it can work: recall configured and on, and a host
  identity, ``QMEM_HOST=pi|prime`` or else the config's ``recall.host``; called anyway, it answers
  why it is not available.  MCP clients pass few environment variables to a server (the
  official SDK: HOME, PATH and what the client's configuration adds), so credentials must be
  set in the client's server entry.
* **Instructions** are the plugin core's rules block (:func:`qmem.hosts.rules.rules_block`), the
  same text pi and Prime append to the system prompt, machine identification included.
* **Always an answer.** Text that cannot be encoded (a lone surrogate a client sent) is
  a tool error naming the argument, never -32603, and an answer is always written.
* ``python3 -m qmem.mcp --version`` prints the version; on a Python older than 3.10 the server
  prints one line and exits 1 before reading anything.
"""

if __name__ == "__main__":  # `python3 -m qmem.mcp`: nothing more from the working directory (see qmem/entryguard.py)
    from .entryguard import drop_working_directory

    drop_working_directory()

from .entryguard import require_supported_python  # noqa: E402

require_supported_python()

import os  # noqa: E402  (after the version check: one line on an old Python, no traceback)
import queue  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, BinaryIO  # noqa: E402

from . import __version__  # noqa: E402
from .config import recall_host  # noqa: E402
from .diagnostics import Warnings  # noqa: E402
from .errors import QmemError  # noqa: E402
from .hosts.session import PluginSession  # noqa: E402
from .hosts.tools import TOOLS  # noqa: E402
from .jsonlines import TOO_LONG, UnreadableLine, decode_line, encode_line, id_key, is_request_id, read_lines  # noqa: E402

__all__ = ["main"]

PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST = PROTOCOL_VERSIONS[-1]

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603



#: Protocol versions whose peers may send JSON-RPC batches: 2025-03-26 requires receiving them,
#: 2024-11-05 takes JSON-RPC 2.0 whole; 2025-06-18 removed them.
BATCH_VERSIONS = ("2024-11-05", "2025-03-26")

_STOP = object()  # the worker's stop signal: no line a client sends can be this object


def _error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


class _RequestError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _at_least(version: str, minimum: str) -> bool:
    return PROTOCOL_VERSIONS.index(version) >= PROTOCOL_VERSIONS.index(minimum)


class McpServer:
    def __init__(self, session: PluginSession, stdin: BinaryIO, stdout: BinaryIO) -> None:
        self.session = session
        self._in = stdin
        self._out = stdout
        self._version = LATEST
        self._inbox: queue.Queue[Any] = queue.Queue()  # parsed lines, UnreadableLine errors, then _STOP
        self._current: tuple[tuple[str, Any], threading.Event] | None = None
        self._current_lock = threading.Lock()

    # -- output

    def _send(self, answer: dict[str, Any] | list[dict[str, Any]]) -> None:
        if isinstance(answer, list):
            data = b"[" + b",".join(self._encoded(item).rstrip(b"\n") for item in answer) + b"]\n"
        else:
            data = self._encoded(answer)
        self._out.write(data)
        self._out.flush()

    def _encoded(self, answer: dict[str, Any]) -> bytes:
        try:
            return encode_line(answer)
        except (TypeError, ValueError, RecursionError):  # a result that is not JSON data: still one answer
            sys.stderr.write("qmem-mcp: internal error (unwritable result)\n")
            return encode_line(_error(answer.get("id"), INTERNAL_ERROR, "Internal error"))

    # -- the loop

    def serve(self) -> None:
        """Read on this thread, answer on a worker: requests in order, cancellations at once."""
        worker = threading.Thread(target=self._work, name="qmem-mcp", daemon=True)
        worker.start()
        for raw in read_lines(self._in):
            if isinstance(raw, UnreadableLine):  # over the line limit: answered in its turn
                self._inbox.put(raw)
                continue
            if not raw.strip():
                continue
            try:
                message = decode_line(raw)
            except UnreadableLine as unreadable:
                self._inbox.put(unreadable)  # answered in its turn, like any line
                continue
            if isinstance(message, dict) and "id" not in message and message.get("method") == "notifications/cancelled":
                self._cancel(message.get("params"))
                continue
            self._inbox.put(message)
        self._inbox.put(_STOP)
        worker.join()  # drain: every request read is answered before the server exits

    def _cancel(self, params: Any) -> None:
        if not isinstance(params, dict):
            return
        key = id_key(params.get("requestId"))  # by JSON type and value: true does not cancel 1
        with self._current_lock:
            if key is not None and self._current is not None and self._current[0] == key:
                self._current[1].set()

    def _work(self) -> None:
        while True:
            message = self._inbox.get()
            if message is _STOP:
                return
            try:
                answer = self._answer_batch(message) if isinstance(message, list) else self._answer(message)
                if answer is not None:
                    self._send(answer)
            except (BrokenPipeError, OSError):
                return  # the client is gone
            except Exception as exc:  # a bug must not stop the worker: later requests are still answered
                sys.stderr.write(f"qmem-mcp: internal error ({exc.__class__.__name__})\n")

    def _answer_batch(self, batch: list[Any]) -> dict[str, Any] | list[dict[str, Any]] | None:
        """A JSON-RPC batch: answered in one array where the negotiated version has batches."""
        if self._version not in BATCH_VERSIONS:
            return _error(None, INVALID_REQUEST, f"Invalid request: protocol {self._version} has no batches")
        if not batch:
            return _error(None, INVALID_REQUEST, "Invalid request: an empty batch")
        answers = [answer for answer in (self._answer(item, in_batch=True) for item in batch) if answer is not None]
        return answers or None

    def _answer(self, message: Any, *, in_batch: bool = False) -> dict[str, Any] | None:
        """The answer to one message, or None for a notification."""
        if isinstance(message, UnreadableLine):
            members = message.members or {}
            request_id = members.get("id") if is_request_id(members.get("id")) else None
            if message.reason == TOO_LONG:
                return _error(request_id, INVALID_REQUEST, f"Invalid request: {message.reason}")
            return _error(request_id, PARSE_ERROR, f"Parse error: {message.reason}")
        if not isinstance(message, dict):
            return _error(None, INVALID_REQUEST, "Invalid request: batches and non-objects are not supported")
        request_id = message.get("id")
        is_request = "id" in message
        if is_request and not is_request_id(request_id):
            return _error(None, INVALID_REQUEST, "Invalid request: id must be a string or an integer")
        method = message.get("method")
        if message.get("jsonrpc") != "2.0" or not isinstance(method, str):
            if is_request:
                return _error(request_id, INVALID_REQUEST,
                              "Invalid request: jsonrpc must be \"2.0\" and method a string")
            return None
        if not is_request:
            return None  # notifications (initialized, cancelled, progress…) are never answered
        if in_batch and method == "initialize":
            return _error(request_id, INVALID_REQUEST, "Invalid request: initialize cannot be part of a batch")
        params = message.get("params", {})
        if params is None:
            params = {}
        cancel = threading.Event()
        with self._current_lock:
            self._current = (id_key(request_id), cancel)
        try:
            result = self._dispatch(method, params, cancel)
        except _RequestError as exc:
            return _error(request_id, exc.code, exc.message)
        except Exception as exc:  # a bug answers -32603 and the server keeps serving
            sys.stderr.write(f"qmem-mcp: internal error ({exc.__class__.__name__})\n")
            return _error(request_id, INTERNAL_ERROR, "Internal error")
        finally:
            with self._current_lock:
                self._current = None
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    def _dispatch(self, method: str, params: Any, cancel: threading.Event) -> dict[str, Any]:
        if not isinstance(params, dict):
            raise _RequestError(INVALID_PARAMS, "Invalid params: params must be an object")
        if method == "initialize":
            return self._initialize(params)
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": [self._tool(tool) for tool in self.session.offered_tools()]}
        if method == "tools/call":
            return self._call(params, cancel)
        raise _RequestError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise _RequestError(INVALID_PARAMS, "Invalid params: protocolVersion must be a string")
        self._version = requested if requested in PROTOCOL_VERSIONS else LATEST
        info: dict[str, Any] = {"name": "qmem", "version": __version__}
        if _at_least(self._version, "2025-06-18"):
            info["title"] = "qmem shared memory"
        return {"protocolVersion": self._version, "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": info, "instructions": self.session.system_prompt_addition(None)}

    def _tool(self, tool: Any) -> dict[str, Any]:
        described: dict[str, Any] = {"name": tool.name, "description": tool.description,
                                     "inputSchema": tool.parameters}
        if _at_least(self._version, "2025-03-26"):
            described["annotations"] = {"title": tool.label, "readOnlyHint": tool.read_only,
                                        "destructiveHint": False, "idempotentHint": tool.read_only,
                                        "openWorldHint": False}
        if _at_least(self._version, "2025-06-18"):
            described["title"] = tool.label
        return described

    def _call(self, params: dict[str, Any], cancel: threading.Event) -> dict[str, Any]:
        name = params.get("name")
        arguments = params.get("arguments", {})
        if not isinstance(name, str) or not name:
            raise _RequestError(INVALID_PARAMS, "Invalid params: name must be a tool name")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise _RequestError(INVALID_PARAMS, "Invalid params: arguments must be an object")
        if name not in {tool.name for tool in TOOLS}:
            raise _RequestError(INVALID_PARAMS, f"Unknown tool: {name}")
        if name == "memory_search" and self.session.host is None:
            return self._result("memory_search: recall is not configured for this server (set QMEM_HOST=pi or "
                                "QMEM_HOST=prime, or recall.host in the config: the host whose curated memories "
                                "to recall)", None, error=True)
        try:
            answer = self.session.call_tool(name, arguments, cancel=cancel)
        except QmemError as exc:
            return self._result(exc.message, {"qmem": 1, "error": {"category": exc.category, "message": exc.message}},
                                error=True)
        # Claude Code 2.1.332 and Codex 0.171.0 give the model a result's structuredContent in place of its
        # text; memory_search's text is the fenced <memory-context> block (its details only ids and scores),
        # so it goes as text alone.
        details = None if name == "memory_search" else answer.get("details")
        return self._result(answer["content"][0]["text"], details, error=False)

    def _result(self, text: str, details: dict[str, Any] | None, *, error: bool) -> dict[str, Any]:
        result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": error}
        if details is not None and _at_least(self._version, "2025-06-18"):
            result["structuredContent"] = details
        return result


USAGE = "usage: python3 -m qmem.mcp [--version]  (an MCP server on stdio: run it from an MCP client)"


def session_directory(plugin_root: str | None) -> Path | None:
    """Where the client's session works: this server's working directory — unless the server was
    started from a plugin copy and runs in it (Codex starts a plugin's server in its copy and tells
    it nothing of the session's directory), which is then no project of the user's (None)."""
    cwd = Path.cwd()
    if plugin_root:
        try:
            if cwd.resolve() == Path(plugin_root).resolve():
                return None
        except (OSError, RuntimeError):
            return None
    return cwd


def main(argv: Sequence[str] | None = None, *, plugin_root: str | None = None) -> int:
    """The server; ``plugin_root``: the plugin copy this process was started from (the plugin
    entry, :mod:`qmem.setup.pluginentry`), which is never taken for the user's project."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:
        sys.stdout.write(f"qmem-mcp {__version__}\n")
        return 0
    if args in (["--help"], ["-h"]):
        sys.stdout.write(USAGE + "\n")
        return 0
    if args:
        sys.stderr.write(f"qmem-mcp: unexpected arguments (try --help)\n{USAGE}\n")
        return 2
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # stdout is the protocol channel
    warnings = Warnings(lambda sentence: sys.stderr.write(sentence + "\n"))
    session = PluginSession(host=recall_host(os.environ), cwd=session_directory(plugin_root), env=dict(os.environ),
                            warnings=warnings)
    try:
        McpServer(session, sys.stdin.buffer, out).serve()
    except KeyboardInterrupt:
        pass
    finally:
        session.wait_for_flush(timeout=2.0)
        session.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
