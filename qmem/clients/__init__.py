"""The network clients qmem's lanes use, each able to do its job and no more.

``transport`` is HTTP with two deadlines, bounded answers and redacted errors; ``gateway`` the
Memory Gateway client (breaker-gated, bounded retries); ``qdrant`` the runtime's read-only Qdrant
client (three operations); ``embeddings`` an OpenAI-compatible embeddings client;
``knownkeys`` removes qmem's own credentials from anything a server sends; ``progressline`` is
the one line a terminal shows while a command waits on the network.
"""
