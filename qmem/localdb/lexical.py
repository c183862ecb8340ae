"""From the words a user typed to FTS5 MATCH expressions that cannot be read as syntax.

Pure functions, no I/O.  Promises:

* **Words are data.**  Every word becomes one FTS5 string (``"…"``, with ``"`` doubled),
  inside which nothing is an operator: quotes, ``*``, ``:``, ``^``, ``NEAR``,
  ``AND``/``OR``/``NOT`` and parentheses are matched literally or, being punctuation,
  ignored by the tokenizer.  FTS5 tokenizes each string like the indexed text, so
  ``foo:bar`` is the phrase "foo bar" and ``Visited`` matches ``visit`` when the table
  stems (see :mod:`qmem.localindex`).
* **Glue words are left out.**  A word in :data:`STOPWORDS` (English function words:
  pronouns, articles, auxiliaries, prepositions, conjunctions, question words) is not
  searched for, unless every word of the query is one — then all of them are.
  Negations (``not``, ``no``, ``never``, ``nor``, ``without``, ``n't`` forms) are never
  stopwords: they change what a sentence says.
* **Bounded.**  Control characters are spaces; a chunk with no letter or digit is
  dropped; a word is cut at :data:`MAX_TERM_CHARS`; at most :data:`MAX_QUERY_TERMS`
  distinct words are searched and the rest are counted as dropped.
"""

from __future__ import annotations

from ..valueclass import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["query_terms"]

MAX_QUERY_TERMS = 32
MAX_TERM_CHARS = 64

#: The fixed English stopword list: 176 function words (pronouns, articles and determiners,
#: auxiliaries and modals, conjunctions, prepositions, question words, a few adverbs and the
#: pronoun contractions), lower case with straight apostrophes.  Only words that carry
#: grammar rather than topic, so leaving them out never loses what a question is about.
#: Never in it: negations (not, no, never, nor, neither, none, nothing, without and every
#: ``n't`` form) and words that are often content (``may`` is a month, ``like``, ``get``,
#: ``go``, ``one`` and the numbers are things people search for).
STOPWORDS: frozenset[str] = frozenset("""
a an the this that these those some any each every both all either such same other another own
i me my myself we us our ours ourselves you your yours yourself yourselves he him his himself
she her hers herself it its itself they them their theirs themselves
what which who whom whose when where why how
am is are was were be been being have has had having do does did doing done
will would shall should can could might must
and but or if then than because as so though although while whether until
of at by for with about against between into through during before after above below to from
up down in out on off over under again further once
here there only very too also just ever yet still even really
more most much many few
i'm i've i'll i'd you're you've you'll you'd he's he'd he'll she's she'd she'll it's it'd
we're we've we'll we'd they're they've they'll they'd that's there's here's what's who's
where's when's why's how's let's
""".split())

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\uff07": "'"})


@dataclass(frozen=True)
class QueryTerms:
    """The words of a query: ``terms`` are searched, ``stopwords`` were left out."""

    terms: tuple[str, ...]
    dropped: int  # words beyond MAX_QUERY_TERMS, ignored
    stopwords: tuple[str, ...] = ()


def _key(word: str) -> str:
    """The form a word is compared in: case-folded, straight apostrophes, no edge punctuation."""
    folded = word.casefold().translate(_APOSTROPHES)
    start, end = 0, len(folded)
    while start < end and not folded[start].isalnum():
        start += 1
    while end > start and not folded[end - 1].isalnum():
        end -= 1
    return folded[start:end]


def _strip_possessive(word: str) -> str:
    """``Caroline's`` → ``Caroline``: the owner is what is looked for, not the ``s``."""
    key = word.casefold().translate(_APOSTROPHES).rstrip(".,;:!?)]}\"")
    if len(key) > 2 and key.endswith("'s") and key[-3].isalnum():
        return word[: len(key) - 2]
    return word


def query_terms(query: str) -> QueryTerms:
    """Split a user's query into words to match literally, leaving stopwords out.

    Chunks are whitespace-separated; a chunk without a letter or digit (``*``, ``"``,
    ``--``) is dropped, a trailing possessive ``'s`` is removed, each word is cut at
    :data:`MAX_TERM_CHARS`, and duplicates (compared case-folded, without edge
    punctuation) go.  When every word is a stopword, all of them are searched.
    """
    cleaned = "".join(" " if (ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0) else ch for ch in query)
    content: list[str] = []
    stop: list[str] = []
    seen: set[str] = set()
    for chunk in cleaned.split():
        if not any(ch.isalnum() for ch in chunk):
            continue
        word = chunk[:MAX_TERM_CHARS]
        if _key(word) not in STOPWORDS:  # "let's" is a stopword; "Caroline's" is Caroline
            word = _strip_possessive(word)
        key = _key(word)
        if key in seen:
            continue
        seen.add(key)
        (stop if key in STOPWORDS else content).append(word)
    words = content or stop
    terms = tuple(words[:MAX_QUERY_TERMS])
    return QueryTerms(terms=terms, dropped=len(words) - len(terms), stopwords=tuple(stop) if content else ())


def match_expression(terms: Iterable[str], *, prefix: bool = False, any_term: bool = False) -> str:
    """An FTS5 MATCH expression in which every term is a quoted string.

    Inside an FTS5 string only ``"`` is special (doubled to escape), so no word can be
    read as an operator, a column filter or a parenthesis.  ``prefix`` lets each term
    match as the start of a word; ``any_term`` joins with OR instead of AND.
    """
    star = "*" if prefix else ""
    quoted = ['"' + term.replace('"', '""') + '"' + star for term in terms]
    return (" OR " if any_term else " AND ").join(quoted)
