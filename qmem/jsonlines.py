"""JSON messages one per line, as the MCP server and the pi bridge write them: always writable.

A Python string can hold a lone surrogate (from undecodable bytes, or a ``"\\ud800"`` escape
a client sent), which UTF-8 cannot encode; writing it would fail the whole answer.
:func:`encode_line` replaces any such code point with U+FFFD, so a message is always sent
and is always valid UTF-8 JSON.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["encode_line", "without_lone_surrogates", "LONE_SURROGATE"]

#: A code point UTF-8 cannot encode: a surrogate not paired up into a character.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def without_lone_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD."""
    return LONE_SURROGATE.sub("\ufffd", text)


def encode_line(message: Any) -> bytes:
    """``message`` as compact JSON plus a newline, in UTF-8."""
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = without_lone_surrogates(text).encode("utf-8")
    return data + b"\n"
