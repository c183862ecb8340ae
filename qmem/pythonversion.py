"""The Python qmem needs, checked first by every entry point.

qmem is written for Python 3.10 and later.  On an older interpreter an entry point would
start and then fail somewhere later, with a traceback or, worse, half working (a bridge that
reports ready and then cannot answer).  So each entry point — ``qmem.local``, ``qmem.admin``,
``qmem.mcp``, ``qmem.bridge`` — calls :func:`require_supported_python` before it imports
anything else of qmem: on an older Python it prints one line on stderr, e.g.::

    qmem needs Python ≥ 3.10, found 3.9

and exits with status 1.  This module is kept free of newer syntax so that it compiles and
runs on any Python 3.
"""

import sys

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
