"""Whether a run of words is a BIP39 seed phrase: the check behind the ``seed-phrase`` family.

A seed phrase (BIP-0039) is 12, 15, 18, 21 or 24 words from a list of 2048,
whose last bits are a checksum of the others: the first ``words * 11 * 32 / 33``
bits, as bytes, hashed with SHA-256, give the last ``words / 3`` bits.  This
module finds such phrases where :mod:`qmem.secretrules` has found a stretch of
text that could hold one, and reports each phrase from its first word to its
last.  The checksum is what makes it precise: an ordinary list of words from
the BIP39 list -- or twelve of them chosen to look like a phrase -- passes by
chance once in 16 for 12 words and once in 256 for 24, and a list in
alphabetical order (an excerpt of the word list) never counts.

What counts as one phrase.  Words are separated by white space, commas,
quotes or brackets (a JSON array of words is a phrase), or by the numbers of a
numbered list (``1. word`` ``2) word``); any other character between two words
(``.`` ``:`` ``=`` ``-`` …) or a word not on the list ends the run.  A run
that is not itself a phrase is read again without the words of prose that
often frame a phrase at its ends (``seed phrase``, ``please keep``, …), and
a run whose words are quoted in several strings is read string by string.
Nothing else is tried: a run is never searched for a phrase at every offset,
because a longer list of words would then hold a valid one by chance.

Placeholders, as for every family (:mod:`qmem.secretvalues`): a phrase that
repeats one word but for its checksum word (``abandon abandon … about``,
Hardhat's ``test test … junk``) or whose entropy is one byte repeated (the
test vectors ``legal winner thank year …``, ``letter advice cage …``) is an
example, not a wallet.

Cost.  The check reads only the stretch the rule found, once, plus a few
bounded regular-expression passes with no repetition that can match the same
text in two ways; each run costs at most a handful of checksums.  So it adds
time linear in the length of the text.

The word list ships beside this module as ``bip39-english.txt``, unchanged
(SHA-256 ``2f5eed53…24dbda``, the hash the BIP publishes), with its licence
notice in ``bip39-english.LICENSE.txt``.  It is read on first use; a missing
or damaged list raises :class:`~qmem.errors.QmemError` (category
``installation``) rather than letting phrases pass unseen.
"""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

from .errors import QmemError

__all__ = ["WORD_LIST", "PHRASE_LENGTHS", "words", "word_index", "is_seed_phrase", "seed_phrase"]

WORD_LIST = Path(__file__).with_name("bip39-english.txt")
WORD_LIST_SHA256 = "2f5eed53a4727b4bf8880d8f3f199efc90e58503646d9ff8eff3a2ed3b24dbda"
PHRASE_LENGTHS = frozenset({12, 15, 18, 21, 24})


@functools.lru_cache(maxsize=1)
def words() -> tuple[str, ...]:
    """The BIP39 English list: 2048 words, in order."""
    try:
        data = WORD_LIST.read_bytes()
    except OSError as error:
        raise QmemError("qmem's BIP39 word list is missing; reinstall qmem",
                        category="installation") from error
    if hashlib.sha256(data).hexdigest() != WORD_LIST_SHA256:
        raise QmemError("qmem's BIP39 word list is damaged; reinstall qmem", category="installation")
    return tuple(data.decode("ascii").split())


@functools.lru_cache(maxsize=1)
def word_index() -> dict[str, int]:
    """Each word of the BIP39 English list and its number (0 to 2047)."""
    return {word: number for number, word in enumerate(words())}


def is_seed_phrase(numbers: list[int]) -> bool:
    """Whether the word *numbers* make a seed phrase: a length BIP39 allows,
    a valid checksum, words not in list order, entropy not one byte repeated."""
    count = len(numbers)
    if count not in PHRASE_LENGTHS or numbers == sorted(numbers) or len(set(numbers[:-1])) == 1:
        return False  # not a phrase; a word list; one word repeated (Hardhat's "test test … junk")
    value = 0
    for number in numbers:
        value = (value << 11) | number
    checksum_bits = count // 3
    entropy = (value >> checksum_bits).to_bytes((count * 11 - checksum_bits) // 8, "big")
    if len(set(entropy)) == 1:
        return False  # a documented example: all zeros, all ones, 0x7f or 0x80 repeated
    expected = hashlib.sha256(entropy).digest()[0] >> (8 - checksum_bits)
    return value & ((1 << checksum_bits) - 1) == expected


# Words of prose that often stand right before or after a phrase and are
# themselves on the list ("my seed phrase", "please keep it safe").
_FRAMING = frozenset({"seed", "phrase", "word", "key", "secret", "private", "this", "that", "please", "keep",
                      "safe", "never", "share", "write", "paper", "save", "copy", "test", "example", "valid",
                      "use", "also", "then", "now", "just", "only", "old", "code", "list", "below", "above"})

# Where the rule's stretch holds twelve or more words of three to eight
# letters with nothing but separators between them.  Words and separators
# are disjoint classes, so each piece of text can be read only one way.
_WORDS = re.compile(r"""(?<![A-Za-z])(?:[A-Za-z]{3,8}[ \t\r\n,"'\[\]0-9.):]+){11,}[A-Za-z]{3,8}(?![A-Za-z])""")
_WORD = re.compile(r"[A-Za-z]+")
_SOFT = re.compile(r"""[ \t\r\n,"'\[\]]*(?:[0-9]{1,2}[.):]?[ \t\r\n]+)?""")
_QUOTES = frozenset("\"'")

# (number on the list, start, end, separator before it)
_Word = tuple[int, int, int, str]


def seed_phrase(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """The check: each seed phrase in the stretch the rule matched, from its
    first word to its last (the stretch is the ``run`` group, or the match)."""
    start, end = match.span("run") if "run" in match.re.groupindex else match.span()
    if start > 0 and "A" <= text[start - 1] <= "Z":
        start -= 1  # the capital of a first word ("Abandon ability …") ended the stretch before it
    spans = []
    for stretch in _WORDS.finditer(text, start, end):
        for run in _runs(text, stretch.start(), stretch.end()):
            spans += _phrase(run)
    return spans


def _runs(text: str, start: int, end: int) -> list[list[_Word]]:
    """The runs of words on the list between *start* and *end*, joined only by
    soft separators."""
    index = word_index()
    runs: list[list[_Word]] = []
    run: list[_Word] = []
    last_end = start
    for word in _WORD.finditer(text, start, end):
        separator = text[last_end:word.start()]
        last_end = word.end()
        number = index.get(word.group().lower())
        if number is None or (run and _SOFT.fullmatch(separator) is None):
            if len(run) >= 12:
                runs.append(run)
            run = []
        if number is not None:
            run.append((number, word.start(), word.end(), separator))
    if len(run) >= 12:
        runs.append(run)
    return runs


def _phrase(run: list[_Word]) -> list[tuple[int, int]]:
    """The span of the phrase a run is, read whole, without its framing
    words, or string by string; none if it is not one."""
    for candidate in _framings(run):
        if is_seed_phrase([number for number, *_ in candidate]):
            return [(candidate[0][1], candidate[-1][2])]
    quoted = [i for i, (*_, separator) in enumerate(run) if i and _QUOTES & set(separator)]
    if quoted and len(quoted) < len(run) - 1:
        # Several strings of words: a JSON array of phrases, read one by one.
        spans = []
        for piece_start, piece_end in zip([0] + quoted, quoted + [len(run)]):
            piece = run[piece_start:piece_end]
            if is_seed_phrase([number for number, *_ in piece]):
                spans.append((piece[0][1], piece[-1][2]))
        return spans
    return []


def _framings(run: list[_Word]) -> list[list[_Word]]:
    """The run, then without the framing words at its start, its end, both."""
    listed = words()
    framing = [listed[number] in _FRAMING for number, *_ in run]
    head = 0
    while head < len(run) and framing[head]:
        head += 1
    tail = len(run)
    while tail > head and framing[tail - 1]:
        tail -= 1
    return [run, run[head:], run[:tail], run[head:tail]]
