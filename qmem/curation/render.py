"""The admin CLI's text output: each command's JSON document, rendered as the lines a person reads.

Every function here takes the document the command prints under ``--json`` and nothing
else, so the text can say only what the document says: no endpoint, header, path, memory
text or credential (none of them is in a document).  Pure; only :mod:`qmem.admin` and the
admin commands use this module.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = []


# --- init ----------------------------------------------------------------------------------------

def _vector_words(document: Mapping[str, Any]) -> str:
    name = f"vector {document['vector_name']!r}" if document["vector_name"] else "unnamed vector"
    return f"{name}, dimension {document['dimension']}, {document['distance']}"


def render_init(document: Mapping[str, Any]) -> str:
    """What ``init`` did: created the collection, or found it matching and changed nothing."""
    indexes = document["indexes"]
    if document["action"] == "created":
        return (f"created collection {document['collection']} ({_vector_words(document)}) with keyword indexes on "
                f"{', '.join(indexes)}")
    return (f"collection {document['collection']} already matches the configuration ({_vector_words(document)}, "
            f"{len(indexes)} keyword indexes); nothing changed")


# --- status --------------------------------------------------------------------------------------

def _part_line(label: str, part: Mapping[str, Any]) -> str:
    if part.get("checked") is False:
        return f"{label:<12} not checked (give --source-url and --source-collection)"
    head = f"{label:<12} {part.get('collection')} (key {part.get('key')})"
    if part.get("error"):
        return f"{head}: unreachable — {part['error']}"
    if part.get("exists") is False:
        return f"{head}: does not exist"
    line = (f"{head}: {part.get('points')} points, vector {part.get('vector_name') or 'unnamed'} "
            f"{part.get('dimension')} {part.get('distance')}, indexes {', '.join(part.get('indexes', {})) or 'none'}")
    if "importable_as" in part:
        line += f"; importable with --profile {' or '.join(part['importable_as']) or '(none matches)'}"
    if part.get("problems"):
        line += f"\n{'':<13}problems: {'; '.join(part['problems'])}"
    return line


def render_status(document: Mapping[str, Any]) -> str:
    runtime = document["runtime"]
    runtime_line = (f"{'runtime':<12} recall {'on' if runtime['recall_enabled'] else 'off'} (key {runtime['key']}): "
                    f"healthz {'ok' if runtime.get('healthz') else 'failing'}, collection "
                    f"{'readable' if runtime.get('collection_readable') else 'not readable'}")
    if runtime.get("error"):
        runtime_line += f" — {runtime['error']}"
    breakers = ", ".join(f"{name} {snap['state']}" if snap else f"{name} not configured"
                         for name, snap in document["breakers"].items())
    index = document["local_index"]
    if not index.get("exists"):
        index_line = "not created yet"
    elif index.get("error"):
        index_line = f"unreadable — {index['error']}"
    else:
        queue = index["queue"]
        index_line = f"{index['records']} records, {queue['pending']} queued, schema v{index['schema_version']}"
    return "\n".join([
        _part_line("destination", document["destination"]),
        _part_line("source", document["source"]),
        runtime_line,
        f"{'breakers':<12} {breakers}",
        f"{'local index':<12} {index_line}",
        *(f"{'warning':<12} {warning}" for warning in document.get("warnings", ())),
        f"{'overall':<12} {'ok' if document['ok'] else 'problems found'}",
    ])


# --- import-hermes -------------------------------------------------------------------------------

def render_counts(document: Mapping[str, Any]) -> str:
    """What one read of the source found: points read, accepted, rejected (by reason) and skipped."""
    counts = document["counts"]
    skipped = sum(counts["skipped"].values())
    rejected = counts["rejected"]["total"]
    line = (f"read {counts['read']} points from {document['source']['collection']} ({document['profile']}): "
            f"{counts['accepted']} accepted, {rejected} rejected")
    if skipped:
        line += f", {skipped} skipped (identity point)"
    if rejected:
        line += "\nrejected: " + ", ".join(f"{reason} {count}"
                                           for reason, count in counts["rejected"]["by_reason"].items())
    return line


def render_import(document: Mapping[str, Any]) -> str:
    """A dry-run's counts, plan id and next step; or what an approved plan wrote."""
    plan_id = document["plan_id"]
    collection = document["destination"]["collection"]
    if document["mode"] == "dry-run":
        target = f"{collection} for {document['target_host']}" + (
            f", project {document['project']}" if document["project"] else "")
        return (f"dry-run: nothing was written.\n{render_counts(document)}\nplan id: {plan_id}\n"
                f"To write these {document['counts']['accepted']} points into {target}, run the same command "
                f"with --approve {plan_id} instead of --dry-run.")
    batches = document["batches"]["total"]
    return (f"{render_counts(document)}\nwrote {document['written']} points into {collection} in {batches} "
            f"batch{'es' if batches != 1 else ''}; import_run_id {plan_id}")
