"""The MCP server behind ``python3 -m qmem.mcp``: the qmem tools over stdio, both protocol eras.

Promises:

* **Framing.** Newline-delimited JSON-RPC 2.0 on stdin/stdout; stdout carries protocol
  messages only (the entry sends anything printed by mistake to stderr, with the logs); the
  server returns when stdin ends.
* **Two eras** (:mod:`qmem.hosts.mcperas`), one per connection, decided by the first
  era-distinctive request.  *Handshake* (2024-11-05 … 2025-11-25): ``initialize`` echoes the
  client's version when served and answers 2025-11-25 otherwise; ``notifications/initialized``
  is never answered; ``ping`` answers ``{}``; tool annotations from 2025-03-26, ``title`` and
  ``structuredContent`` from 2025-06-18 (never for ``memory_search``, whose text is the fenced
  block: clients that show structuredContent in place of the text would drop the fence).
  *Modern* (2026-07-28, stateless): every request
  carries its version and capabilities in ``_meta``; ``server/discover`` answers the served
  versions, capabilities (tools, read-only resources), instructions and cache hints; every result carries
  ``resultType`` and the ``serverInfo`` stamp; ``initialize`` on a modern connection is -32022
  naming the modern versions, an un-enveloped request -32602, ``ping`` -32601 (removed).  An
  enveloped request on a handshake connection is -32600.  Before either era is decided,
  un-enveloped requests are answered as 2025-11-25 (clients that skip the handshake keep
  working) and ``server/discover`` without an envelope is -32601, which SDK clients fall back on.
* **No line ends the session** (reading and writing: :mod:`qmem.jsonlines`).  A line that is
  not JSON — ``NaN``/``Infinity`` included, or nested deeper than the parser follows — is
  -32700 with the request's id when it can still be read, else id null; invalid UTF-8 inside
  a string reads as U+FFFD, as in the official SDKs.  Not an object → -32600; a batch array is
  answered as one array under 2024-11-05 and 2025-03-26 (``initialize`` refused inside it),
  and is -32600 under later versions and the modern era, which have no batches.  An unknown
  method → -32601; a line over 16 MiB (``jsonlines.LINE_LIMIT``) → -32600 naming the limit, read in
  bounded memory, with the id when its first 4 KiB show it; bad ``params`` or an unknown tool → -32602.  A tool that fails is a result
  with ``isError: true``, not a protocol error.  Every line written is strict JSON.
* **Ids** are strings or integers written without fraction or exponent, of any length, and
  are echoed exactly (an integer too long for ``int()`` digit for digit, a lone surrogate as
  ``\\udXXX``); another id (``null``, ``true``, ``1.0``, a list) is -32600 with id null.
* **Order.** Requests are answered one at a time, in the order they arrived, so pipelined
  requests are never lost or reordered; ``notifications/cancelled`` (both eras) cancels the one
  in flight when its ``requestId`` has the same JSON type and value (``true`` and ``"1"`` are
  not ``1``).  Every request read before stdin ends is answered before :meth:`McpServer.serve`
  returns (each tool call bounded by its own timeouts).
* **Tools** are the plugin core's (``qmem_store`` … ``memory_search``), same logic as in pi;
  ``memory_search`` is listed only where the session can recall (see :mod:`qmem.mcp`), and
  called anyway it answers why it is not available.
* **Resources**, read-only, both eras: ``memory://meta`` (what ``qmem_meta`` answers) and the
  template ``memory://record/{id}`` (what ``qmem_get`` answers for that id), as ``text/plain``.
  Reading one runs the same tool with nothing but the URI's id, so a resource shows nothing a
  tool would not; an unknown URI or record is -32002, another failure -32603 with qmem's
  one-line message.  No subscriptions, no list changes.
* **Always an answer.** Text that cannot be encoded (a lone surrogate a client sent) is
  a tool error naming the argument, never -32603, and an answer is always written.
"""

from __future__ import annotations

import queue
import sys
import threading
from urllib.parse import unquote

from .. import __version__
from ..errors import QmemError
from ..jsonlines import TOO_LONG, UnreadableLine, decode_line, encode_line, id_key, is_request_id, read_lines
from .mcperas import (HANDSHAKE, HANDSHAKE_VERSIONS, MODERN, MODERN_VERSIONS, RpcError, at_least, has_envelope,
                      modern_result, read_envelope, unsupported_version)
from .session import PluginSession
from .tools import TOOLS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, BinaryIO

__all__ = ["McpServer"]

LATEST_HANDSHAKE = HANDSHAKE_VERSIONS[-1]

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603

#: Protocol versions whose peers may send JSON-RPC batches: 2025-03-26 requires receiving them,
#: 2024-11-05 takes JSON-RPC 2.0 whole; 2025-06-18 removed them.
BATCH_VERSIONS = ("2024-11-05", "2025-03-26")

_STOP = object()  # the worker's stop signal: no line a client sends can be this object

RESOURCE_NOT_FOUND = -32002
CAPABILITIES = {"tools": {"listChanged": False}, "resources": {"subscribe": False, "listChanged": False}}
META_URI, RECORD_PREFIX = "memory://meta", "memory://record/"
MAX_RECORD_ID = 200  # record ids are short (a UUID, a local id); a longer "id" is no record


def _error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _server_info(version: str) -> dict[str, Any]:
    info: dict[str, Any] = {"name": "qmem", "version": __version__}
    if at_least(version, "2025-06-18"):
        info["title"] = "qmem shared memory"
    return info


class McpServer:
    def __init__(self, session: PluginSession, stdin: BinaryIO, stdout: BinaryIO) -> None:
        self.session = session
        self._in = stdin
        self._out = stdout
        self._era: str | None = None  # HANDSHAKE or MODERN once the first era-distinctive request decides
        self._version = LATEST_HANDSHAKE  # the handshake era's negotiated version
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
        if self._era == MODERN or self._version not in BATCH_VERSIONS:
            version = MODERN_VERSIONS[-1] if self._era == MODERN else self._version
            return _error(None, INVALID_REQUEST, f"Invalid request: protocol {version} has no batches")
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
        except RpcError as exc:
            return _error(request_id, exc.code, exc.message, exc.data)
        except Exception as exc:  # a bug answers -32603 and the server keeps serving
            sys.stderr.write(f"qmem-mcp: internal error ({exc.__class__.__name__})\n")
            return _error(request_id, INTERNAL_ERROR, "Internal error")
        finally:
            with self._current_lock:
                self._current = None
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    # -- the eras

    def _dispatch(self, method: str, params: Any, cancel: threading.Event) -> dict[str, Any]:
        if not isinstance(params, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: params must be an object")
        if method != "initialize" and has_envelope(params):  # initialize is never modern, envelope or not
            return self._modern(method, params, cancel)
        if self._era == MODERN:
            if method == "initialize":
                refusal = unsupported_version(str(params.get("protocolVersion", ""))[:64], MODERN_VERSIONS)
                raise RpcError(refusal.code, "This connection serves protocol 2026-07-28: no initialize "
                                                  "handshake", refusal.data)
            raise RpcError(INVALID_PARAMS, "Invalid params: this connection serves protocol 2026-07-28; "
                                                "each request carries its version and capabilities in _meta")
        return self._handshake(method, params, cancel)

    def _handshake(self, method: str, params: dict[str, Any], cancel: threading.Event) -> dict[str, Any]:
        if method == "initialize":
            return self._initialize(params)
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": [self._tool(tool, self._version) for tool in self.session.offered_tools()]}
        if method == "tools/call":
            return self._call(params, cancel, self._version)
        if method.startswith("resources/"):
            return self._resources(method, params, cancel, self._version)
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: protocolVersion must be a string")
        self._version = requested if requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE
        self._era = HANDSHAKE
        return {"protocolVersion": self._version, "capabilities": CAPABILITIES,
                "serverInfo": _server_info(self._version), "instructions": self.session.system_prompt_addition(None)}

    def _modern(self, method: str, params: dict[str, Any], cancel: threading.Event) -> dict[str, Any]:
        if self._era == HANDSHAKE:
            raise RpcError(INVALID_REQUEST, "Invalid request: this connection serves the initialize handshake "
                                                 f"({self._version}); a 2026-07-28 envelope is not accepted on it")
        # Before the era is decided the handshake is still on offer, so a refusal names both eras' versions.
        supported = MODERN_VERSIONS if self._era == MODERN else HANDSHAKE_VERSIONS + MODERN_VERSIONS
        try:
            envelope = read_envelope(params, MODERN_VERSIONS)
        except RpcError as exc:
            data = dict(exc.data, supported=list(supported)) if isinstance(exc.data, dict) else exc.data
            raise RpcError(exc.code, exc.message, data) from None
        self._era = MODERN
        version = envelope.version
        if method == "server/discover":
            result = {"supportedVersions": list(MODERN_VERSIONS), "capabilities": CAPABILITIES,
                      "instructions": self.session.system_prompt_addition(None)}
        elif method == "tools/list":
            result = {"tools": [self._tool(tool, version) for tool in self.session.offered_tools()]}
        elif method == "tools/call":
            result = self._call(params, cancel, version)
        elif method.startswith("resources/"):
            result = self._resources(method, params, cancel, version)
        else:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
        return modern_result(method, result, _server_info(version))

    # -- resources (both eras)

    def _resources(self, method: str, params: dict[str, Any], cancel: threading.Event,
                   version: str) -> dict[str, Any]:
        titled = at_least(version, "2025-06-18")
        if method == "resources/list":
            meta = {"uri": META_URI, "name": "qmem_meta", "mimeType": "text/plain",
                    "description": "The projects, agents, kinds and scopes in shared memory (what qmem_meta says)"}
            return {"resources": [dict(meta, title="qmem overview") if titled else meta]}
        if method == "resources/templates/list":
            record = {"uriTemplate": RECORD_PREFIX + "{id}", "name": "qmem_record", "mimeType": "text/plain",
                      "description": "One memory record by id, current or superseded (what qmem_get says)"}
            return {"resourceTemplates": [dict(record, title="qmem record") if titled else record]}
        if method != "resources/read":
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
        uri = params.get("uri")
        if not isinstance(uri, str) or not uri:
            raise RpcError(INVALID_PARAMS, "Invalid params: uri must be a string")
        if uri == META_URI:
            name, arguments = "qmem_meta", {}
        elif uri.startswith(RECORD_PREFIX) and 0 < len(uri) - len(RECORD_PREFIX) <= MAX_RECORD_ID:
            name, arguments = "qmem_get", {"id": unquote(uri[len(RECORD_PREFIX):])}
        else:
            raise RpcError(RESOURCE_NOT_FOUND, "Resource not found", {"uri": uri[:300]})
        try:
            answer = self.session.call_tool(name, arguments, cancel=cancel)
        except QmemError as exc:
            if exc.message.startswith("no record") or exc.message.endswith("has no such record"):
                raise RpcError(RESOURCE_NOT_FOUND, f"Resource not found: {exc.message}", {"uri": uri}) from None
            raise RpcError(INTERNAL_ERROR, exc.message) from None
        return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": answer["content"][0]["text"]}]}

    # -- tools (both eras)

    def _tool(self, tool: Any, version: str) -> dict[str, Any]:
        described: dict[str, Any] = {"name": tool.name, "description": tool.description,
                                     "inputSchema": tool.parameters}
        if at_least(version, "2025-03-26"):
            described["annotations"] = {"title": tool.label, "readOnlyHint": tool.read_only,
                                        "destructiveHint": False, "idempotentHint": tool.read_only,
                                        "openWorldHint": False}
        if at_least(version, "2025-06-18"):
            described["title"] = tool.label
        return described

    def _call(self, params: dict[str, Any], cancel: threading.Event, version: str) -> dict[str, Any]:
        name = params.get("name")
        arguments = params.get("arguments", {})
        if not isinstance(name, str) or not name:
            raise RpcError(INVALID_PARAMS, "Invalid params: name must be a tool name")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: arguments must be an object")
        if name not in {tool.name for tool in TOOLS}:
            raise RpcError(INVALID_PARAMS, f"Unknown tool: {name}")
        if name == "memory_search" and self.session.host is None:
            return self._result("memory_search: recall is not configured for this server (set QMEM_HOST=pi or "
                                "QMEM_HOST=prime, or recall.host in the config: the host whose curated memories "
                                "to recall)", None, version, error=True)
        try:
            answer = self.session.call_tool(name, arguments, cancel=cancel)
        except QmemError as exc:
            return self._result(exc.message, {"qmem": 1, "error": {"category": exc.category, "message": exc.message}},
                                version, error=True)
        # Claude Code 2.1.332 and Codex 0.171.0 give the model a result's structuredContent in place of its
        # text; memory_search's text is the fenced <memory-context> block (its details only ids and scores),
        # so it goes as text alone.
        details = None if name == "memory_search" else answer.get("details")
        return self._result(answer["content"][0]["text"], details, version, error=False)

    def _result(self, text: str, details: dict[str, Any] | None, version: str, *, error: bool) -> dict[str, Any]:
        result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": error}
        if details is not None and at_least(version, "2025-06-18"):
            result["structuredContent"] = details
        return result
