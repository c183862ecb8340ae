"""A scripted model API in the two shapes the coding-agent CLIs speak, for real-host tests.

* ``POST /v1/messages`` — the Anthropic Messages API (Claude Code): with ``"stream": true`` a
  server-sent event stream ``message_start``, per content block ``content_block_start`` /
  ``content_block_delta`` (``text_delta`` or ``input_json_delta``) / ``content_block_stop``,
  then ``message_delta`` (the stop reason: ``tool_use`` or ``end_turn``) and ``message_stop``;
  without it one ``message`` object.  ``POST /v1/messages/count_tokens`` answers a count.
* ``POST /v1/responses`` — the OpenAI Responses API (Codex): ``response.created``, one
  ``response.output_item.done`` per output item (a ``message`` with ``output_text``, or a
  ``function_call`` with its ``call_id``, ``name``, JSON ``arguments`` and, for a tool offered
  inside a namespace, its ``namespace``), then ``response.completed`` with the usage.
* ``GET /v1/models`` lists one model.

Every request is recorded (:attr:`FakeModelAPI.requests`, bodies parsed); the *script*, a function
``(api, request_body) -> Reply`` given by the test, decides each answer — the usual one calls a
tool on the first turn and answers once its result is in.  The script sees which API asked
(``api`` is ``"messages"`` or ``"responses"``), because the two carry tool results differently:
:func:`tool_results` reads both.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .http_fake import FakeServer, RecordedRequest, Response

__all__ = ["FakeModelAPI", "Call", "Reply", "tool_results", "user_texts"]


@dataclass
class Call:
    name: str
    arguments: dict[str, Any]
    namespace: str | None = None  # Responses API: the namespace the tool was offered in


@dataclass
class Reply:
    text: str | None = None
    calls: list[Call] = field(default_factory=list)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_text(part.get("text", "")) if isinstance(part, dict) else "" for part in content)
    return ""


def user_texts(api: str, body: dict[str, Any]) -> list[str]:
    """The text of each user message (and, in Responses, each user input item), oldest first."""
    if api == "messages":
        return [_text(m.get("content")) for m in body.get("messages") or [] if m.get("role") == "user"]
    items = body.get("input") or []
    return [_text(item.get("content")) for item in items if isinstance(item, dict) and item.get("role") == "user"]


def tool_results(api: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """(tool-call id, result text) for every tool result the request carries, oldest first."""
    found: list[tuple[str, str]] = []
    if api == "messages":
        for message in body.get("messages") or []:
            content = message.get("content")
            if message.get("role") != "user" or not isinstance(content, list):
                continue
            for part in content:
                if isinstance(part, dict) and part.get("type") == "tool_result":
                    found.append((str(part.get("tool_use_id")), _text(part.get("content"))))
        return found
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            output = item.get("output")
            found.append((str(item.get("call_id")), output if isinstance(output, str) else _text(output)))
    return found


class FakeModelAPI(FakeServer):
    def __init__(self, script: Callable[[str, dict[str, Any]], Reply], model: str = "fake-model") -> None:
        super().__init__()
        self.script = script
        self.model = model
        self._answers = 0
        self._answers_lock = threading.Lock()

    def bodies(self, api: str) -> list[dict[str, Any]]:
        """The parsed bodies of the model requests of one API (``messages`` or ``responses``)."""
        suffix = "/messages" if api == "messages" else "/responses"
        return [r.json for r in self.requests
                if r.method == "POST" and r.path.split("?")[0].endswith(suffix) and isinstance(r.json, dict)]

    def _next(self) -> int:
        with self._answers_lock:
            self._answers += 1
            return self._answers

    def handle_request(self, req: RecordedRequest) -> Response:
        path = req.path.split("?")[0]
        if req.method == "GET" and path.endswith("/models"):
            return Response.json({"object": "list", "data": [{"id": self.model, "object": "model",
                                                              "type": "model", "display_name": self.model}]})
        if req.method != "POST" or not isinstance(req.json, dict):
            return Response.json({"error": {"type": "not_found_error", "message": "not found"}}, status=404)
        if path.endswith("/messages/count_tokens"):
            return Response.json({"input_tokens": 10})
        if path.endswith("/messages"):
            return self._answer_messages(req.json)
        if path.endswith("/responses"):
            return self._answer_responses(req.json)
        return Response.json({"error": {"type": "not_found_error", "message": "not found"}}, status=404)

    # -- Anthropic Messages

    def _answer_messages(self, body: dict[str, Any]) -> Response:
        reply = self.script("messages", body)
        number = self._next()
        blocks: list[dict[str, Any]] = []
        if reply.text:
            blocks.append({"type": "text", "text": reply.text})
        for index, call in enumerate(reply.calls):
            blocks.append({"type": "tool_use", "id": f"toolu_{number:04d}_{index}", "name": call.name,
                           "input": call.arguments})
        stop = "tool_use" if reply.calls else "end_turn"
        usage = {"input_tokens": 10, "output_tokens": 5}
        message = {"id": f"msg_fake_{number}", "type": "message", "role": "assistant", "model": self.model,
                   "content": blocks, "stop_reason": stop, "stop_sequence": None, "usage": usage}
        if not body.get("stream"):
            return Response.json(message)
        events = [("message_start", {"type": "message_start",
                                     "message": {**message, "content": [], "stop_reason": None,
                                                 "usage": {"input_tokens": 10, "output_tokens": 1}}})]
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
            else:
                start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            events += [("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}),
                       ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
                       ("content_block_stop", {"type": "content_block_stop", "index": index})]
        events += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                      "usage": {"output_tokens": 5}}),
                   ("message_stop", {"type": "message_stop"})]
        return self._sse(events)

    # -- OpenAI Responses

    def _answer_responses(self, body: dict[str, Any]) -> Response:
        reply = self.script("responses", body)
        number = self._next()
        response_id = f"resp_fake_{number}"
        items: list[dict[str, Any]] = []
        if reply.text:
            items.append({"type": "message", "id": f"msg_fake_{number}", "role": "assistant", "status": "completed",
                          "content": [{"type": "output_text", "text": reply.text, "annotations": []}]})
        for index, call in enumerate(reply.calls):
            item = {"type": "function_call", "id": f"fc_fake_{number}_{index}", "status": "completed",
                    "call_id": f"call_fake_{number}_{index}", "name": call.name,
                    "arguments": json.dumps(call.arguments)}
            if call.namespace:
                item["namespace"] = call.namespace
            items.append(item)
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
        head = {"id": response_id, "object": "response", "model": self.model, "status": "in_progress", "output": []}
        events = [("response.created", {"type": "response.created", "response": head})]
        events += [("response.output_item.done", {"type": "response.output_item.done", "output_index": index,
                                                  "item": item}) for index, item in enumerate(items)]
        events.append(("response.completed", {"type": "response.completed",
                                              "response": {**head, "status": "completed", "output": items,
                                                           "usage": usage}}))
        return self._sse(events)

    @staticmethod
    def _sse(events: list[tuple[str, dict[str, Any]]]) -> Response:
        text = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
        return Response(200, text.encode("utf-8"), {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
