"""A scripted OpenAI-compatible chat-completions server (streaming SSE), for real-host tests.

``POST /v1/chat/completions`` records the request body and answers from a *script*: a
function ``(request_body) -> Reply`` that the test supplies.  Answers stream as
``chat.completion.chunk`` events ending with ``data: [DONE]`` (pi asks for ``stream: true``);
a non-streaming request gets one ``chat.completion`` object.  ``GET /v1/models`` lists one
model.

Knobs: ``prompt_tokens`` is the usage every answer reports (a script may change it between
requests: Hermes compresses its context when it is high); ``call_ids`` prefixes tool-call ids
(``<call_ids>_<answer>_<index>``): a host that resumes a stored session next to a fresh fake
needs ids the stored ones do not already use.

:func:`after_last_assistant` gives what a script should look at: a context hook's message
arrives *after* the tool result, as the last ``role: "user"`` message (seen with pi 0.73.1),
so a script must read every message after the last assistant message.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .http_fake import FakeServer, RecordedRequest, Response

__all__ = ["FakeLLM", "Reply", "after_last_assistant", "text_of"]


@dataclass
class Reply:
    text: str | None = None
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (name, arguments)


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def after_last_assistant(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages") or []
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    return messages[last + 1:]


class FakeLLM(FakeServer):
    def __init__(self, script: Callable[[dict[str, Any]], Reply], model: str = "fake-model",
                 call_ids: str = "call") -> None:
        super().__init__()
        self.script = script
        self.model = model
        self.call_ids = call_ids
        self.prompt_tokens = 10
        self._calls = 0
        self._calls_lock = threading.Lock()

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        return [r.json for r in self.requests if r.path.endswith("/chat/completions") and isinstance(r.json, dict)]

    def handle_request(self, req: RecordedRequest) -> Response:
        if req.method == "GET" and req.path.endswith("/models"):
            return Response.json({"object": "list", "data": [{"id": self.model, "object": "model"}]})
        if req.method != "POST" or not req.path.endswith("/chat/completions") or not isinstance(req.json, dict):
            return Response.json({"error": {"message": "not found"}}, status=404)
        reply = self.script(req.json)
        with self._calls_lock:
            self._calls += 1
            call_number = self._calls
        completion_id = f"chatcmpl-fake-{call_number}"
        if not req.json.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": reply.text}
            if reply.tool_calls:
                message["tool_calls"] = self._tool_calls(reply, call_number)
            return Response.json({"id": completion_id, "object": "chat.completion", "model": self.model,
                                  "choices": [{"index": 0, "message": message,
                                               "finish_reason": "tool_calls" if reply.tool_calls else "stop"}],
                                  "usage": self._usage()})
        return Response(200, self._sse(reply, completion_id, call_number), {"Content-Type": "text/event-stream"})

    def _usage(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": 5, "total_tokens": self.prompt_tokens + 5}

    def _tool_calls(self, reply: Reply, call_number: int) -> list[dict[str, Any]]:
        return [{"id": f"{self.call_ids}_{call_number}_{i}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(arguments)}}
                for i, (name, arguments) in enumerate(reply.tool_calls)]

    def _sse(self, reply: Reply, completion_id: str, call_number: int) -> bytes:
        usage = self._usage()

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            return "data: " + json.dumps({"id": completion_id, "object": "chat.completion.chunk", "model": self.model,
                                          "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n"

        events = [chunk({"role": "assistant", "content": ""})]
        if reply.text:
            events.append(chunk({"content": reply.text}))
        for index, call in enumerate(self._tool_calls(reply, call_number)):
            events.append(chunk({"tool_calls": [{"index": index, **call}]}))
        events.append(chunk({}, "tool_calls" if reply.tool_calls else "stop"))
        events.append("data: " + json.dumps({"id": completion_id, "object": "chat.completion.chunk",
                                             "model": self.model, "choices": [],
                                             "usage": usage}) + "\n\n")
        events.append("data: [DONE]\n\n")
        return "".join(events).encode("utf-8")
