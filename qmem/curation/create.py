"""``init``: the destination collection the ``recall`` section describes, created once and never altered.

:func:`run_init` creates the collection (dimension, distance, vector name) and the
keyword indexes of DESIGN §7 (:data:`INDEXED_FIELDS`) when it does not exist; one that
matches is left alone, and one that differs in any way, a missing index included, is
reported by :func:`layout_problems` and left untouched (:class:`InitMismatch`, exit 1).
``status`` and ``import-hermes`` hold the destination to the same :func:`layout_problems`.
"""

from __future__ import annotations

from ..config import RecallConfig
from ..errors import QmemError
from .context import AdminContext
from .qdrant import AdminQdrantError, CollectionLayout
from .render import render_init

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["InitMismatch", "run_init"]

#: The keyword indexes ``init`` creates (DESIGN §7): what the recall filters match on.
INDEXED_FIELDS = ("host", "status", "secret_scan", "project", "source_type")


def layout_problems(layout: CollectionLayout, recall: RecallConfig) -> list[str]:
    """How an existing destination collection differs from what ``init`` would create."""
    problems = []
    name = recall.vector_name
    vector = layout.vectors.get(name)
    if vector is None:
        if name is None:
            problems.append("it has named vectors, but recall.vectorName is not set (expected one unnamed vector)")
        elif not layout.named:
            problems.append(f"it has one unnamed vector, but recall.vectorName is {name!r}")
        else:
            problems.append(f"it has no vector named {name!r}")
    else:
        if vector.dimension != recall.dimension:
            problems.append(f"its dimension is {vector.dimension}, recall.dimension is {recall.dimension}")
        if vector.distance != recall.distance:
            problems.append(f"its distance is {vector.distance}, recall.distance is {recall.distance}")
    for index in INDEXED_FIELDS:
        kind = layout.indexes.get(index)
        if kind is None:
            problems.append(f"the keyword index on {index!r} is missing")
        elif kind != "keyword":
            problems.append(f"the index on {index!r} is {kind!r}, not keyword")
    return problems


class InitMismatch(QmemError):
    """The collection exists and differs from the configuration; ``document`` is ``init``'s JSON answer."""

    category = "destination"

    def __init__(self, collection: str, problems: list[str], document: dict[str, Any]) -> None:
        super().__init__(f"collection {collection} exists but does not match the configuration: "
                         f"{'; '.join(problems)}; it was left untouched")
        self.document = document


def run_init(ctx: AdminContext, args: Any) -> tuple[dict[str, Any], str]:
    """``init``: the JSON document and its text."""
    recall = ctx.recall
    wanted = {"collection": recall.collection, "dimension": recall.dimension, "distance": recall.distance,
              "vector_name": recall.vector_name, "indexes": list(INDEXED_FIELDS)}
    destination = ctx.destination()
    try:
        layout = destination.collection_info()
        if layout is None:
            destination.create_collection(dimension=recall.dimension, distance=recall.distance,
                                          vector_name=recall.vector_name)
            for index in INDEXED_FIELDS:
                try:
                    destination.create_keyword_index(index)
                except AdminQdrantError as exc:
                    # init never repairs an existing collection, so say how to finish by hand.
                    raise QmemError(f"created collection {recall.collection}, but the keyword index on {index!r} "
                                    f"failed ({exc.message}); create the remaining indexes in Qdrant, or delete "
                                    f"the empty collection and run init again", category="destination") from None
            document = {"action": "created", **wanted, "problems": []}
            return document, render_init(document)
    finally:
        destination.close()
    problems = layout_problems(layout, recall)
    if problems:
        raise InitMismatch(recall.collection, problems, {"action": "mismatch", **wanted, "problems": problems,
                                                         "found": layout.to_json()})
    document = {"action": "unchanged", **wanted, "problems": []}
    return document, render_init(document)
