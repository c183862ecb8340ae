"""Reading a small file that anyone may have put in its place, so that no file can hang, exhaust or crash qmem.

The config, the hosts' ``settings.json`` and ``config.yaml``, an installed copy's
``package.json`` and install marker, ``installed.json``: each is read here.

Promises:

* **Only a regular file is read.**  The path is opened once, following links, with
  ``O_NONBLOCK`` (a FIFO opens at once instead of waiting for a writer), and the *opened*
  descriptor is checked with ``fstat`` — no window between a check and the open.  A FIFO,
  a device (``/dev/zero``), a directory or a socket is refused, naming what it is; so is a
  link whose target does not exist (never taken for "no file") and a loop of links.
  Nothing there at all is not a refusal: the readers return None.
* **Bounded.**  A file over the caller's limit is refused from its size, and at most the limit
  plus one byte is ever read, so a file that grows meanwhile is refused too.
  :func:`read_file_head` reads at most its first bytes, whatever the size.
* **JSON that survives any document.**  UTF-8 (a BOM is allowed); a nesting of any depth is
  refused instead of raising ``RecursionError``; an integer of more than ``max_digits`` digits
  becomes an :class:`OversizedNumber` instead of the ``ValueError`` Python raises past 4,300
  digits (and instead of the time converting it would take); ``NaN``, ``Infinity`` and
  ``-Infinity``, which Python's ``json`` accepts and JSON does not, are refused.  A key written
  twice in one object is refused when the caller asks (``unique_keys``; JSON parsers disagree
  on which one wins), otherwise the last one wins, as in JavaScript.
* Every refusal is an :class:`UnreadableFile`: one of :data:`REASONS` and one line of words
  for it, never the file's content (the one exception, a key written twice, is shown only as
  the caller's ``show_key`` makes it) — callers word their own line from those.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

from ..errors import QmemError
from ..valueclass import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = [
    "MIB", "CONTENT_REASONS", "OversizedNumber", "UnreadableFile", "read_small_file", "read_file_head",
    "decode_json", "read_json_file",
]

MIB = 1 << 20
#: Longer integers are not a value anyone means in a file qmem reads; every numeric setting fits in 10 digits.
MAX_DIGITS = 30
#: Why a file was refused: what is there (not-regular, dangling-link, link-loop, too-large), that
#: reading it failed (io), or what it holds (not-utf8, not-json, too-deep, bad-number, not-a-number,
#: duplicate-key).
REASONS = ("not-regular", "dangling-link", "link-loop", "too-large", "io", "not-utf8", "not-json", "too-deep",
           "bad-number", "not-a-number", "duplicate-key")
#: The reasons that are about what a regular file holds: it was read, and its bytes are not what was asked.
CONTENT_REASONS = frozenset(REASONS[5:])


@dataclass(frozen=True)
class OversizedNumber:
    """An integer too long to be meant, kept as its digit count (the value is never converted)."""

    digits: int

    def __repr__(self) -> str:
        return f"<a {self.digits}-digit number>"


class UnreadableFile(QmemError):
    """A file that is there but was not read: ``reason`` (one of :data:`REASONS`) and ``words``.

    ``words`` completes a sentence whose subject is the file ("is a named pipe (FIFO), not a
    regular file", "is nested too deeply", "cannot be read: Permission denied"); the message
    is that sentence about the full path.  ``detail`` is the bare cause where there is one
    (the system's error text, the JSON decoder's position).
    """

    category = "file"

    def __init__(self, path: Path, reason: str, words: str, detail: str | None = None) -> None:
        super().__init__(f"{path} {words}")
        self.path, self.reason, self.words, self.detail = path, reason, words, detail


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _not_regular(path: Path, mode: int) -> UnreadableFile:
    return UnreadableFile(path, "not-regular", f"is {_kind(mode)}, not a regular file", _kind(mode))


def _io_error(path: Path, exc: OSError) -> UnreadableFile:
    cause = exc.strerror or "I/O error"
    return UnreadableFile(path, "io", f"cannot be read: {cause}", cause)


def _size_words(limit: int) -> str:
    if limit % MIB == 0:
        return f"{limit // MIB} MiB"
    return f"{limit // 1024} KiB" if limit % 1024 == 0 else f"{limit} bytes"


def _too_large(path: Path, limit: int) -> UnreadableFile:
    return UnreadableFile(path, "too-large", f"is larger than {_size_words(limit)}", _size_words(limit))


def _open_regular(path: Path) -> int | None:
    """A descriptor open on the regular file at ``path``; None when nothing is there (not even a link)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        if os.path.islink(path):
            raise UnreadableFile(path, "dangling-link", "is a link to a file that does not exist") from None
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnreadableFile(path, "link-loop", "is a loop of symbolic links") from None
        if exc.errno in (errno.ENXIO, errno.EISDIR):  # a socket, or a directory on some systems
            try:
                mode = os.stat(path).st_mode
            except OSError:
                mode = 0
            raise _not_regular(path, mode) from None
        raise _io_error(path, exc) from None
    except ValueError:  # a NUL in the name: no file can have it
        raise UnreadableFile(path, "io", "cannot be read: its name holds a NUL character",
                             "its name holds a NUL character") from None
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        os.close(fd)
        raise _io_error(path, exc) from None
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _not_regular(path, mode)
    return fd


def _read_at_most(fd: int, count: int) -> bytes:
    chunks = []
    left = count
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_small_file(path: Path, limit: int) -> bytes | None:
    """The bytes of the regular file at ``path``, refused over ``limit`` bytes; None when nothing is there."""
    fd = _open_regular(path)
    if fd is None:
        return None
    try:
        if os.fstat(fd).st_size > limit:
            raise _too_large(path, limit)
        data = _read_at_most(fd, limit + 1)
    except OSError as exc:
        raise _io_error(path, exc) from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise _too_large(path, limit)
    return data


def read_file_head(path: Path, size: int) -> bytes | None:
    """At most the first ``size`` bytes of the regular file at ``path``; None when nothing is there."""
    fd = _open_regular(path)
    if fd is None:
        return None
    try:
        return _read_at_most(fd, size)
    except OSError as exc:
        raise _io_error(path, exc) from None
    finally:
        os.close(fd)


class _Refused(Exception):
    """Raised inside the decoder's hooks; becomes an UnreadableFile."""

    def __init__(self, reason: str, words: str) -> None:
        super().__init__(words)
        self.reason, self.words = reason, words


def _parse_int(max_digits: int) -> Callable[[str], int | OversizedNumber]:
    def parse(digits: str) -> int | OversizedNumber:
        count = len(digits) - digits.startswith("-")
        return OversizedNumber(count) if count > max_digits else int(digits)
    return parse


def _parse_constant(name: str) -> Any:
    raise _Refused("not-a-number", f"holds {name}, which is not a JSON number")


def _unique_pairs(show_key: Callable[[str], str]) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        document = dict(pairs)
        if len(document) != len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    raise _Refused("duplicate-key", f"has the key {show_key(key)!r} twice in one object")
                seen.add(key)
        return document
    return build


def decode_json(data: bytes, path: Path, *, max_digits: int = MAX_DIGITS, unique_keys: bool = False,
                show_key: Callable[[str], str] = str) -> Any:
    """The JSON value in ``data``, read from ``path`` (see the module docstring for what is refused).

    ``show_key`` turns a key name into what a refusal may show (a key may be pasted text).
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UnreadableFile(path, "not-utf8", "is not UTF-8 text") from None
    hooks: dict[str, Any] = {"parse_int": _parse_int(max_digits), "parse_constant": _parse_constant}
    if unique_keys:
        hooks["object_pairs_hook"] = _unique_pairs(show_key)
    try:
        return json.loads(text, **hooks)
    except _Refused as exc:
        raise UnreadableFile(path, exc.reason, exc.words) from None
    except json.JSONDecodeError as exc:
        where = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        raise UnreadableFile(path, "not-json", f"is not valid JSON: {where}", where) from None
    except RecursionError:
        raise UnreadableFile(path, "too-deep", "is nested too deeply") from None
    except ValueError:  # anything else the decoder refuses
        raise UnreadableFile(path, "bad-number", "holds a number that cannot be read") from None


def read_json_file(path: Path, limit: int = MIB, *, max_digits: int = MAX_DIGITS, unique_keys: bool = False,
                   show_key: Callable[[str], str] = str) -> Any:
    """The decoded JSON file at ``path``, or None when nothing is there (a file holding ``null`` reads the same)."""
    data = read_small_file(path, limit)
    if data is None:
        return None
    return decode_json(data, path, max_digits=max_digits, unique_keys=unique_keys, show_key=show_key)
