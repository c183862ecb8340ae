"""Writes session files in the shapes pi 0.73 records (see the pi notes in tests' docs)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any


class SessionFile:
    """A pi-format JSONL session: header, then message entries, appended line by line."""

    def __init__(self, path: Path, cwd: str = "/work/project") -> None:
        self.path = path
        self.parent: str | None = None
        self.calls = 0
        path.parent.mkdir(parents=True, exist_ok=True)
        self._write({"type": "session", "version": 3, "id": str(uuid.uuid4()),
                     "timestamp": "2026-11-29T10:00:00.000Z", "cwd": cwd})

    def _write(self, entry: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")

    def entry(self, **fields: Any) -> None:
        entry_id = uuid.uuid4().hex[:8]
        self._write({"id": entry_id, "parentId": self.parent, "timestamp": "2026-11-29T10:00:01.000Z", **fields})
        self.parent = entry_id

    def user(self, text: str) -> None:
        self.entry(type="message", message={"role": "user", "content": [{"type": "text", "text": text}]})

    def tool_call(self, name: str, arguments: dict[str, Any]) -> str:
        self.calls += 1
        call_id = f"call_{self.calls}_{uuid.uuid4().hex[:6]}"
        self.entry(type="message", message={
            "role": "assistant", "stopReason": "toolUse",
            "content": [{"type": "text", "text": "saving"},
                        {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}]})
        return call_id

    def tool_result(self, call_id: str, name: str, *, details: Any = None, text: str = "done",
                    is_error: bool = False) -> None:
        message = {"role": "toolResult", "toolCallId": call_id, "toolName": name,
                   "content": [{"type": "text", "text": text}], "isError": is_error}
        if details is not None:
            message["details"] = details
        self.entry(type="message", message=message)

    def call(self, name: str, arguments: dict[str, Any], **result: Any) -> str:
        call_id = self.tool_call(name, arguments)
        self.tool_result(call_id, name, **result)
        return call_id

    def raw(self, data: bytes) -> None:
        with open(self.path, "ab") as handle:
            handle.write(data)
