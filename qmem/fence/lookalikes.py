"""Which characters the ``<memory-context>`` fence treats as invisible, as a line break, as an
angle bracket, or as a letter of the words it guards (data and two small pure functions).

* :data:`INVISIBLE` — every Default_Ignorable_Code_Point of Unicode 15.1
  (DerivedCoreProperties.txt: U+00AD, U+034F, U+061C, U+115F–U+1160, U+17B4–U+17B5,
  U+180B–U+180F, U+200B–U+200F, U+202A–U+202E, U+2060–U+206F, U+3164, U+FE00–U+FE0F, U+FEFF,
  U+FFA0, U+FFF0–U+FFF8, U+1BCA0–U+1BCA3, U+1D173–U+1D17A, U+E0000–U+E0FFF) plus the format
  characters (category Cf) that property leaves out (Arabic number signs, interlinear
  annotation, Egyptian hieroglyph format controls).  All bidi controls are in it.
* :data:`LINE_BREAKS` — what ``str.splitlines`` splits on.
* :data:`LESS_THAN` / :data:`GREATER_THAN` — look-alikes of ``<`` and ``>`` that NFKC does not
  fold: the confusables.txt entries (‹ › ˂ ˃ ᐸ ᐳ ᚲ ❮ ❯ 𝈶 𝈷 𖼿) and the angle brackets and
  ornaments (⟨ ⟩ 〈 〉 《 》 ⟪ ⟫ ❬ ❭ ❰ ❱ ⧼ ⧽ ⦉ ⦊ ⦑ ⦒ ⦓ ⦔ ⦕ ⦖ ˱ ˲ ᑉ ⋖ ⋗).  « » are left alone:
  they are ordinary French and German quotation marks, and the fence never relies on brackets.
* :data:`OPEN_BRACKETS` / :data:`CLOSE_BRACKETS` — categories Ps and Pe (after NFKC).
* :func:`letter_class` — a letter, its case partner, its single-character confusables
  (Unicode confusables.txt: Cyrillic, Greek, Armenian, Cherokee, Lisu, Coptic… and ``0`` for
  ``o``, ``1``/``I``/``|`` for ``l``) and every precomposed Latin, Greek or Cyrillic letter
  whose base is one of those, and every letter Unicode *names* as that Latin letter in another
  form — small capitals (``ᴍ`` U+1D0D, ``ɴ``, ``ᴇ``), letters with a hook, stroke or tail
  (``ɱ``), modifier, subscript and combining letters, circled, squared and regional-indicator letters —
  as a regular-expression class body.  Multi-character look-alikes (``rn`` for ``m``)
  are out of scope; turned, reversed and inverted letters are not the letter.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

__all__ = []

INVISIBLE: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD),
    (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFFB), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)

LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"

LESS_THAN = ("\u2039\u02c2\u1438\u16b2\u276e\U0001d236\u27e8\u3008\u300a\u27ea\u276c\u2770\u29fc"
             "\u2989\u2991\u2993\u2995\u02f1\u1449\u22d6")
GREATER_THAN = ("\u203a\u02c3\u1433\u276f\U0001d237\U00016f3f\u27e9\u3009\u300b\u27eb\u276d\u2771"
                "\u29fd\u298a\u2992\u2994\u2996\u02f2\u22d7")

# Categories Ps and Pe as NFKC leaves them (the full-width and small forms fold to ASCII).
OPEN_BRACKETS = ("([{\u0f3a\u0f3c\u169b\u201a\u201e\u2045\u2308\u230a\u2768\u276a\u276c"
                 "\u276e\u2770\u2772\u2774\u27c5\u27e6\u27e8\u27ea\u27ec\u27ee\u2983\u2985\u2987\u2989"
                 "\u298b\u298d\u298f\u2991\u2993\u2995\u2997\u29d8\u29da\u29fc\u2e22\u2e24\u2e26\u2e28"
                 "\u2e42\u2e55\u2e57\u2e59\u2e5b\u3008\u300a\u300c\u300e\u3010\u3014\u3016\u3018\u301a"
                 "\u301d\ufd3f")
CLOSE_BRACKETS = (")]}\u0f3b\u0f3d\u169c\u2046\u2309\u230b\u2769\u276b\u276d\u276f"
                  "\u2771\u2773\u2775\u27c6\u27e7\u27e9\u27eb\u27ed\u27ef\u2984\u2986\u2988\u298a\u298c"
                  "\u298e\u2990\u2992\u2994\u2996\u2998\u29d9\u29db\u29fd\u2e23\u2e25\u2e27\u2e29\u2e56"
                  "\u2e58\u2e5a\u2e5c\u3009\u300b\u300d\u300f\u3011\u3015\u3017\u3019\u301b\u301e\u301f"
                  "\ufd3e")

# "=" and its confusables that NFKC does not fold (CANADIAN SYLLABICS HYPHEN, DOUBLE HYPHEN,
# KATAKANA-HIRAGANA DOUBLE HYPHEN, LISU PUNCTUATION FULL STOP).
EQUALS = "=\u1400\u2e40\u30a0\ua4ff"

# The combining-mark blocks a look-alike letter may carry (matched between letters).
COMBINING_MARKS = "\u0300-\u036f\u0483-\u0489\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"

# Single-character confusables (confusables.txt), both cases, that NFKC leaves as they are.
_CONFUSABLES = {
    "a": "\u0251\u0391\u03b1\u0410\u0430\u13aa\u15c5\u237a\ua4ee\U000102a0\U00016f40",
    "c": "\u0421\u0441\u13df\u1d04\u2ca4\u2ca5\ua4da\uabaf\U000102a2\U00010302\U00010415"
         "\U0001043d\U0001051c\U000118e9\U000118f2\U0001f74c",
    "d": "\u0501\u13a0\u13e7\u146f\u15de\u15ea\ua4d2\ua4d3",
    "e": "\u0395\u0415\u0435\u04bd\u13ac\u212e\u22ff\u2d39\ua4f0\uab32\U00010286\U000118a6\U000118ae",
    "i": "l\u0131\u0269\u026a\u03b9\u0456\u04cf\u13a5\u2373\ua647\uab75\U000118c3",
    "l": "1I|\u0196\u01c0\u0399\u0406\u04c0\u06f1\u13de\u14aa\u16c1\u2223\u23fd\u2c92\u2cd0\u2d4f\ua4e1"
         "\ua4f2\U0001028a\U00010309\U00010320\U0001041b\U00010526\U000118a3\U000118b2\U00016f16"
         "\U00016f28\U0001d22a",
    "m": "\u039c\u03fa\u041c\u043c\u13b7\u15f0\u16d6\u2c98\ua4df\U000102b0\U00010311",
    "n": "\u039d\u0578\u057c\u2c9a\ua4e0\U00010513",
    "o": "0\u039f\u03bf\u03c3\u041e\u043e\u0555\u0585\u06f5\u0966\u09e6\u0a66\u0ae6\u0b20\u0b66\u0be6"
         "\u0c02\u0c66\u0c82\u0ce6\u0d02\u0d20\u0d66\u0d82\u0e50\u0ed0\u101d\u1040\u10ff\u12d0\u1d0f"
         "\u1d11\u2c9e\u2c9f\u2d54\u3007\ua4f3\uab3d\U00010292\U000102ab\U00010404\U0001042c\U000104c2"
         "\U000104ea\U00010516\U000114d0\U000118b5\U000118c8\U000118d7\U000118e0",
    "r": "\u01a6\u0433\u13a1\u13d2\u1587\u1d26\u2c85\ua4e3\uab47\uab48\uab81\U000104b4\U00016f35"
         "\U0001d216",
    "s": "\u01bd\u0405\u0455\u054f\u13d5\u13da\ua4e2\ua731\uabaa\U00010296\U00010420\U00010448"
         "\U000118c1\U00016f3a",
    "t": "\u03a4\u0442\u0422\u13a2\u1d1b\u22a4\u27d9\u2ca6\ua4d4\U00010297\U000102b1\U00010315"
         "\U000118bc\U00016f0a\U0001f768",
    "u": "\u028b\u03c5\u054d\u057d\u1200\u144c\u1d1c\u222a\u22c3\ua4f4\ua79f\uab4e\uab52\U000104ce"
         "\U000104f6\U000118b8\U000118d8\U00016f42",
    "x": "\u00d7\u03a7\u0425\u0445\u04b3\u1541\u157d\u166d\u166e\u16b7\u2573\u292b\u292c\u2a2f\u2cac"
         "\u2d5d\ua4eb\ua7b3\U00010290\U000102b4\U00010317\U00010322\U00010527\U000118ec",
    "y": "\u0263\u028f\u03a5\u03b3\u0423\u0443\u04ae\u04af\u10e7\u13a9\u13bd\u1d8c\u1eff"
         "\u2ca8\ua4ec\uab5a\U000102b2\U000118a4\U000118dc\U00016f43",
}

# Where precomposed letters with diacritics live: Latin-1, Latin Extended-A/B, Greek, Cyrillic,
# Latin Extended Additional, Greek Extended.
_PRECOMPOSED_BLOCKS = ((0x00C0, 0x024F), (0x0370, 0x04FF), (0x1E00, 0x1FFF))


# Where letters named as a Latin letter in another form live: Latin-1 to Cyrillic, phonetic
# extensions (small capitals) and combining supplements, Latin Extended Additional, super- and subscripts, letterlike
# symbols and number forms, enclosed alphanumerics, Latin Extended-C/D/E, half- and full-width
# forms, Latin Extended-F/G, enclosed alphanumeric supplement (squared, regional indicators).
_NAMED_BLOCKS = ((0x0080, 0x052F), (0x1D00, 0x1DFF), (0x1E00, 0x1EFF), (0x2070, 0x209F), (0x2100, 0x218F),
                 (0x2460, 0x24FF), (0x2C60, 0x2C7F), (0xA720, 0xA7FF), (0xAB30, 0xAB6F), (0xFF00, 0xFFEF),
                 (0x10780, 0x107BF), (0x1DF00, 0x1DFFF), (0x1F100, 0x1F1FF))
_LETTER_NAME = re.compile(
    r"(?:(?:COMBINING )?LATIN (?:CAPITAL |SMALL )?LETTER (?:SMALL CAPITAL )?|LATIN SUBSCRIPT SMALL LETTER "
    r"|MODIFIER LETTER (?:CAPITAL |SMALL )(?:CAPITAL )?|(?:NEGATIVE )?(?:CIRCLED|SQUARED) LATIN "
    r"(?:CAPITAL |SMALL )LETTER |REGIONAL INDICATOR SYMBOL LETTER |FULLWIDTH LATIN (?:CAPITAL |SMALL )LETTER )"
    r"([A-Z])(?: WITH [A-Z -]+)?")


@lru_cache(maxsize=None)
def _named() -> dict[str, str]:
    """ASCII letter -> the characters Unicode names as that letter in another form (one pass)."""
    found: dict[str, str] = {}
    for lo, hi in _NAMED_BLOCKS:
        for code in range(lo, hi + 1):
            match = _LETTER_NAME.fullmatch(unicodedata.name(chr(code), ""))
            if match and len(unicodedata.normalize("NFKC", chr(code))) == 1:  # not ǋ (Nj): one letter
                letter = match.group(1).lower()
                found[letter] = found.get(letter, "") + chr(code)
    return found


def _escape(ch: str) -> str:
    return "\\" + ch if ch in "\\]^-[" else ch


def ranges_class(ranges: tuple[tuple[int, int], ...]) -> str:
    """``ranges`` (inclusive code-point pairs) as a regular-expression class body."""
    return "".join(chr(lo) if lo == hi else f"{chr(lo)}-{chr(hi)}" for lo, hi in ranges)


@lru_cache(maxsize=None)
def _precomposed() -> dict[str, str]:
    """Base character -> the precomposed letters built on it (one pass over the blocks)."""
    found: dict[str, str] = {}
    for lo, hi in _PRECOMPOSED_BLOCKS:
        for code in range(lo, hi + 1):
            decomposed = unicodedata.normalize("NFD", chr(code))
            if len(decomposed) > 1:
                found[decomposed[0]] = found.get(decomposed[0], "") + chr(code)
    return found


@lru_cache(maxsize=None)
def letter_class(letter: str) -> str:
    """The class body of everything the fence reads as ASCII ``letter`` (match it with IGNORECASE)."""
    bases = {letter, letter.upper(), *_CONFUSABLES.get(letter, ""), *_named().get(letter, "")}
    members = set(bases)
    for base in bases:
        members.update(_precomposed().get(base, ""))
    return "".join(_escape(ch) for ch in sorted(members))
