"""What qmem's command-line front ends share: an argparse that never exits, and output.

:class:`CommandParser` raises instead of printing and calling ``sys.exit``, so the
same parser can serve a terminal (``python3 -m qmem.local``) and a host's slash command
(``/qmem:local``) whose stdout is a protocol channel.  :class:`Outcome` is what a
command produced; only :func:`emit` writes it out.

Promises shared by every front end:

* Exit status 0 success, 1 error, 2 bad usage; the error is one line on stderr.  With
  ``--json`` stdout carries exactly one JSON document, an error included
  (``{"error": {"category", "message"}}``).
* Output never fails to be written: text that cannot be encoded (a lone surrogate from
  undecodable bytes, a terminal that is not UTF-8) is replaced or escaped, and JSON stays
  valid JSON.
* An argument that is not valid text (undecodable bytes in ``argv``) is an input error
  naming its position, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from ..jsonlines import LONE_SURROGATE, without_lone_surrogates
from ..valueclass import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, NoReturn, TextIO

__all__ = [
    "CommandParser", "UsageError", "HelpRequested", "Outcome", "emit", "to_json_text", "Progress",
    "error_document", "error_outcome", "wants_json", "undecodable_argument", "examples", "EXIT_ERROR",
    "EXIT_USAGE",
]

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad command-line usage: exit 2."""


class HelpRequested(Exception):
    """``--help``: the help text is the output, exit 0."""


class CommandParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that raises :class:`UsageError` / :class:`HelpRequested`.

    Descriptions and epilogs are printed as written (examples keep their lines).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (try --help)")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if status:
            raise UsageError((message or "invalid usage").strip())
        raise HelpRequested(message or "")

    def print_help(self, file: TextIO | None = None) -> None:
        raise HelpRequested(self.format_help())

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse makes a formatter for every add_argument (to check the metavar), and a formatter
        # without a width imports shutil (and with it bz2, lzma, fnmatch) for the terminal's size:
        # the same width, found the way shutil.get_terminal_size finds it, costs none of that.
        return self.formatter_class(prog=self.prog, width=terminal_columns() - 2)


def terminal_columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size().columns`` gives it: ``$COLUMNS``,
    else the size of stdout's terminal, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def examples(*lines: str) -> str:
    """An argparse epilog listing example command lines."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


@dataclass(frozen=True)
class Outcome:
    """A finished command: exit code, what goes to stdout, and a one-line error.

    ``json`` says that ``stdout`` is one JSON document (so it can be re-escaped, never
    mangled, for a terminal that cannot show all of it).
    """

    code: int = EXIT_OK
    stdout: str = ""
    error: str | None = None
    json: bool = False


def to_json_text(document: Any) -> str:
    """``document`` as indented JSON; a lone surrogate in any string becomes U+FFFD."""
    return without_lone_surrogates(json.dumps(document, ensure_ascii=False, indent=2, sort_keys=False)) + "\n"


def error_document(category: str, message: str) -> dict[str, Any]:
    return {"error": {"category": category, "message": message}}


def error_outcome(code: int, category: str, message: str, *, as_json: bool) -> Outcome:
    """A failed command: the one-line error, plus the JSON error document under ``--json``."""
    return Outcome(code=code, error=message, json=as_json,
                   stdout=to_json_text(error_document(category, message)) if as_json else "")


def wants_json(argv: Sequence[str]) -> bool:
    """``--json`` among the options (before a ``--``), for errors found before parsing ends."""
    for arg in argv:
        if arg == "--":
            return False
        if arg == "--json":
            return True
    return False


def undecodable_argument(argv: Sequence[str]) -> str | None:
    """The message for the first argument that is not valid text, or None."""
    for position, arg in enumerate(argv, 1):
        if LONE_SURROGATE.search(arg):
            return (f"argument {position} is not valid text: it holds bytes that are not UTF-8 "
                    f"(qmem takes UTF-8 text)")
    return None


def _write(stream: TextIO, text: str, *, is_json: bool) -> None:
    """Write ``text`` whatever the stream's encoding can hold."""
    try:
        stream.write(text)
        return
    except UnicodeEncodeError:
        pass
    if is_json:
        try:  # the same document with every non-ASCII character escaped: still one valid JSON document
            text = json.dumps(json.loads(text), ensure_ascii=True, indent=2) + "\n"
        except ValueError:
            pass
    encoding = getattr(stream, "encoding", None) or "utf-8"
    stream.write(text.encode(encoding, errors="backslashreplace").decode(encoding, errors="replace"))


def emit(outcome: Outcome, prog: str, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Write an outcome to the terminal; returns the exit code."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    if outcome.stdout:
        _write(out, outcome.stdout if outcome.stdout.endswith("\n") else outcome.stdout + "\n",
               is_json=outcome.json)
        out.flush()
    if outcome.error:
        _write(err, f"{prog}: {without_lone_surrogates(outcome.error)}\n", is_json=False)
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
