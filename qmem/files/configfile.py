"""Reading the config file so that no file can hang, exhaust or crash qmem.

The reading itself is :mod:`qmem.files.smallfile`'s (a regular file only, opened without blocking,
bounded, any JSON survived; see there).  What is the config's own:

* **Its bound**: :data:`MAX_CONFIG_BYTES` (1 MiB).
* **Strict JSON**: besides what :mod:`qmem.files.smallfile` refuses (``NaN``, ``Infinity``, nesting
  too deep), a key written twice in one object is refused (JSON parsers disagree on which one
  wins); an integer of more than :data:`MAX_DIGITS` digits becomes an :class:`OversizedNumber`,
  which validation reports for its key.
* **Its messages**: every refusal is a :class:`~qmem.errors.ConfigError`, one line naming the
  file by its name only (never its directory, never its content), with what to do where there
  is something to do.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .smallfile import MAX_DIGITS, MIB, OversizedNumber, UnreadableFile, decode_json, read_small_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["read_config_bytes", "decode_config", "read_config_file"]

MAX_CONFIG_BYTES = MIB

#: What the config's refusals add to the reader's words: what the config must be, what to do.
_ADVICE = {"not-regular": "; the config must be a JSON file", "dangling-link": "; fix or remove the link",
           "too-large": "; it is not a qmem config"}


def _config_error(name: str, refused: UnreadableFile) -> ConfigError:
    if refused.reason == "io":
        return ConfigError(f"cannot read the config file {name}: {refused.detail}")
    return ConfigError(f"the config file {name} {refused.words}{_ADVICE.get(refused.reason, '')}")


def read_config_bytes(path: Path) -> bytes | None:
    """The bytes of the config file at ``path``; None when nothing is there (not even a link)."""
    try:
        return read_small_file(path, MAX_CONFIG_BYTES)
    except UnreadableFile as exc:
        raise _config_error(path.name, exc) from None


def decode_config(data: bytes, name: str, *, show_key: Callable[[str], str] = str) -> Any:
    """The JSON value in ``data`` (see the module docstring for what is refused).

    ``show_key`` turns a key name into what a message may show (a key may be pasted text).
    """
    try:
        return decode_json(data, Path(name), max_digits=MAX_DIGITS, unique_keys=True, show_key=show_key)
    except UnreadableFile as exc:
        raise _config_error(name, exc) from None


def read_config_file(path: Path, *, show_key: Callable[[str], str] = str) -> Any:
    """The decoded config at ``path``, or None when there is no file."""
    data = read_config_bytes(path)
    return None if data is None else decode_config(data, path.name, show_key=show_key)
