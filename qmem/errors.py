"""The exceptions qmem raises, each with a category.

Every failure qmem reports is a :class:`QmemError` subclass.  The ``category``
names the kind of failure in one word (``configuration``, ``index``, ``input``,
``transport``, …) so that a caller can decide what to do without parsing the
message, and the message itself is one line meant for a human: it never carries
an endpoint, a header, a request or response body, memory text or a credential.

The command-line front ends turn a ``QmemError`` into ``qmem-…: <message>`` on
stderr and a non-zero exit; anything else that escapes is a bug.  :func:`one_line` is how
any text becomes such a line (a server's error detail, a stored reason, a bounded value).
"""

from __future__ import annotations

__all__ = [
    "QmemError", "ConfigError", "InputError", "LocalIndexError", "CorruptIndexError", "ToolError", "one_line",
]


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` as one line: every run of whitespace (line breaks too) one space, none at the ends;
    with ``limit``, at most that many characters, the last one ``…`` when the text was cut."""
    text = " ".join(text.split())
    if limit is None or len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)] + "…"


class QmemError(Exception):
    """Base class: a one-line, redacted message plus a category."""

    category = "error"

    def __init__(self, message: str, *, category: str | None = None) -> None:
        super().__init__(message)
        if category is not None:
            self.category = category

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.category


class ConfigError(QmemError):
    """The configuration file or an environment value is invalid."""

    category = "configuration"


class InputError(QmemError):
    """An argument given by a user or a model is invalid (checked before any I/O)."""

    category = "input"


class LocalIndexError(QmemError):
    """The local SQLite index cannot be opened, read or written."""

    category = "index"


class CorruptIndexError(LocalIndexError):
    """The local index file is not a usable qmem database; it was left untouched."""

    category = "index"


class ToolError(QmemError):
    """The tool could not do what was asked; the message is for the model and the user."""

    category = "tool"
