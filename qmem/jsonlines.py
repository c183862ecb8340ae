"""JSON messages one per line, as the MCP server and the pi bridge read and write them.

Promises:

* **Reading never raises anything but** :class:`UnreadableLine`.  A line is decoded as UTF-8
  with U+FFFD for bytes that are not (as the official MCP SDK does), then parsed as strict
  JSON: ``NaN``/``Infinity`` are not JSON, an integer too long for ``int()`` (over 4,300
  digits) is kept exactly as a :class:`BigInteger`, a float too large becomes ``inf`` (a
  value, never an id), duplicate keys keep the last value (as ``JSON.parse`` does).  A line
  nested deeper than the parser can follow (about 1,000 levels: its ``RecursionError`` is the
  bound, which costs nothing on ordinary lines, where a scan before parsing would cost more
  than the parse) or that is not JSON raises UnreadableLine,
  carrying the top-level members that could still be read, so the caller can answer the
  request's own id.
* **A line is bounded** (:data:`LINE_LIMIT`, 16 MiB, far above any real message):
  :func:`read_lines` reads in 64 KiB pieces and never holds more than the limit; a longer
  line is read to its end and dropped, and stands as an UnreadableLine (:data:`TOO_LONG`)
  carrying the top-level members readable in its first 4 KiB, so the answer can carry its id.
* **Ids** are strings or integers written without fraction or exponent (:func:`is_request_id`);
  ``true``, ``1.0``, ``null``, lists and objects are not ids.  :func:`id_key` compares them by
  JSON type and value, so ``"1"``, ``1`` and ``true`` never match one another.
* **Writing always succeeds for JSON data and is always strict JSON** (:func:`encode_line`):
  compact, UTF-8, one line, never ``NaN``/``Infinity`` (a non-finite float is written as
  ``null``, as ``JSON.stringify`` does).  A lone surrogate, which UTF-8 cannot encode, is
  written as U+FFFD, except in the top-level ``id``, which is echoed exactly: as a
  ``\\udXXX`` escape, so a client that sent one can match its answer; a BigInteger id is
  written as the digits received.
"""

from __future__ import annotations

import json
import math
import re
from json.decoder import scanstring

from .valueclass import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any, BinaryIO

__all__ = [
    "UnreadableLine", "decode_line", "echoable_id", "encode_line", "id_key", "is_request_id",
    "without_lone_surrogates", "LONE_SURROGATE", "read_lines", "TOO_LONG",
]

#: A code point UTF-8 cannot encode: a surrogate not paired up into a character.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def without_lone_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD."""
    return LONE_SURROGATE.sub("\ufffd", text)


@dataclass(frozen=True)
class BigInteger:
    """A JSON integer with more digits than ``int()`` converts, kept as the text received."""

    text: str


class UnreadableLine(ValueError):
    """A line that is not one JSON value qmem can take.

    ``members`` holds the top-level members of a line that is still recognisably one JSON
    object (scalars parsed, other values as :data:`UNREAD`), else None.
    """

    def __init__(self, reason: str, members: dict[str, Any] | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.members = members


class _Unread:
    def __repr__(self) -> str:
        return "UNREAD"


#: Stands for a value :func:`read_members` did not read: an array, an object, ``NaN`` or ``Infinity``.
UNREAD: Any = _Unread()

NOT_JSON = "the line is not JSON"
TOO_DEEP = "the line is nested too deeply"

#: The longest line read, newline included: far above any real message (a store's text is
#: bounded well below it), low enough that reading one costs little memory.
LINE_LIMIT = 16 * 1024 * 1024
TOO_LONG = f"the line is longer than the limit of 16 MiB ({LINE_LIMIT} bytes)"
_PIECE = 64 * 1024
_HEAD = 4096  # of an over-long line: where its id is looked for


class _NonFinite(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _NonFinite(name)


def _parse_int(text: str) -> int | BigInteger:
    try:
        return int(text)
    except ValueError:  # over sys.get_int_max_str_digits(): keep the digits
        return BigInteger(text)


_STRICT = json.JSONDecoder(parse_constant=_refuse_constant)
_STRICT_BIG = json.JSONDecoder(parse_constant=_refuse_constant, parse_int=_parse_int)
_SKIM = json.JSONDecoder(parse_constant=lambda name: UNREAD, parse_int=_parse_int)


def decode_line(raw: bytes) -> Any:
    """The JSON value on one line (trailing newline allowed); UnreadableLine if there is none."""
    text = raw.decode("utf-8", errors="replace")
    try:
        try:
            return _STRICT.decode(text)
        except (json.JSONDecodeError, _NonFinite, RecursionError):
            raise
        except ValueError:  # an integer ``int()`` refuses: parse again keeping its digits
            return _STRICT_BIG.decode(text)
    except RecursionError:
        raise UnreadableLine(TOO_DEEP, read_members(text)) from None
    except ValueError:
        raise UnreadableLine(NOT_JSON, read_members(text)) from None


def read_lines(stream: BinaryIO, limit: int = LINE_LIMIT) -> Iterator[bytes | UnreadableLine]:
    """Each line of ``stream``, or an UnreadableLine (:data:`TOO_LONG`) for one over ``limit`` bytes.

    Memory stays under ``limit`` plus a piece, whatever the peer sends: an over-long line is
    read on to its end in pieces that are dropped as they come.
    """
    while True:
        piece = stream.readline(_PIECE)
        if not piece:
            return
        if piece.endswith(b"\n"):
            yield piece  # the common case: one piece, no copy
            continue
        pieces, size = [piece], len(piece)
        while piece and not piece.endswith(b"\n") and size <= limit:
            piece = stream.readline(_PIECE)
            pieces.append(piece)
            size += len(piece)
        if size <= limit:
            yield b"".join(pieces)
            continue
        head = pieces[0][:_HEAD].decode("utf-8", errors="replace")
        pieces.clear()
        while piece and not piece.endswith(b"\n"):  # to the end of the line, keeping nothing
            piece = stream.readline(_PIECE)
        yield UnreadableLine(TOO_LONG, read_members(head, partial=True))


_SPACE = re.compile(r"[ \t\n\r]*")
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


def _skip_nested(text: str, start: int) -> int:
    """The index after the array or object opening at ``start`` (brackets in strings skipped)."""
    depth = 0
    for token in _TOKEN.finditer(text, start):
        first = text[token.start()]
        if first in "[{":
            depth += 1
        elif first in "]}":
            depth -= 1
            if depth == 0:
                return token.end()
    raise ValueError("unclosed")


def read_members(text: str, *, partial: bool = False) -> dict[str, Any] | None:
    """The top-level members of a line shaped like one object, without parsing nested values.

    What lets an error answer carry the id of a request too deep (or otherwise unfit) to
    parse; None if the line is not shaped like an object or a top-level value is unreadable.
    With ``partial`` (the head of a line cut short) the members read whole before the text
    stops making sense, or ends, are the answer.
    """
    members: dict[str, Any] = {}
    cut = None
    try:
        index = _SPACE.match(text, 0).end()
        if text[index:index + 1] != "{":
            return None
        cut = members if partial else None
        index = _SPACE.match(text, index + 1).end()
        if text[index:index + 1] == "}":
            index += 1
        else:
            while True:
                if text[index:index + 1] != '"':
                    return cut
                key, index = scanstring(text, index + 1)
                index = _SPACE.match(text, index).end()
                if text[index:index + 1] != ":":
                    return cut
                index = _SPACE.match(text, index + 1).end()
                if text[index:index + 1] in ("[", "{"):
                    index = _skip_nested(text, index)
                    value = UNREAD
                else:
                    value, index = _SKIM.raw_decode(text, index)
                index = _SPACE.match(text, index).end()
                separator = text[index:index + 1]
                if separator not in (",", "}"):  # also a value the cut may have shortened
                    return cut
                members[key] = value
                index = _SPACE.match(text, index + 1).end()
                if separator == "}":
                    break
        return members if _SPACE.match(text, index).end() == len(text) else cut
    except (ValueError, RecursionError):
        return cut


def is_request_id(value: Any) -> bool:
    """Whether ``value`` can identify a request: a string or an integer (not a bool)."""
    return isinstance(value, (str, BigInteger)) or (isinstance(value, int) and not isinstance(value, bool))


def echoable_id(value: Any) -> Any:
    """``value`` if an answer can echo it exactly as strict JSON, else None.

    For answering a request refused for its id (a list, an object, a float): the peer can
    match the answer when the id survives the trip, and gets ``null`` otherwise.
    """
    if is_request_id(value):
        return value
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None
    return value


def id_key(value: Any) -> tuple[str, Any] | None:
    """``value`` as a key comparing ids by JSON type and value; None if it is not an id."""
    if not is_request_id(value):
        return None
    return ("string" if isinstance(value, str) else "number", value)


# -- writing


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def _dumps(value: Any, *, ascii_only: bool = False) -> str:
    try:
        return json.dumps(value, ensure_ascii=ascii_only, allow_nan=False, separators=(",", ":"))
    except ValueError:  # NaN or Infinity somewhere: written as null, as JSON.stringify does
        return json.dumps(_finite(value), ensure_ascii=ascii_only, allow_nan=False, separators=(",", ":"))


def _member_text(key: str, value: Any) -> str:
    if key == "id":
        if isinstance(value, BigInteger):
            return value.text
        return _dumps(value, ascii_only=True)  # escapes lone surrogates instead of replacing them
    return without_lone_surrogates(_dumps(value))


def _message_text(message: Any) -> str:
    if isinstance(message, dict):
        return "{" + ",".join(f"{_dumps(str(key), ascii_only=True)}:{_member_text(str(key), value)}"
                              for key, value in message.items()) + "}"
    if isinstance(message, list):  # a batch of answers
        return "[" + ",".join(_message_text(item) for item in message) + "]"
    return without_lone_surrogates(_dumps(message))


def encode_line(message: Any) -> bytes:
    """``message`` as compact strict JSON plus a newline, in UTF-8.

    Raises TypeError (or RecursionError) only for what JSON cannot hold at all: an object
    that is not JSON data, or nesting deeper than the encoder follows.
    """
    try:
        text = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return text.encode("utf-8") + b"\n"
    except (ValueError, TypeError):  # NaN, a lone surrogate (UnicodeEncodeError), a BigInteger id
        return _message_text(message).encode("utf-8") + b"\n"
