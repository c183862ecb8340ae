"""Reading the config file so that no file can hang, exhaust or crash qmem.

Promises:

* **Only a regular file is read.**  The path is opened once, following links, with
  ``O_NONBLOCK`` (a FIFO opens at once instead of waiting for a writer), and the *opened*
  descriptor is checked with ``fstat`` — no window between a check and the open.  A FIFO,
  a device (``/dev/zero``), a directory or a socket is refused, naming what it is; so is a
  link whose target does not exist (never taken for "no config file") and a loop of links.
* **Bounded.**  A file over :data:`MAX_CONFIG_BYTES` (1 MiB) is refused from its size, and at
  most that many bytes plus one are ever read, so a file that grows meanwhile is refused too.
* **Strict JSON.**  UTF-8 (a BOM is allowed); ``NaN``, ``Infinity`` and ``-Infinity``, which
  Python's ``json`` accepts, are refused; a key written twice in one object is refused
  (JSON parsers disagree on which one wins); an integer of more than :data:`MAX_DIGITS`
  digits becomes an :class:`OversizedNumber`, which validation reports for its key, instead of
  the ``ValueError`` Python raises past 4,300 digits.
* Every refusal is a :class:`~qmem.errors.ConfigError`: one line naming the file by its
  name only (never its directory, never its content).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError

__all__ = ["MAX_CONFIG_BYTES", "MAX_DIGITS", "OversizedNumber", "read_config_bytes", "decode_config",
           "read_config_file"]

MAX_CONFIG_BYTES = 1 << 20
#: Longer integers are not a setting anyone means; every numeric setting fits in 10 digits.
MAX_DIGITS = 30


@dataclass(frozen=True)
class OversizedNumber:
    """An integer too long to be a setting, kept as its digit count (the value is never converted)."""

    digits: int

    def __repr__(self) -> str:
        return f"<a {self.digits}-digit number>"


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


def _not_regular(name: str, mode: int) -> ConfigError:
    return ConfigError(f"the config file {name} is {_kind(mode)}, not a regular file; "
                       f"the config must be a JSON file")


def read_config_bytes(path: Path) -> bytes | None:
    """The bytes of the config file at ``path``; None when nothing is there (not even a link)."""
    name = path.name
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        if os.path.islink(path):
            raise ConfigError(f"the config file {name} is a link to a file that does not exist; "
                              f"fix or remove the link") from None
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigError(f"the config file {name} is a loop of symbolic links") from None
        if exc.errno in (errno.ENXIO, errno.EISDIR):  # a socket, or a directory on some systems
            try:
                mode = os.stat(path).st_mode
            except OSError:
                mode = 0
            raise _not_regular(name, mode) from None
        raise ConfigError(f"cannot read the config file {name}: {exc.strerror or 'I/O error'}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(name, info.st_mode)
        if info.st_size > MAX_CONFIG_BYTES:
            raise _too_large(name)
        chunks = []
        left = MAX_CONFIG_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise _too_large(name)
        return b"".join(chunks)
    except OSError as exc:
        raise ConfigError(f"cannot read the config file {name}: {exc.strerror or 'I/O error'}") from None
    finally:
        os.close(fd)


def _too_large(name: str) -> ConfigError:
    return ConfigError(f"the config file {name} is larger than {MAX_CONFIG_BYTES // (1 << 20)} MiB; "
                       f"it is not a qmem config")


class _Refused(Exception):
    """Raised inside the decoder's hooks; becomes a ConfigError naming the file."""


def _parse_int(digits: str) -> int | OversizedNumber:
    count = len(digits) - digits.startswith("-")
    return OversizedNumber(count) if count > MAX_DIGITS else int(digits)


def _parse_constant(name: str) -> Any:
    raise _Refused(f"holds {name}, which is not a JSON number")


def _object_hook(show_key: Callable[[str], str]) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        document = dict(pairs)
        if len(document) != len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    raise _Refused(f"has the key {show_key(key)!r} twice in one object")
                seen.add(key)
        return document
    return build


def decode_config(data: bytes, name: str, *, show_key: Callable[[str], str] = str) -> Any:
    """The JSON value in ``data`` (see the module docstring for what is refused).

    ``show_key`` turns a key name into what a message may show (a key may be pasted text).
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ConfigError(f"the config file {name} is not UTF-8 text") from None
    try:
        return json.loads(text, parse_int=_parse_int, parse_constant=_parse_constant,
                          object_pairs_hook=_object_hook(show_key))
    except _Refused as exc:
        raise ConfigError(f"the config file {name} {exc}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"the config file {name} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise ConfigError(f"the config file {name} is nested too deeply") from None
    except ValueError:  # anything else the decoder refuses
        raise ConfigError(f"the config file {name} holds a number that cannot be read") from None


def read_config_file(path: Path, *, show_key: Callable[[str], str] = str) -> Any:
    """The decoded config at ``path``, or None when there is no file."""
    data = read_config_bytes(path)
    return None if data is None else decode_config(data, path.name, show_key=show_key)
