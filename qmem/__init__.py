"""qmem: long-term memory for AI coding agents, in standard-library Python.

Importing the package does nothing but define names; every lane lives in its own module
(``qmem.localindex``, ``qmem.store``, ``qmem.recall`` …).  :func:`register` is the entry point
Hermes Agent calls when this folder is installed as a general (standalone) plugin; see
``qmem/hermes/adapter.py``.  (Keep this file short: Hermes reads its first 8 KB to classify plugins.)
"""

__all__ = ["register"]

__version__ = "0.1.0"


def register(ctx):  # noqa: ANN001, ANN201 - Hermes' PluginContext
    """Hermes Agent's plugin entry point: the qmem tools, commands and skill, and the middleware
    that adds the rules and automatic recall to each provider request."""
    from .hermes.adapter import register as register_with_hermes

    register_with_hermes(ctx)
