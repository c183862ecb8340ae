"""How a local ``find`` reads the user's words and ranks what matched them.

Pure: the index runs the full-text queries this module asks for (:meth:`qmem.localindex.LocalIndex.find`).

* **Words are data** (:mod:`qmem.localdb.lexical`): each word is a quoted FTS5 string, so quotes,
  ``*``, ``:``, ``NEAR``, ``AND/OR/NOT``, parentheses and control characters are matched
  literally or dropped and never raise.  English stopwords are left out unless the query has
  nothing else; words match by their Porter stem, accents ignored.
* **All words first.**  Records with every word come first (by bm25), then the answer is
  filled up to ``limit`` with records that have any of the words (by bm25); it is *partial*
  only when no result has every word, and ``more`` says whether results were left out.  Only
  when no record has any word exactly are words tried as prefixes.
* **Bad arguments are input errors**: a query with no word to search for, text that cannot
  be stored (a lone surrogate), an unknown kind or a limit outside 1..:data:`MAX_FIND_LIMIT`
  raise :class:`~qmem.errors.InputError` before any query runs.
"""

from __future__ import annotations

from ..errors import InputError
from ..records import KINDS
from ..valueclass import dataclass
from .lexical import QueryTerms, match_expression, query_terms
from .record import Record, storable_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["MAX_FIND_LIMIT", "FindResult", "find_terms", "ranked"]

MAX_FIND_LIMIT = 1000


@dataclass(frozen=True)
class FindResult:
    """What :meth:`LocalIndex.find` found.

    ``match`` says how the leading records matched: ``all`` (every word), ``all-prefix``
    (every word, as prefixes) or ``any`` (no record had every word: a *partial* answer).
    The first ``complete`` records have every word; the rest have some of them.  ``more``
    is true when more records matched than ``limit`` let through.
    """

    records: tuple[Record, ...]
    terms: tuple[str, ...]
    match: str
    dropped_terms: int = 0
    stopwords: tuple[str, ...] = ()
    complete: int = 0
    more: bool = False

    @property
    def partial(self) -> bool:
        """True when no result has every word."""
        return self.match == "any"

    def to_json(self) -> dict[str, Any]:
        return {
            "match": self.match,
            "partial": self.partial,
            "terms": list(self.terms),
            "stopwords": list(self.stopwords),
            "dropped_terms": self.dropped_terms,
            "complete": self.complete,
            "more": self.more,
            "fallback": "local_sqlite",
            "results": [record.to_json() for record in self.records],
        }


def find_terms(query: Any, *, kind: str | None, limit: Any) -> QueryTerms:
    """The words of ``query`` to search for, once the arguments of a find are known to be good."""
    storable_text(query, "the query")
    if kind is not None and kind not in KINDS:
        raise InputError(f"kind must be one of: {', '.join(KINDS)}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_FIND_LIMIT:
        raise InputError(f"limit must be a whole number from 1 to {MAX_FIND_LIMIT}")
    parsed = query_terms(query)
    if not parsed.terms:
        raise InputError("the query has no words to search for")
    return parsed


if TYPE_CHECKING:
    #: ``search(match expression, at most n) -> rows``, each row with an ``"id"``, best first.
    Search = Callable[[str, int], list[Any]]


def ranked(search: Search, terms: tuple[str, ...], limit: int) -> tuple[list[Any], str, int]:
    """Rows in answer order (up to ``limit + 1``), how they matched, and how many have every word.

    Every word first, then any word to fill up to the limit, each by bm25.  Words are
    tried as prefixes (``config`` → ``configuration``) only when no record has any of
    them as a word: a prefix query costs FTS5 about twice as much, and a stem already
    covers the other forms of a word.
    """
    want = limit + 1  # one more than is shown says whether there is more
    for prefix in (False, True):
        rows = search(match_expression(terms, prefix=prefix), want)
        complete = len(rows)
        if len(rows) < want and len(terms) > 1:
            seen = {row["id"] for row in rows}
            extra = search(match_expression(terms, prefix=prefix, any_term=True), want + len(rows))
            rows += [row for row in extra if row["id"] not in seen][:want - len(rows)]
        if rows:
            match = ("all-prefix" if prefix else "all") if complete else "any"
            return rows, match, complete
    return [], "all", 0
