"""A peer of qmem's two line protocols (``qmem.mcp``, ``qmem.bridge``): real processes, strict reading.

Every line either process writes is read with :func:`strict_loads`, which refuses ``NaN`` and
``Infinity`` and keeps integers of any length exactly (as :class:`Digits`), as a JSON parser
in another language would.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import Any

MCP = "qmem.mcp"
BRIDGE = "qmem.bridge"


@dataclass(frozen=True)
class Digits:
    """A JSON integer too long for ``int()``, as written."""

    text: str


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_int(text: str) -> int | Digits:
    """An integer as ``int()`` takes it, else (over 4,300 digits) its digits."""
    try:
        return int(text)
    except ValueError:
        return Digits(text)


def strict_loads(line: bytes | str) -> Any:
    """One line as strict JSON (UTF-8; NaN/Infinity refused); ValueError otherwise."""
    text = line.decode("utf-8") if isinstance(line, bytes) else line  # invalid UTF-8 raises
    return json.loads(text, parse_constant=_refuse_constant, parse_int=parse_int)


def id_key(value: Any) -> tuple[str, str]:
    """An answer's id as a comparable key: JSON type and canonical text (``true`` is not ``1``)."""
    if isinstance(value, Digits):
        return ("number", value.text)
    if isinstance(value, bool) or value is None:
        return ("literal", json.dumps(value))
    if isinstance(value, int):
        return ("number", str(value))
    if isinstance(value, str):
        return ("string", json.dumps(value))  # ASCII escapes: a lone surrogate is kept
    return ("other", json.dumps(value, sort_keys=True, default=lambda digits: digits.text))


NULL = id_key(None)


@dataclass
class Finished:
    code: int
    lines: list[bytes]
    messages: list[Any]
    stderr: str


def exchange(module: str, lines: list[bytes], env: dict[str, str], cwd: str, timeout: float = 60) -> Finished:
    """Write ``lines`` to ``python -m module``, close stdin, and read everything it wrote."""
    payload = b"".join(line if line.endswith(b"\n") else line + b"\n" for line in lines)
    proc = subprocess.run([sys.executable, "-m", module], input=payload, capture_output=True, env=env, cwd=cwd,
                          timeout=timeout)
    out = proc.stdout.splitlines()
    return Finished(proc.returncode, out, [strict_loads(line) for line in out],
                    proc.stderr.decode("utf-8", "replace"))


class LivePeer:
    """A running process, written to at will; a reader thread parses every line it writes."""

    def __init__(self, module: str, env: dict[str, str], cwd: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", module], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, cwd=cwd)
        self.messages: list[Any] = []
        self.bad_lines: list[bytes] = []
        self._changed = threading.Condition()
        self._ended = False
        self._stderr: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()
        self._stderr_reader = threading.Thread(target=lambda: self._stderr.append(self.proc.stderr.read()),
                                               daemon=True)
        self._stderr_reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                message = strict_loads(line)
            except ValueError:
                message = None
                self.bad_lines.append(line)
            with self._changed:
                self.messages.append(message)
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def write(self, data: bytes) -> None:
        self.proc.stdin.write(data if data.endswith(b"\n") else data + b"\n")
        self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        self.write(json.dumps(message).encode())

    def wait_for(self, predicate, timeout: float = 60, since: int = 0) -> Any:
        """The first message from index ``since`` on satisfying ``predicate``; AssertionError if none in time."""
        seen = since
        with self._changed:
            while True:
                for message in self.messages[seen:]:
                    if message is not None and predicate(message):
                        return message
                seen = max(seen, len(self.messages))
                if self._ended:
                    raise AssertionError("the process closed its stdout")
                if not self._changed.wait(timeout):
                    raise AssertionError("no such message in time")

    def wait_for_all(self, predicate, timeout: float = 60) -> None:
        """Wait until ``predicate(every message so far)`` holds; AssertionError if it does not in time."""
        with self._changed:
            while not predicate(self.messages):
                if self._ended:
                    raise AssertionError("the process closed its stdout")
                if not self._changed.wait(timeout):
                    raise AssertionError("not every expected message came in time")

    def answer(self, request_id: Any, timeout: float = 60, since: int = 0) -> dict:
        """The first answer to ``request_id`` among the messages from index ``since`` on."""
        key = id_key(request_id)
        return self.wait_for(lambda m: isinstance(m, dict) and "id" in m and "ui" not in m
                             and id_key(m["id"]) == key, timeout, since)

    def ask(self, message: dict, timeout: float = 60) -> dict:
        """Send a request and wait for its answer (the next request goes only after it)."""
        since = len(self.messages)
        self.send(message)
        return self.answer(message["id"], timeout, since)

    def close(self, timeout: float = 60) -> Finished:
        """Close stdin, wait for the exit, return what it wrote."""
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        code = self.proc.wait(timeout=timeout)
        with self._changed:
            while not self._ended:
                self._changed.wait(timeout)
        self._stderr_reader.join(timeout)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return Finished(code, [], list(self.messages), b"".join(self._stderr).decode("utf-8", "replace"))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
