"""What ``python3 -m qmem.local|mcp|admin`` does first: take the working directory off ``sys.path``.

``python3 -m`` puts the current directory first on ``sys.path`` (``-c`` puts ``''``), so a
project's ``json.py`` or ``uuid.py`` would be imported in place of the standard library's.
:func:`drop_working_directory` removes that entry, and every other entry naming the working
directory, so nothing qmem imports after it comes from there.

What it cannot do — and why the README and ``mcp-config`` give a *form* of the command, not
only this guard: by the time any qmem code runs, ``-m`` has already imported ``runpy``'s own
modules through that entry (``types``, ``importlib``; on 3.10 ``runpy`` itself, and on 3.10
and 3.11 ``contextlib``, ``collections``, ``functools``), and the ``qmem`` package itself is
found through it.  The safe forms keep the entry from ever existing: ``python3 -P -m …``
(3.11+), a ``-c`` bootstrap whose first statement drops ``''`` (every version), an installed
console script (``qmem-local``: its ``sys.path[0]`` is its own directory), or a working
directory qmem trusts (the clone, where the pi/Prime bridge also runs).
"""

import os
import sys

__all__ = ["drop_working_directory"]


def drop_working_directory() -> None:
    """Remove ``''`` and every entry that is the working directory from ``sys.path``."""
    try:
        here = os.path.realpath(os.getcwd())
    except OSError:  # the working directory was removed: only '' can name it
        here = None
    kept = []
    for entry in sys.path:
        if not entry:
            continue
        if here is not None:  # a relative entry ("." from PYTHONPATH=.) names a place in the working directory
            try:
                if os.path.realpath(entry) == here:
                    continue
            except (OSError, ValueError):
                pass
        kept.append(entry)
    sys.path[:] = kept
