"""Canonical JSON (RFC 8785, the JSON Canonicalization Scheme) for hashing.

qmem hashes JSON values whose bytes must not depend on who produced them: the
admin importer's plan id is the SHA-256 of a canonical manifest, recomputed on
``--approve`` and compared with the id the operator approved.  This module
produces those bytes.

What it promises.  For every value it accepts, the output is the RFC 8785
serialization, encoded as UTF-8:

* objects have their members sorted by the UTF-16 code units of their names
  (not by code point and not by locale), with no whitespace anywhere;
* strings escape only ``"``, ``\\`` and the C0 controls, the latter as
  ``\\b \\t \\n \\f \\r`` or lowercase ``\\u00hh``; everything else, non-ASCII
  included, is written as is;
* numbers are written the way ECMAScript's ``Number.prototype.toString``
  writes the IEEE-754 double: shortest round-trip digits, ``1e+21`` and
  ``1e-7`` style exponents outside ``[1e-6, 1e21)``, and ``-0`` as ``0``.

What it accepts, exactly (subclasses are refused, because a subclass may
carry state or a ``__str__`` that the JSON text would silently drop):

* ``dict`` with ``str`` keys: an object;
* ``list`` and ``tuple``: an array (a tuple is a read-only list; a
  namedtuple, being a subclass, is refused);
* :class:`StreamedArray`: an array whose items are drawn lazily from an
  iterable;
* ``str``: a string, if it holds no surrogate code point -- paired or not,
  surrogates have no UTF-8 form (``json.loads`` already joins escaped pairs);
* ``int``: a number, if ``abs(n) <= 2**53 - 1``;
* ``float``: a number, if finite;
* ``bool`` and ``None``: ``true``, ``false`` and ``null``.

Integers are limited to the ECMAScript "safe" range because JCS is defined on
doubles: ``9007199254740993`` would have to be written as ``9007199254740992``,
so a manifest holding such an id would hash a different value from the one it
holds.  Convert a larger integer to ``str`` (or, if rounding is what you mean,
to ``float``) before canonicalizing it.

Anything else -- a cycle, NaN or an infinity, a non-``str`` key, a lone
surrogate, any other type -- raises :class:`CanonicalJSONError`.

Nesting depth is limited only by memory: the encoder walks the value with an
explicit stack, so a 100,000-deep list raises no ``RecursionError``.

Streaming.  :func:`canonical_chunks` yields the output in pieces of roughly
64 KiB (more only when one string is longer), so a caller can feed a hash
without holding the whole text.  To avoid
holding the whole *value* as well, wrap a generator in :class:`StreamedArray`
anywhere in the tree::

    manifest = {"header": header, "points": StreamedArray(point_dicts())}
    plan_id = sha256_hex(manifest)

An error found during streaming is raised from the iterator, after some
chunks may already have been yielded; those chunks are then meaningless.  An
exception raised by a :class:`StreamedArray`'s iterable propagates unchanged.
"""

from __future__ import annotations

import hashlib
import math
import re

from ..errors import QmemError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any

__all__ = []

MAX_SAFE_INTEGER = 2**53 - 1
"""The largest integer magnitude accepted (ECMAScript ``Number.MAX_SAFE_INTEGER``)."""

# Pieces are joined and encoded in batches of about this many characters: big
# enough that hashing costs one call per batch, small enough to stay bounded.
_CHUNK_CHARS = 1 << 16

# Arrays of at most this many floats (an embedding vector) are written in one
# piece; the cap keeps that piece near the batch size above.
_FLAT_ITEMS = 4096

_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f"\\]')
_ESCAPES = {chr(c): f"\\u{c:04x}" for c in range(0x20)}
_ESCAPES.update({'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t",
                 "\n": "\\n", "\f": "\\f", "\r": "\\r"})
_SURROGATE = re.compile("[\ud800-\udfff]")


class CanonicalJSONError(QmemError):
    """The value cannot be canonicalized (see the module docstring for why)."""

    category = "input"


class StreamedArray:
    """A JSON array whose items come from an iterable, consumed while encoding.

    The iterable is read exactly once, so a ``StreamedArray`` can be encoded
    only once; encoding it again raises :class:`CanonicalJSONError` rather than
    silently producing ``[]``.  Build a new one for each hash.
    """

    __slots__ = ("_items", "_used")

    def __init__(self, items: Iterable[Any]) -> None:
        self._items = items
        self._used = False

    def __repr__(self) -> str:
        state = "consumed" if self._used else "unconsumed"
        return f"<StreamedArray {state}>"

    def _take(self) -> Iterator[Any]:
        if self._used:
            raise CanonicalJSONError("a StreamedArray can be encoded only once")
        self._used = True
        return iter(self._items)


def canonical_chunks(value: Any) -> Iterator[bytes]:
    """Yield the RFC 8785 UTF-8 bytes of *value* in bounded pieces.

    Joining the pieces gives exactly :func:`canonical_bytes`.  Raises
    :class:`CanonicalJSONError` (from the iterator) for a value outside the
    accepted set.
    """
    batch: list[str] = []
    size = 0
    for piece in _pieces(value):
        batch.append(piece)
        size += len(piece)
        if size >= _CHUNK_CHARS:
            yield "".join(batch).encode("utf-8")
            batch.clear()
            size = 0
    if batch:
        yield "".join(batch).encode("utf-8")


def canonical_bytes(value: Any) -> bytes:
    """Return the RFC 8785 UTF-8 bytes of *value* (all of them, in memory)."""
    return b"".join(canonical_chunks(value))


def sha256_hex(value: Any) -> str:
    """Return the SHA-256 of the canonical bytes of *value*, as 64 lowercase hex digits.

    The value is streamed into the hash, so with :class:`StreamedArray` the
    memory used does not grow with the number of items.
    """
    digest = hashlib.sha256()
    for chunk in canonical_chunks(value):
        digest.update(chunk)
    return digest.hexdigest()


class _Frame:
    """One open object or array: what is left to write, and how to close it."""

    __slots__ = ("container", "members", "closer", "first")

    def __init__(self, container: object, members: Iterator[Any], closer: str) -> None:
        # The container is kept alive while open so that its id() cannot be
        # reused by a fresh object and mistaken for a cycle.
        self.container = container
        self.members = members
        self.closer = closer
        self.first = True


_END = object()


def _pieces(root: Any) -> Iterator[str]:
    """Yield the canonical text of *root* as small strings, without recursion."""
    stack: list[_Frame] = []
    open_ids: set[int] = set()
    value = root
    while True:
        kind = type(value)
        if kind is str:
            yield _string(value)
        elif value is None:
            yield "null"
        elif kind is bool:
            yield "true" if value else "false"
        elif kind is int:
            yield _integer(value)
        elif kind is float:
            yield _number(value)
        elif (kind is list or kind is tuple) and len(value) <= _FLAT_ITEMS and all(
                type(item) is float for item in value):
            # Embedding vectors dominate a manifest: one join per vector
            # instead of a trip round this loop per number.
            yield "[" + ",".join(map(_number, value)) + "]"
        elif kind is dict or kind is list or kind is tuple or kind is StreamedArray:
            ident = id(value)
            if ident in open_ids:
                raise CanonicalJSONError("the value contains a cycle")
            if kind is dict:
                members: Iterator[Any] = iter(_sorted_members(value))
                opener, closer = "{", "}"
            else:
                members = value._take() if kind is StreamedArray else iter(value)
                opener, closer = "[", "]"
            open_ids.add(ident)
            stack.append(_Frame(value, members, closer))
            yield opener
        else:
            raise CanonicalJSONError(
                f"cannot canonicalize a value of type {kind.__qualname__}")

        # Find the next value to write, closing every container that is done.
        while stack:
            frame = stack[-1]
            member = next(frame.members, _END)
            if member is _END:
                stack.pop()
                open_ids.discard(id(frame.container))
                yield frame.closer
                continue
            separator = "" if frame.first else ","
            frame.first = False
            if frame.closer == "}":
                name, value = member
                yield separator + name + ":"
            else:
                value = member
                if separator:
                    yield separator
            break
        else:
            return


def _sorted_members(obj: dict) -> list[tuple[str, Any]]:
    """Return ``(encoded name, value)`` pairs in RFC 8785 order."""
    for key in obj:
        if type(key) is not str:
            raise CanonicalJSONError(
                f"object keys must be str, not {type(key).__qualname__}")
        if _SURROGATE.search(key):
            raise CanonicalJSONError("an object key contains a surrogate code point")
    # Big-endian UTF-16 bytes compare exactly as the code-unit sequences do.
    order = sorted(obj, key=lambda k: k.encode("utf-16-be"))
    return [(_string(key), obj[key]) for key in order]


def _string(text: str) -> str:
    if _SURROGATE.search(text):
        raise CanonicalJSONError("a string contains a surrogate code point")
    return '"' + _NEEDS_ESCAPE.sub(lambda m: _ESCAPES[m.group()], text) + '"'


def _integer(number: int) -> str:
    if -MAX_SAFE_INTEGER <= number <= MAX_SAFE_INTEGER:
        return str(number)
    raise CanonicalJSONError(
        "an integer is beyond 2**53 - 1 in magnitude; pass it as str or float")


def _number(number: float) -> str:
    """Format a double as ECMAScript ``Number.prototype.toString`` does."""
    if not math.isfinite(number):
        raise CanonicalJSONError("NaN and infinities have no JSON form")
    if number == 0.0:
        return "0"  # covers -0.0
    text = repr(number)
    # Python's repr already holds the shortest round-trip digits; between 1e-4
    # and 1e16 it is also in plain notation, which ECMAScript shares there.
    if "e" not in text:
        return text[:-2] if text.endswith(".0") else text

    sign = "-" if number < 0 else ""
    mantissa, _, exponent = text.lstrip("-").partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).rstrip("0")
    # The value is 0.<digits> * 10**point, the "n" of ECMA-262 Number::toString.
    point = len(whole) + int(exponent)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped
    count = len(digits)

    if count <= point <= 21:
        body = digits + "0" * (point - count)
    elif 0 < point <= 21:
        body = digits[:point] + "." + digits[point:]
    elif -6 < point <= 0:
        body = "0." + "0" * -point + digits
    else:
        power = point - 1
        power_text = ("+" if power >= 0 else "-") + str(abs(power))
        head = digits[0] if count == 1 else digits[0] + "." + digits[1:]
        body = head + "e" + power_text
    return sign + body
