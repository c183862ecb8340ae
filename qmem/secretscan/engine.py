"""A precision-oriented scan of text for credentials, and redaction of what it finds.

``qmem_store`` refuses memory text in which :func:`scan` finds something, and
the Hermes importer scans each record's text, mapped metadata and provenance
with :func:`scan_values` before it marks the record ``secret_scan="passed"``.
:func:`redact` replaces each finding with ``[redacted: <family>]``, for text
that came from elsewhere (a server's error detail) and is about to be shown or
stored.

What it promises.  :func:`scan` reports every non-overlapping match of the
families in :mod:`qmem.secretscan.families` as a :class:`Finding` -- a family name and
the offsets of the credential-bearing text -- and never returns, logs or
formats the matched text itself, so a finding is safe to show, store or raise.
Where two findings overlap, the one of the family listed first wins.  It is
pure (no I/O, no global state) and runs in time linear in the length of the
text: every pattern starts at a literal or a bounded boundary, no repetition
in it can match the same text in two ways, and every look around a match is
bounded, so nothing can backtrack quadratically.

What it does not promise.  It is a guard, not a secret detector of record, and
a clean scan is not a proof that the text is safe.  It looks only for the
shapes and forms listed in :mod:`qmem.secretscan.families`, so it misses credentials that are
unknown, encoded, encrypted, novel, short, context-dependent or
deliberately obfuscated (look-alike Unicode, zero-width characters, a key
spelled out in words).  It also rejects some benign strings: documentation
examples, test fixtures and look-alikes are refused along with real
credentials (see :mod:`qmem.secretscan.values` for what passes as a placeholder).
Use upstream secret management and independent scanners where that matters.

A secret split across string literals (``"ghp_ab" + "cd…"``, ``'Pass' . 'w0rd'``, C's and
Python's adjacent literals) is found too: the engine joins each chain of literals and scans the
join with what stands before it on its line; a finding there covers the whole chain.

This module is the engine: it compiles the rules, runs them over the text
(or its lower-cased copy), hands each match to the rule's check and keeps the
spans that overlap nothing found before.  Rules whose matches start with the
same character are searched for together, with one search for the union of
their heads (the short patterns their matches start with): a search costs a
pass over the text, and there are over a hundred rules but only a few dozen
first characters.

Errors: ``TypeError`` for a value that is not a str, and
:class:`~qmem.errors.QmemError` (category ``installation``) if the BIP39 word
list that ships with qmem is missing or damaged, the first time a text needs it.
"""

from __future__ import annotations

import bisect
import codecs
import re
from functools import cached_property

from ..valueclass import dataclass
from .families import RULES, Check, Rule

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["scan", "redact"]


@dataclass(frozen=True)
class Finding:
    """One suspected credential: its family and where it is, never what it is.

    ``text[start:end]`` is the credential-bearing part (see the families in
    :mod:`qmem.secretscan.families` for what that is in each).
    """

    family: str
    start: int
    end: int


@dataclass(frozen=True)
class _CompiledRule:
    family: str
    source: str   # the (verbose) pattern
    check: Check
    folded: bool  # the pattern runs over the lower-cased text
    needle: str   # text every match starts with, if any
    head: str     # a short pattern every match starts with, if any

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        # Compiled where first needed: a rule is tried only where its group's union found its
        # head, so most texts need a few of them, and compiling all of them would cost every
        # process that scans once (CLI stores, flushes) tens of milliseconds.
        return re.compile(self.source, re.VERBOSE)


def _compile(rule: Rule) -> _CompiledRule:
    needle = _leading_literal(rule.pattern) if rule.needle is None else rule.needle
    head = _head(rule.pattern) if rule.head is None else rule.head
    return _CompiledRule(rule.family, rule.pattern, rule.check, rule.folded, needle, head)


def _head(pattern: str) -> str:
    """The (verbose) pattern up to its first named group outside any other
    group -- where a token's variable part starts -- or the whole pattern."""
    depth = 0
    in_class = False
    at = 0
    while at < len(pattern):
        char = pattern[at]
        if char == "\\":
            at += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            at += 1 + pattern.startswith("^", at + 1)
            at += pattern.startswith("]", at)  # a "]" first in a class is a member
            continue
        elif char == "(":
            if depth == 0 and pattern.startswith("(?P<", at):
                return pattern[:at]
            depth += 1
        elif char == ")":
            depth -= 1
        at += 1
    return pattern


def _leading_literal(pattern: str) -> str:
    """The literal text a (verbose) pattern starts with, for a quick look."""
    literal = []
    at = 0
    while at < len(pattern):
        char = pattern[at]
        if char == "\\" and pattern[at + 1:at + 2] in (".", "-", "/", "$"):
            literal.append(pattern[at + 1])
            at += 2
            continue
        if char in "[](){}?*+|^$\\ \t\n#.":
            break
        literal.append(char)
        at += 1
    if literal and pattern[at:at + 1] in ("?", "*", "{"):
        literal.pop()  # the last character is optional or repeated
    return "".join(literal)


@dataclass(frozen=True)
class _Group:
    """Rules whose matches all start with the same character, over the same
    copy of the text.  One search for the union of their heads (the short
    patterns every match of each starts with) finds every place where one of
    them may match, and each rule is tried there alone: a search costs a pass
    over the text, and one pass per first character instead of one per rule is
    most of the scan's speed.  The union is of heads, not of whole patterns,
    so that a search never reads far: a whole pattern could match again inside
    its own last match (a URL inside a URL), and searching for it from every
    place in there would take time quadratic in its length."""

    union_source: str         # the union of the members' heads, compiled where first needed
    members: tuple[int, ...]  # positions in _RULES
    folded: bool
    start: str                # the character every match starts with
    by_start: dict[str, tuple[int, ...]]  # the members a match may be of, by its first two characters

    @cached_property
    def union(self) -> re.Pattern[str]:
        # Compiled where first needed, like the rules: most groups of the endings beyond
        # Latin-1 never meet their character, and compiling them all would cost every process.
        return re.compile(self.union_source, re.VERBOSE)


_NAMED_GROUP = re.compile(r"\(\?P<[A-Za-z_][A-Za-z0-9_]*>")


def _union(rules: list[_CompiledRule]) -> str:
    # The union only finds where to look, so its groups need no names (and
    # two heads may name theirs alike); each rule's own match is taken again.
    return "|".join(f"(?:{_NAMED_GROUP.sub('(?:', rule.head)}\n)" for rule in rules)


# Most specific first: that order settles overlapping findings.
_RULES = tuple(_compile(rule) for rule in RULES)


def _plan(rules: tuple[_CompiledRule, ...]) -> tuple[tuple[_Group, ...], tuple[int, ...]]:
    """The rules that start with a literal, grouped by its first character
    and the copy of the text they read; the positions of the others."""
    by_start: dict[tuple[bool, str], list[int]] = {}
    alone = []
    for number, rule in enumerate(rules):
        if rule.needle and rule.head:
            by_start.setdefault((rule.folded, rule.needle[0]), []).append(number)
        else:
            alone.append(number)
    groups = tuple(_Group(_union([rules[n] for n in members]), tuple(members), folded, start,
                          _by_start([rules[n] for n in members], members))
                   for (folded, start), members in by_start.items())
    return groups, tuple(alone)


def _by_start(rules: list[_CompiledRule], members: list[int]) -> dict[str, tuple[int, ...]]:
    """For each first two characters of a member's needle, the members whose
    needle may start so (one of one character starts anyhow), in order."""
    starts = {rule.needle[:2] for rule in rules if len(rule.needle) >= 2}
    return {start: tuple(n for rule, n in zip(rules, members) if rule.needle[:2] in (start, start[:len(rule.needle)]))
            for start in starts}


_GROUPS, _ALONE = _plan(_RULES)

_SHORT = 65536

FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(rule.family for rule in _RULES))
"""Every family name :func:`scan` can report, most specific first."""


# The lower-cased copy is one byte a character: Latin-1, with every character
# beyond it replaced ("?", or " " for white space, so that "\s" still finds
# it).  str.lower on a text holding one emoji is several times slower, and the
# folded rules name no character beyond Latin-1 (the Russian ending runs over
# the text itself).  Checks read the text, never the copy.
_NOT_SPACE = re.compile(r"\S")
_SPACE = re.compile(r"\s")
_NARROW = "qmem.secretscan.engine.narrow"
_LOWER = bytes(ord(chr(c).lower()) for c in range(256))  # Latin-1 lower-cases within Latin-1


# Full-width separators (密码：…, ＝) read as theirs in the copy, so the folded rules see them.
_FULL_WIDTH = {"\uff1a": ":", "\uff1d": "=", "\uff02": '"', "\uff07": "'"}


def _narrow(error: UnicodeError) -> tuple[str, int]:
    """Encoding error handler: each character beyond Latin-1 becomes "?" (" " if white space)."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    return "".join(_FULL_WIDTH.get(c) or (" " if c.isspace() else "?")
                   for c in error.object[error.start:error.end]), error.end


codecs.register_error(_NARROW, _narrow)


def _fold(text: str) -> str:
    """A lower-cased copy of *text* with the same offsets (see above)."""
    if text.isascii():
        return text.lower()
    return text.encode("latin-1", _NARROW).translate(_LOWER).decode("latin-1")


def scan(text: str) -> list[Finding]:
    """Return the suspected credentials in *text*, ordered by position.

    Findings never overlap; where two families match the same text, the more
    specific one is reported.  Raises ``TypeError`` if *text* is not a str.
    """
    if not isinstance(text, str):
        raise TypeError(f"scan() needs a str, not {type(text).__qualname__}")
    folded = _fold(text)
    short = len(text) <= _SHORT
    spans: dict[int, list[tuple[int, int]]] = {}  # by position in _RULES, for the rules that found any
    for group in _GROUPS:
        source = folded if group.folded else text
        # Looking for a character is far cheaper than a search (most groups of the
        # endings beyond Latin-1 find none in a text).
        if (short or not group.start.isascii()) and group.start not in source:
            continue
        hit = group.union.search(source)
        if hit is not None:
            _run_group(group, hit, text, source, spans)
    for number in _ALONE:
        rule = _RULES[number]
        found = [span for match in rule.pattern.finditer(folded if rule.folded else text)
                 for span in rule.check(text, match)]
        if found:
            spans[number] = found
    findings = _disjoint(spans)
    split = _split_literals(text)
    return _merge(findings, split) if split else findings


# A secret split across string literals ("ghp_ab" + "cd…", 'Pass' . 'w0rd', "a" "b" in C and
# Python, a line continuation between two): where one literal ends and the next begins.
_JOIN_POINT = re.compile(r"""["'`](?<![\n"'`]["'`])[ \t]*(?:(?:\+\+?|\.\.?|\\)[ \t]*)?(?:\r?\n[ \t]*)?["'`](?![\n"'`])""")
_PIECE = re.compile(r"""(["'`])([^"'`\s\\]{1,256})\1""")  # a secret's piece holds no white space
_JOIN = re.compile(r"""[ \t]*(?:(?:\+\+?|\.\.?|\\)[ \t]*)?(?:\r?\n[ \t]*)?(?=["'`])""")
_MOST_PIECES = 16


def _split_literals(text: str) -> list[Finding]:
    """Findings over chains of two or more string literals joined by ``+``, ``.``, ``..``,
    ``++``, a line continuation or nothing: the literals are joined, the join is scanned
    with what stands before the chain on its line (so that ``password = "Xk9" + "…"`` is an
    assignment), and a finding in the joined value covers the whole chain.  Each chain is
    read once and its pieces are bounded, so this adds time linear in the text."""
    found: list[Finding] = []
    at = 0
    while True:
        point = _JOIN_POINT.search(text, at)
        if point is None:
            return found
        close = point.start()
        open_ = text.rfind(text[close], max(0, close - 257), close)
        if open_ == -1 or "\n" in text[open_:close] or close - open_ < 2:
            at = close + 1
            continue
        pieces, end, next_at = [], close + 1, open_
        while len(pieces) < _MOST_PIECES:
            piece = _PIECE.match(text, next_at)
            if piece is None:
                break
            pieces.append(piece.group(2))
            end = piece.end()
            join = _JOIN.match(text, end)
            if join is None:
                break
            next_at = join.end()
        at = max(end, close + 1)
        joined = "".join(pieces)
        if len(pieces) < 2 or len(joined) < 8 or (joined.isalpha() and (joined.islower() or joined.isupper())):
            continue  # too short, or a word
        line_start = text.rfind("\n", max(0, open_ - 64), open_) + 1
        prefix = text[max(line_start, open_ - 64):open_]
        quoted = f'{prefix}"{joined}"'
        for finding in scan(quoted):
            if finding.end > len(prefix):  # in the joined value, not only in what precedes it
                found.append(Finding(finding.family, open_, end))
                break


def _merge(findings: list[Finding], more: list[Finding]) -> list[Finding]:
    """*findings* and those of *more* that overlap none of them, ordered by position."""
    starts = [finding.start for finding in findings]
    kept = list(findings)
    for extra in more:
        at = bisect.bisect_left(starts, extra.start)
        if (at and findings[at - 1].end > extra.start) or (at < len(findings) and findings[at].start < extra.end):
            continue
        kept.append(extra)
    return sorted(kept, key=lambda finding: finding.start)


def _run_group(group: _Group, hit: re.Match[str] | None, text: str, source: str,
               spans: dict[int, list[tuple[int, int]]]) -> None:
    """Find, with searches of the *group*'s union from its first *hit* on,
    the matches of each of its members that ``finditer`` would find, and
    check them."""
    resume = dict.fromkeys(group.members, 0)  # where each rule's next match may start
    while hit is not None:
        start = hit.start()
        for number in group.by_start.get(source[start:start + 2], group.members):
            rule = _RULES[number]
            if start < resume[number] or not source.startswith(rule.needle, start):
                continue
            match = rule.pattern.match(source, start)
            if match is not None:
                found = rule.check(text, match)
                if found:
                    spans.setdefault(number, []).extend(found)
                resume[number] = max(match.end(), start + 1)
        hit = group.union.search(source, start + 1)


def _disjoint(spans: dict[int, list[tuple[int, int]]]) -> list[Finding]:
    """The findings: each rule's spans, in the table's order, that overlap
    nothing taken before them (nor each other), ordered by position."""
    starts: list[int] = []  # of the spans taken, sorted; they never overlap
    ends: list[int] = []
    families: list[str] = []
    for number in sorted(spans):
        family = _RULES[number].family
        for start, end in sorted(spans[number]):
            at = bisect.bisect_right(starts, start)
            if (at and ends[at - 1] > start) or (at < len(starts) and starts[at] < end):
                continue
            starts.insert(at, start)
            ends.insert(at, end)
            families.insert(at, family)
    return [Finding(family, start, end) for family, start, end in zip(families, starts, ends)]


def scan_values(values: Iterable[str]) -> list[tuple[int, Finding]]:
    """Scan each string separately; return ``(index, finding)`` pairs.

    Each value is scanned on its own, so a match can neither straddle two
    values nor be hidden by what precedes it; offsets are within the value at
    *index*.  Raises ``TypeError`` for a value that is not a str.
    """
    return [(index, finding)
            for index, value in enumerate(values)
            for finding in scan(value)]


def describe(findings: Iterable[Finding]) -> str:
    """Return a one-line message naming the families found, never the text.

    Raises ``ValueError`` when *findings* is empty: there is nothing to say.
    """
    families = list(dict.fromkeys(finding.family for finding in findings))
    if not families:
        raise ValueError("describe() needs at least one finding")
    return (f"text looks like it contains a credential ({', '.join(families)}); "
            "remove it and store a reference instead")


def redact(text: str) -> str:
    """Return *text* with each finding of :func:`scan` replaced by
    ``[redacted: <family>]``; text without findings is returned unchanged.

    For text that came from elsewhere (a server's error detail, a config key
    name) and is about to be shown or stored.  Raises ``TypeError`` if *text*
    is not a str.
    """
    findings = scan(text)
    if not findings:
        return text
    parts = []
    last = 0
    for finding in findings:
        parts += [text[last:finding.start], f"[redacted: {finding.family}]"]
        last = finding.end
    parts.append(text[last:])
    return "".join(parts)
