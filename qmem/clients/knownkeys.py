"""The values of qmem's own credentials, and their removal from text a server sent.

The credential scanner (:mod:`qmem.secretscan.engine`) recognises keys by their shape; this module
recognises them by their value, which qmem knows.  A server that echoes a key without any
telltale shape (``{"detail": "token K lacks scope"}``, a 409 whose ``id`` is the key) is
caught here.

Promises:

* **Known values.** :func:`known_keys` gathers every credential variable of
  :data:`qmem.config.CREDENTIAL_VARIABLES` — gateway, Qdrant, embeddings, admin and source
  keys, preferred names and seed aliases alike — from the process environment, plus any value
  a caller adds (an HTTP client adds the key it sends).  Values are taken as
  :func:`qmem.config.credential` takes them: stripped, and absent when blank.
* **Every form a key comes back in.** A server can echo a key as it was sent, URL-encoded
  (``quote`` and ``quote_plus``), as hexadecimal (either case) or inside base64 or base64url
  of a longer text — at any of the three byte alignments, so the form searched for is the
  run of base64 characters that only the key's bytes decide (:func:`encoded_forms`).  Each
  form is searched for like the value itself.  (An echo cut in two is caught by its pieces.)
* **Redaction.** :meth:`KnownKeys.redact` replaces every occurrence of a known value's forms,
  and of any :data:`PIECE`-character piece of one, with ``[redacted]``; overlapping or
  touching occurrences become one marker.  :meth:`KnownKeys.redact_document` does the same to
  every string, keys included, of a decoded JSON document — except what a user wrote.
* **A record stays what its author wrote.** The strings a record's author wrote — a
  document's ``text`` and ``supersede_reason`` members, at any depth (a gateway record, a
  recalled payload) — lose only *whole* occurrences of a long value or of one of its forms
  (:meth:`KnownKeys.redact_whole`), never a piece: "Our staging test-gateway host" stays
  whole when the key is ``test-gateway-key``, so the local copy of a record equals what was
  stored and ``find test-gateway`` finds it.  A record that holds a whole key is a leak,
  and that key is redacted.
* **Data stays data.** A value shorter than :data:`PIECE` characters (a placeholder such as
  ``ollama`` or ``EMPTY``, or a weak key), and its forms, are redacted where they occur whole
  in a server's free text — an error message, a detail, a code — but never in data: a
  record's text, an id, a payload.  Rewriting every ``test`` in a memory because the gateway
  key is ``test`` would corrupt what is stored and found, for a value no one could keep
  secret anyway.  Pieces of long values are redacted in every other string of an answer
  (an id, a project name, a cursor): one appearing there is a leak.
* **Linear time.** A value of length *n* has *n* − 11 pieces, kept in a set; qmem never
  searches for them one by one.  Every piece holds one of its value's aligned
  :data:`ANCHOR`-character blocks, so one compiled alternation of those blocks finds the
  candidates, and each candidate costs at most seven set look-ups.  The set and the patterns
  are built once per set of values and cached.
* :func:`safe_server_text` is the one treatment for a server's words that become a message
  or an outbox reason: known values first, then the scanner's shapes, then one bounded line.
* Pure apart from reading the environment; nothing is logged, and a :class:`KnownKeys`
  never shows the values it holds (its ``repr`` counts them).
"""

from __future__ import annotations

import base64
import functools
import os
import re
from urllib.parse import quote, quote_plus

from ..config import CREDENTIAL_VARIABLES
from ..errors import one_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

__all__ = ["known_keys"]

#: The shortest piece of a key that is redacted wherever it appears.
PIECE = 12
#: Block length such that every PIECE-character window of a value holds a whole aligned block.
ANCHOR = (PIECE + 1) // 2
MARKER = "[redacted]"
#: An encoded form shorter than this is not searched for: four base64 characters of a short key
#: would match ordinary words.  (A value itself is searched for whole at any length.)
MIN_ENCODED = 8
#: The members of a document whose strings a record's author wrote: only whole keys leave them.
AUTHORED_MEMBERS = frozenset({"text", "supersede_reason"})


def encoded_forms(value: str) -> set[str]:
    """The strings ``value`` can come back as, itself included: URL-encoded, hexadecimal (both
    cases), and for base64 and base64url, at each of the three byte alignments, the characters
    that encode whole 3-byte groups of the value (the characters around them also carry the
    bytes next to it, which are not known)."""
    data = value.encode("utf-8", "surrogatepass")
    forms = {value, quote(value, safe=""), quote_plus(value, safe=""), data.hex(), data.hex().upper()}
    forms.add(re.sub("%[0-9A-F]{2}", lambda match: match.group().lower(), quote(value, safe="")))
    for skip in range(3):
        chunk = data[skip:]
        chunk = chunk[: len(chunk) // 3 * 3]
        if chunk:
            encoded = base64.b64encode(chunk).decode("ascii")
            forms.update((encoded, encoded.replace("+", "-").replace("/", "_")))
    return {form for form in forms if form == value or len(form) >= MIN_ENCODED}


class KnownKeys:
    """A fixed set of credential values and the compiled search for them and their forms."""

    __slots__ = ("_count", "_pieces", "_anchors", "_whole", "_long_forms")

    def __init__(self, values: Iterable[str]) -> None:
        distinct = sorted({value for value in values if value}, key=lambda v: (-len(v), v))
        self._count = len(distinct)
        # Forms of a long value are searched for by their pieces, and whole in what a user wrote;
        # a short value's forms (whatever their length) only whole, and only in free text.
        long_forms = {form for value in distinct if len(value) >= PIECE for form in encoded_forms(value)}
        short_forms = {form for value in distinct if len(value) < PIECE for form in encoded_forms(value)}
        self._long_forms = tuple(sorted(long_forms, key=lambda v: (-len(v), v)))
        self._pieces = frozenset(form[at:at + PIECE] for form in long_forms for at in range(len(form) - PIECE + 1))
        anchors = {form[at:at + ANCHOR] for form in long_forms for at in range(0, len(form) - ANCHOR + 1, ANCHOR)}
        self._anchors = re.compile("|".join(map(re.escape, sorted(anchors)))) if anchors else None
        short = sorted(short_forms - long_forms, key=lambda v: (-len(v), v))  # longest first: the whole form wins
        self._whole = re.compile("|".join(map(re.escape, short))) if short else None

    def __repr__(self) -> str:
        return f"<KnownKeys: {self._count} value{'s' if self._count != 1 else ''}>"

    def __bool__(self) -> bool:
        return self._count > 0

    def spans(self, text: str, *, short: bool = True) -> list[tuple[int, int]]:
        """The sorted, disjoint ``(start, end)`` ranges of ``text`` to redact (short values too
        only with ``short``: free text, not data)."""
        found: list[tuple[int, int]] = []
        if self._anchors is not None:
            found.extend(self._piece_spans(text))
        if short and self._whole is not None:
            found.extend(match.span() for match in self._whole.finditer(text))
        return _merged(found)

    def whole_spans(self, text: str) -> list[tuple[int, int]]:
        """The sorted, disjoint ranges where a long value, or one of its forms, occurs whole.

        Every whole occurrence lies inside a run of pieces, so the forms are looked for with
        ``str.find`` inside the runs alone, stepping past each match (a second occurrence
        overlapping the first leaves at most a piece, which authored text may keep)."""
        if self._anchors is None:
            return []
        found: list[tuple[int, int]] = []
        for start, end in self._piece_spans(text):
            for form in self._long_forms:
                if len(form) > end - start:
                    continue
                at = text.find(form, start, end)
                while at >= 0:
                    found.append((at, at + len(form)))
                    at = text.find(form, at + len(form), end)
        return _merged(found)

    def _piece_spans(self, text: str) -> list[tuple[int, int]]:
        """Where pieces occur: each anchor found is checked with the PIECE-character windows holding it.

        A piece of a value holds one of the value's aligned anchors, at most PIECE - ANCHOR
        characters from its start, so the windows starting that far before a found anchor
        are the only ones to look up.  Constant work per anchor found, whatever the value.
        """
        assert self._anchors is not None
        search, pieces, length = self._anchors.search, self._pieces, len(text)
        found: list[tuple[int, int]] = []
        position = 0
        while (match := search(text, position)) is not None:
            at = match.start()
            last = -1  # the start of the last window that is a piece
            for start in range(max(0, at - (PIECE - ANCHOR)), min(at, length - PIECE) + 1):
                if text[start:start + PIECE] in pieces:
                    last = start
                    if found and start <= found[-1][1]:
                        found[-1] = (min(found[-1][0], start), max(found[-1][1], start + PIECE))
                    else:
                        found.append((start, start + PIECE))
            if last < 0:
                position = at + 1
                continue
            # A run of a key: follow it window by window, without searching, to where it ends.
            while last + 1 + PIECE <= length and text[last + 1:last + 1 + PIECE] in pieces:
                last += 1
            found[-1] = (found[-1][0], max(found[-1][1], last + PIECE))
            position = max(at + 1, last + 2)  # every window starting up to last + 1 has been looked at
        return found

    def redact(self, text: str, *, short: bool = True) -> str:
        """``text`` with every known value's forms, and every PIECE-character piece of one, as
        ``[redacted]``; a value shorter than PIECE (and its forms) only with ``short`` (free text;
        ``short=False`` for data)."""
        if not self._count or not text:
            return text
        return _replaced(text, self.spans(text, short=short))

    def redact_whole(self, text: str) -> str:
        """``text`` as its author wrote it, but for whole occurrences of a long value or its forms."""
        if not self._count or not text:
            return text
        return _replaced(text, self.whole_spans(text))

    def redact_document(self, document: Any) -> Any:
        """A decoded JSON document with every string (keys included) redacted as data: long
        values and their pieces, not short values (see the module docstring).

        The document is changed in place and returned; a document without a known value is
        returned untouched after one scan of its strings.
        """
        if self._anchors is None:
            return document
        strings = list(_strings(document))
        # Environment values cannot hold NUL, so no occurrence straddles two joined strings.
        if not strings or not self.spans("\0".join(strings), short=False):
            return document
        if isinstance(document, str):
            return self.redact(document, short=False)
        stack: list[Any] = [document]
        while stack:
            node = stack.pop()
            if isinstance(node, list):
                for index, item in enumerate(node):
                    if isinstance(item, str):
                        node[index] = self.redact(item, short=False)
                    elif isinstance(item, (list, dict)):
                        stack.append(item)
            elif isinstance(node, dict):
                items = [(self.redact(key, short=False) if isinstance(key, str) else key,
                          (self.redact_whole(value) if key in AUTHORED_MEMBERS else self.redact(value, short=False))
                          if isinstance(value, str) else value)
                         for key, value in node.items()]
                node.clear()
                node.update(items)
                stack.extend(value for _, value in items if isinstance(value, (list, dict)))
        return document


def _merged(found: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``found`` sorted, with overlapping or touching ranges made one."""
    if not found:
        return found
    found.sort()
    merged = [found[0]]
    for start, end in found[1:]:
        last_start, last_end = merged[-1]
        if start <= last_end:
            merged[-1] = (last_start, max(last_end, end))
        else:
            merged.append((start, end))
    return merged


def _replaced(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each of the sorted, disjoint ``spans`` as one :data:`MARKER`."""
    if not spans:
        return text
    parts = []
    last = 0
    for start, end in spans:
        parts += [text[last:start], MARKER]
        last = end
    parts.append(text[last:])
    return "".join(parts)


def _strings(document: Any) -> Iterable[str]:
    """Every string of a decoded JSON document, keys included, without recursion."""
    stack = [document]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            yield node
        elif isinstance(node, dict):
            for key, value in node.items():
                if isinstance(key, str):
                    yield key
                if isinstance(value, str):
                    yield value
                elif isinstance(value, (list, dict)):
                    stack.append(value)
        elif isinstance(node, list):
            for item in node:
                if isinstance(item, str):
                    yield item
                elif isinstance(item, (list, dict)):
                    stack.append(item)


@functools.lru_cache(maxsize=16)
def _compiled(values: frozenset[str]) -> KnownKeys:
    return KnownKeys(values)


def known_keys(env: Mapping[str, str] | None = None, extra: Iterable[str | None] = ()) -> KnownKeys:
    """The credentials set in ``env`` (default: the process environment), plus ``extra``."""
    env = os.environ if env is None else env
    values = {value.strip() for names in CREDENTIAL_VARIABLES.values() for name in names
              if (value := env.get(name)) is not None}
    values.update(value.strip() for value in extra if value is not None)
    values.discard("")
    return _compiled(frozenset(values))


def safe_server_text(text: str, limit: int, extra: Iterable[str | None] = (), *, data: bool = False) -> str:
    """Text a server sent, made fit to show and store: one line of at most ``limit`` characters
    with qmem's keys (and ``extra``) redacted by value and any other credential by shape.
    ``data``: the text is a value qmem keeps (an id), so short keys are left whole in it."""
    from ..secretscan.engine import redact  # here, not at the top: the scanner only when a server's words are kept

    text = known_keys(extra=extra).redact(text[: limit * 4], short=not data)
    return one_line(redact(text), limit)
