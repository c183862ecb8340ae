"""What qmem's command-line front ends share: an argparse that never exits, and output.

:class:`CommandParser` raises instead of printing and calling ``sys.exit``, so the
same parser can serve a terminal (``python -m qmem.local``) and a host's slash command
(``/qmem:local``) whose stdout is a protocol channel.  :class:`Outcome` is what a
command produced; only :func:`emit` writes it out.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from typing import Any, NoReturn, TextIO

__all__ = ["CommandParser", "UsageError", "HelpRequested", "Outcome", "emit", "to_json_text", "Progress"]

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad command-line usage: exit 2."""


class HelpRequested(Exception):
    """``--help``: the help text is the output, exit 0."""


class CommandParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (try --help)")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if status:
            raise UsageError((message or "invalid usage").strip())
        raise HelpRequested(message or "")

    def print_help(self, file: TextIO | None = None) -> None:
        raise HelpRequested(self.format_help())


@dataclass(frozen=True)
class Outcome:
    """A finished command: exit code, what goes to stdout, and a one-line error."""

    code: int = EXIT_OK
    stdout: str = ""
    error: str | None = None


def to_json_text(document: Any) -> str:
    return json.dumps(document, ensure_ascii=False, indent=2, sort_keys=False) + "\n"


def emit(outcome: Outcome, prog: str, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Write an outcome to the terminal; returns the exit code."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    if outcome.stdout:
        out.write(outcome.stdout if outcome.stdout.endswith("\n") else outcome.stdout + "\n")
        out.flush()
    if outcome.error:
        err.write(f"{prog}: {outcome.error}\n")
        err.flush()
    return outcome.code


class Progress:
    """``done/total`` on stderr, only on a terminal and only once the work has taken a while.

    Call it as ``progress(done, total)``; :meth:`finish` ends the line.  Off a terminal (pipes,
    files, a host's bridge) it prints nothing, so output stays what the command returns.
    """

    def __init__(self, label: str, *, stream: TextIO | None = None, after_s: float = 1.0) -> None:
        self._stream = stream or sys.stderr
        self._label = label
        self._enabled = self._stream.isatty()
        self._started = time.monotonic()
        self._after = after_s
        self._last = 0.0
        self._shown = False

    def __call__(self, done: int, total: int) -> None:
        if not self._enabled:
            return
        now = time.monotonic()
        if now - self._started < self._after or (now - self._last < 0.2 and done < total):
            return
        self._last = now
        self._shown = True
        self._stream.write(f"\r{self._label}: {done}/{total}")
        self._stream.flush()

    def finish(self) -> None:
        if self._shown:
            self._stream.write("\n")
            self._stream.flush()
