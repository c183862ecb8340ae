"""qmem's tests; ``python -m unittest`` from the repository root runs them all.

Discovery hands the whole package to :func:`load_tests`, which wraps it in
:class:`tests.hostguard.SkipGuardSuite` (under ``CI=true`` a skip in an installed real
host's tests fails the run, and every run ends with a one-line summary of its skips) around
:class:`tests.parallel.ParallelSuite` (the test classes run in a few worker processes and
are reported as one run; ``QMEM_TEST_WORKERS=1`` runs them here, serially).
"""

from pathlib import Path


def load_tests(loader, standard_tests, pattern):
    from .hostguard import SkipGuardSuite
    from .parallel import ParallelSuite

    here = Path(__file__).resolve().parent
    # Inside discovery the loader remembers the top-level directory, so module names stay tests.*.
    found = loader.discover(start_dir=str(here), pattern=pattern or "test*.py",
                            top_level_dir=str(here.parent))
    return SkipGuardSuite([ParallelSuite([standard_tests, found])])
