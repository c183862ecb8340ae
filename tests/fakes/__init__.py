"""Loopback HTTP test doubles for qmem's tests (standard library only).

* :mod:`tests.fakes.http_fake` — :class:`FakeServer` base, :class:`Fault` specs,
  :func:`refused_url`;
* :mod:`tests.fakes.gateway` — :class:`FakeGateway` (DESIGN.md §6);
* :mod:`tests.fakes.qdrant` — :class:`FakeQdrant` (Qdrant REST v1.18 shapes);
* :mod:`tests.fakes.embeddings` — :class:`FakeEmbeddings` (OpenAI-compatible)
  and :func:`embed_text`;
* :mod:`tests.fakes.llm` — a scripted chat-completions LLM (pi, Prime, Hermes);
* :mod:`tests.fakes.modelapi` — a scripted Anthropic Messages / OpenAI Responses API
  (Claude Code, Codex).
"""

from .embeddings import FakeEmbeddings, cosine, embed_text
from .gateway import FakeGateway
from .http_fake import FakeServer, Fault, RecordedRequest, Response, refused_url, unused_port
from .qdrant import FakeQdrant

__all__ = [
    "FakeEmbeddings",
    "FakeGateway",
    "FakeQdrant",
    "FakeServer",
    "Fault",
    "RecordedRequest",
    "Response",
    "cosine",
    "embed_text",
    "refused_url",
    "unused_port",
]
