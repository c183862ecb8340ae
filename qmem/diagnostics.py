"""Warnings said once: a fixed, redacted sentence per category; repeats are silent.

A caller names only the *category* of what went wrong; the sentence comes from
:data:`SENTENCES`, so a warning can never carry an endpoint, a header, a body, a
query, memory text, a path or a credential.  One :class:`Warnings` lives as long as
a host session (or a CLI run): the first warning of each category reaches the sink,
later ones are counted and dropped.
"""

from __future__ import annotations

import sys
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Warnings", "SENTENCES", "stderr_sink"]

SENTENCES: dict[str, str] = {
    "retrieval": "qmem: memory recall is unavailable right now; continuing without recalled memories.",
    "embedding": "qmem: the embeddings service is unavailable; continuing without recalled memories.",
    "parsing": "qmem: a memory service sent an answer qmem could not use; continuing without it.",
    "timeout": "qmem: memory recall took too long and was skipped for this turn.",
    "cancellation": "qmem: memory recall was cancelled for this turn.",
    "formatting": "qmem: recalled memories could not be formatted and were left out.",
    "cache": "qmem: the recall cache failed; memories will be fetched again.",
    # Said on pi or Prime when identity is ambiguous, and on Hermes or an MCP client with no lane named:
    # in each, QMEM_HOST (or recall.host) names the lane (on pi and Prime it settles a true conflict).
    "host": "qmem: no recall lane is known for this host; automatic recall is off (set QMEM_HOST=pi or "
            "QMEM_HOST=prime where the host starts, or recall.host in the config file).",
    "configuration": "qmem: the configuration is invalid; run `python3 -m qmem.local doctor` for details.",
    "recall_not_configured": "qmem: memory recall is not configured (write recall.qdrantUrl and "
                             "recall.embeddingsUrl in the config file to turn it on).",
    "recall_disabled": "qmem: memory recall is switched off in the config file (recall.enabled).",
    "gateway": "qmem: the Memory Gateway is unreachable; using the local index and the outbox.",
    "breaker": "qmem: the circuit-breaker state file was unreadable and has been reset.",
    "breaker_storage": "qmem: the circuit-breaker state cannot be saved; each process will probe on its own.",
    "index": "qmem: the local index is unavailable; offline search and queued writes are off.",
    "queue_failed": "qmem: a queued record could not be sent and is marked failed; "
                    "`python3 -m qmem.local queue` shows why.",
    "bridge": "qmem: the memory bridge stopped; the agent continues without memory until the next session.",
    "bridge_protocol": "qmem: the memory bridge received a line it could not read; it was ignored.",
}


def stderr_sink(sentence: str) -> None:
    sys.stderr.write(sentence + "\n")
    sys.stderr.flush()


class Warnings:
    """Warn-once state for one session."""

    def __init__(self, sink: Callable[[str], None] | None = None) -> None:
        self._sink = sink or stderr_sink
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()

    def warn(self, category: str) -> bool:
        """Report ``category`` (a key of :data:`SENTENCES`); True if this was the first time."""
        sentence = SENTENCES[category]
        with self._lock:
            count = self._seen.get(category, 0)
            self._seen[category] = count + 1
        if count:
            return False
        try:
            self._sink(sentence)
        except Exception:  # a broken sink must not turn a warning into a failure
            pass
        return True

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._seen)
