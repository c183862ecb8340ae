"""Benchmarks that time processes run on a clean interpreter (see ``tests/cleanpython.py``).

``rerun_on_clean_interpreter()`` at the top of such a script starts it again on this Python's
``venv --without-pip`` (made once under ``.cache/``), so that the script, ``sys.executable`` and
every process it times are the interpreter a user has, not a base interpreter that preloads
modules from a ``.pth`` file; then it prints which interpreter and how many modules it starts
with.  ``--python PATH`` as the script's first arguments names another interpreter instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.cleanpython import clean_interpreter, describe  # noqa: E402

_MARK = "QMEM_BENCH_INTERPRETER"


def rerun_on_clean_interpreter() -> None:
    """Re-execute the running script on the clean interpreter, once; print which one runs it."""
    if os.environ.get(_MARK) != sys.executable:
        python = None
        if sys.argv[1:2] == ["--python"] and len(sys.argv) > 2:
            python = sys.argv[2]
            del sys.argv[1:3]
        python = python or clean_interpreter()
        if python and python != os.environ.get(_MARK):
            os.environ[_MARK] = python
            os.execv(python, [python, sys.argv[0], *sys.argv[1:]])
    print(describe(sys.executable), flush=True)
