"""qmem: long-term memory for AI coding agents, in standard-library Python.

Importing the package does nothing but define names; every lane lives in its own
module (``qmem.localindex``, ``qmem.store``, ``qmem.recall`` …).
"""

__version__ = "0.1.0"
