"""What every entry point does before anything else of qmem: refuse a Python it does not support,
and take the working directory off ``sys.path``.

**The Python qmem needs.**  qmem is written for Python 3.10 and later.  On an older interpreter
an entry point would start and then fail somewhere later, with a traceback or, worse, half
working (a bridge that reports ready and then cannot answer).  So each entry point —
``qmem.local``, ``qmem.admin``, ``qmem.mcp``, ``qmem.bridge`` — calls
:func:`require_supported_python` before it imports anything else of qmem: on an older Python it
prints one line on stderr, e.g.::

    qmem needs Python ≥ 3.10, found 3.9

and exits with status 1.  This module is kept free of newer syntax so that it compiles and runs
on any Python 3.

**Nothing from the working directory.**  ``python3 -m`` puts the current directory first on
``sys.path`` (``-c`` puts ``''``), so a project's ``json.py`` or ``uuid.py`` would be imported in
place of the standard library's.  :func:`drop_working_directory` removes that entry, and every
other entry naming the working directory, so nothing qmem imports after it comes from there.

What it cannot do — and why the README and ``mcp-config`` give a *form* of the command, not only
this guard: by the time any qmem code runs, ``-m`` has already imported ``runpy``'s own modules
through that entry (``types``, ``importlib``; on 3.10 ``runpy`` itself, and on 3.10 and 3.11
``contextlib``, ``collections``, ``functools``), and the ``qmem`` package itself is found through
it.  The safe forms keep the entry from ever existing: ``python3 -P -m …`` (3.11+), a ``-c``
bootstrap whose first statement drops ``''`` (every version), an installed console script
(``qmem-local``: its ``sys.path[0]`` is its own directory), or a working directory qmem trusts
(the clone, where the pi/Prime bridge also runs).
"""

import os
import sys

__all__ = ["require_supported_python", "drop_working_directory"]

MINIMUM = (3, 10)


def unsupported_message(found=None, hint=""):
    """The one line printed on an unsupported Python (``found`` defaults to this one)."""
    found = tuple(found or sys.version_info[:2])
    return "qmem needs Python \u2265 %d.%d, found %d.%d%s" % (MINIMUM[0], MINIMUM[1], found[0], found[1], hint)


def require_supported_python(hint=""):
    """Exit 1 with :func:`unsupported_message` when this Python is older than :data:`MINIMUM`."""
    if tuple(sys.version_info[:2]) < MINIMUM:
        sys.stderr.write(unsupported_message(hint=hint) + "\n")
        sys.stderr.flush()
        raise SystemExit(1)


def drop_working_directory():
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
