"""Whether a run of words is a BIP39 seed phrase: the check behind the ``seed-phrase`` family.

A seed phrase (BIP-0039) is 12, 15, 18, 21 or 24 words from a list of 2048,
whose last bits are a checksum of the others: the first ``words * 11 * 32 / 33``
bits, as bytes, hashed with SHA-256, give the last ``words / 3`` bits.  This
module finds such phrases where :mod:`qmem.secretscan.families` has found a stretch of
text that could hold one, and reports each phrase from its first word to its
last.  The checksum is what makes it precise: an ordinary list of words from
the BIP39 list -- or twelve of them chosen to look like a phrase -- passes by
chance once in 16 for 12 words and once in 256 for 24, and a list in
alphabetical order (an excerpt of the word list) never counts.

What counts as one phrase.  Words are separated by white space, commas,
quotes or brackets (a JSON array of words is a phrase), or by the numbers of a
numbered list (``1. word`` ``2) word``); any other character between two words
(``.`` ``:`` ``=`` ``-`` …) or a word not on the list ends the run.  A run
that is not itself a phrase is read again without some of the words of prose
that often frame a phrase at its ends (``seed phrase``, ``please keep``, at
most four at each end), and a run whose words are quoted in several strings is
read string by string.
Nothing else is tried: a run is never searched for a phrase at every offset,
because a longer list of words would then hold a valid one by chance.

Placeholders, as for every family (:mod:`qmem.secretscan.values`): a phrase that
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
import itertools
import re
from pathlib import Path

from ..errors import QmemError

__all__ = []

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
                      "safe", "never", "share", "write", "paper", "save", "copy", "note", "remember", "test",
                      "example", "sample", "valid", "correct", "exact", "entire", "real", "right", "use", "used",
                      "give", "found", "first", "also", "then", "now", "just", "only", "old", "today", "thank",
                      "okay", "code", "list", "below", "above"})

# Where the rule's stretch holds twelve or more words of three to eight
# letters with nothing but separators between them.  Words and separators
# are disjoint classes, so each piece of text can be read only one way.
_WORDS = re.compile(r"""(?<![A-Za-z])(?:[A-Za-z]{3,8}[ \t\r\n,"'\[\]0-9.):]+){11,}[A-Za-z]{3,8}(?![A-Za-z])""")
_WORD = re.compile(r"[A-Za-z]+")
_WORD_SPLIT = re.compile(r"([a-z]+)")
_SOFT = re.compile(r"""[ \t\r\n,"'\[\]]*(?:[0-9]{1,2}[.):]?[ \t\r\n]+)?""")
_SPACES = frozenset({" ", "\n", ", ", '", "', "', '"})  # the common soft separators, known without a look
_QUOTES = frozenset("\"'")

def seed_phrase(text: str, match: re.Match[str]) -> list[tuple[int, int]]:
    """The check: each seed phrase in the stretch the rule matched, from its
    first word to its last (the stretch is the ``run`` group, or the match)."""
    start, end = match.span("run") if "run" in match.re.groupindex else match.span()
    if start > 0 and "A" <= text[start - 1] <= "Z":
        start -= 1  # the capital of a first word ("Abandon ability …") ended the stretch before it
    # Most stretches are prose or code: twelve words of three to eight letters
    # in a row are rare there, twelve words of the list rarer still, and
    # reading them word by word is what costs; so look for both first.
    stretch = _WORDS.search(text, start, end)
    if stretch is None:
        return []
    found = _WORD.findall(text, stretch.start(), end)
    found[:1] = [word.lower() for word in found[:1]]
    if _TWELVE not in bytes(map(word_index().__contains__, found)):
        return []
    spans = []
    while stretch is not None:
        spans += _phrases(text, stretch.start(), stretch.end())
        stretch = _WORDS.search(text, stretch.end(), end)
    return spans


_TWELVE = b"\x01" * 12


class _Stretch:
    """The words of a stretch that _WORDS found, their numbers on the list
    (None off it), the separator before each and where each piece starts."""

    def __init__(self, text: str, start: int, end: int) -> None:
        # The stretch is ASCII, so lower-casing keeps its offsets.
        pieces = _WORD_SPLIT.split(text[start:end].lower())  # separator, word, …, word, separator
        self.separators = pieces[0:-1:2]
        self.numbers = list(map(word_index().get, pieces[1::2]))
        self.offsets = list(itertools.accumulate(map(len, pieces), initial=start))

    def span(self, first: int, last: int) -> tuple[int, int]:
        """From the start of word *first* to the end of word *last* - 1."""
        return self.offsets[2 * first + 1], self.offsets[2 * last]


def _phrases(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The phrases among the runs of list words between *start* and *end*
    that only soft separators join."""
    stretch = _Stretch(text, start, end)
    numbers, separators = stretch.numbers, stretch.separators
    spans = []
    run = 0  # where the current run starts
    for at in range(len(numbers) + 1):
        if at < len(numbers) and numbers[at] is not None and (at == run or _is_soft(separators[at])):
            continue
        if at - run >= 12:
            spans += _phrase(stretch, run, at)
        run = at if at < len(numbers) and numbers[at] is not None else at + 1
    return spans


def _is_soft(separator: str) -> bool:
    return separator in _SPACES or _SOFT.fullmatch(separator) is not None


def _phrase(stretch: _Stretch, first: int, last: int) -> list[tuple[int, int]]:
    """The span of the phrase that words *first* to *last* - 1 are, read
    whole, without framing words, or string by string; none if they are not one."""
    numbers = stretch.numbers
    for start, end in _framings(numbers, first, last):
        if is_seed_phrase(numbers[start:end]):
            return [stretch.span(start, end)]
    quoted = [at for at in range(first + 1, last) if _QUOTES & set(stretch.separators[at])]
    if quoted and len(quoted) < last - first - 1:
        # Several strings of words: a JSON array of phrases, read one by one.
        return [stretch.span(start, end) for start, end in zip([first] + quoted, quoted + [last])
                if is_seed_phrase(numbers[start:end])]
    return []


def _framings(numbers: list[int], first: int, last: int) -> list[tuple[int, int]]:
    """The run, then the run without some of the framing words at its ends
    (at most four at each end, as a phrase may start or end with one)."""
    listed = words()
    head = first
    while head < min(last, first + 4) and listed[numbers[head]] in _FRAMING:
        head += 1
    tail = last
    while tail > max(head, last - 4) and listed[numbers[tail - 1]] in _FRAMING:
        tail -= 1
    return [(start, end) for start in range(first, head + 1) for end in range(last, tail - 1, -1)
            if end - start in PHRASE_LENGTHS]
