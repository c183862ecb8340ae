"""``python3 -m qmem.admin``: the human-operated admin CLI — ``init``, ``status``, ``import-hermes``.

This module is the admin surface's only way in: it parses the command line, runs one
command and turns what it produced, or the error it raised, into output and an exit status.
Nothing on the runtime path imports it or the modules only it uses — the command line
(:mod:`qmem.curation.args`), the commands (:mod:`qmem.curation.create`, :mod:`qmem.curation.status`,
:mod:`qmem.curation.importrun`) with what they share (:mod:`qmem.curation.context`,
:mod:`qmem.curation.render`), the two Qdrant clients (:mod:`qmem.curation.qdrant`) and the Hermes
import's rules (:mod:`qmem.curation.hermespoint`, :mod:`qmem.curation.plan`) — and no model can
reach it: it is run by a person, and what it does is visible in its output.

* ``init`` (mutating, explicit) creates the destination collection of the ``recall``
  config section — its dimension, distance and vector name (unnamed unless
  ``recall.vectorName`` is set) — and the five keyword indexes of DESIGN §7.  A collection
  that already matches is left alone ("nothing changed"); one that differs in any way,
  including a missing index, is reported and left untouched (exit 1).
* ``status`` (read-only) reports the destination (admin key), optionally a source
  (``--source-url``/``--source-collection``, source key), runtime health (the runtime's
  read-only key: ``/healthz`` and the collection readable), the breakers of the gateway,
  Qdrant and embeddings URLs, and the local index if its file exists (it is never
  created).  It prints no endpoint, header, path, memory text or credential; exit 1 when
  anything checked is unhealthy.
* ``import-hermes … --dry-run`` reads the source through a projection that can only read,
  normalizes every point, prints counts and the plan id, and writes nothing.
  ``import-hermes … --approve PLAN_ID`` repeats all of it, compares the digests with
  :func:`hmac.compare_digest`, and on a match upserts exactly the points that were
  hashed — spooled while hashing, never read from the source again — in batches with
  ``wait=true``, reporting progress on stderr and, if a batch fails, which ones committed.
  There is no delete or reset command.

Exit status: 0 success, 1 error (one line on stderr, no traceback), 2 bad usage.  With
``--json`` stdout carries exactly one JSON document.  Credentials come only from the
environment (``QMEM_ADMIN_QDRANT_API_KEY``, ``QMEM_SOURCE_QDRANT_API_KEY``,
``QMEM_QDRANT_API_KEY``), never from the command line.  ``--version`` prints the version; on a
Python older than 3.10 it prints one line and exits 1.
"""

if __name__ == "__main__":  # `python3 -m qmem.admin`: nothing more from the working directory (see qmem/entryguard.py)
    from .entryguard import drop_working_directory

    drop_working_directory()

from .entryguard import require_supported_python  # noqa: E402

require_supported_python()

import os  # noqa: E402  (after the version check: one line on an old Python, no traceback)
import sys  # noqa: E402

from .cli.frontend import (  # noqa: E402
    EXIT_ERROR, EXIT_USAGE, HelpRequested, Outcome, UsageError, emit, error_outcome, to_json_text,
    undecodable_argument, wants_json,
)
from .clients.progressline import ProgressLine, set_wait_observer  # noqa: E402
from .curation.args import PROG, build_parser  # noqa: E402
from .curation.context import AdminContext  # noqa: E402
from .curation.create import InitMismatch, run_init  # noqa: E402
from .curation.importrun import BatchFailure, PlanMismatch, run_import  # noqa: E402
from .curation.status import StatusProblems, run_status  # noqa: E402
from .errors import QmemError  # noqa: E402
from .runtime import Runtime  # noqa: E402

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

# The pipeline's pieces stay importable from here, where the import benchmark and the tests find them.
__all__ = ["main"]

_COMMANDS = {"init": run_init, "status": run_status, "import-hermes": run_import}


def _stderr_progress(line: str) -> None:
    sys.stderr.write(f"{PROG}: {line}\n")
    sys.stderr.flush()


def _error_document(exc: QmemError) -> "dict[str, Any]":
    document: "dict[str, Any]" = {"error": {"category": exc.category, "message": exc.message}}
    if isinstance(exc, (InitMismatch, StatusProblems)):
        document = {**exc.document, **document}
    elif isinstance(exc, BatchFailure):
        document.update(written=exc.written, batches={"total": exc.total, "committed": exc.failed - 1,
                                                      "failed": exc.failed})
    elif isinstance(exc, PlanMismatch):
        document["written"] = 0
    return document


def run(argv: "Sequence[str]", *, env: "Mapping[str, str] | None" = None,
        progress: "Callable[[str], None] | None" = None) -> Outcome:
    """Run one command line and return what it produced; never raises for user errors."""
    env = os.environ if env is None else env
    argv = list(argv)
    bad = undecodable_argument(argv)
    if bad is not None:
        return error_outcome(EXIT_ERROR, "input", bad, as_json=wants_json(argv))
    try:
        args = build_parser().parse_args(argv)
    except HelpRequested as help_text:
        return Outcome(stdout=str(help_text))
    except UsageError as exc:
        return error_outcome(EXIT_USAGE, "usage", str(exc), as_json=wants_json(argv))
    runtime: Runtime | None = None
    try:
        runtime = Runtime(env)
        ctx = AdminContext(runtime=runtime, progress=progress or _stderr_progress)
        document, text = _COMMANDS[args.command](ctx, args)
    except UsageError as exc:
        return error_outcome(EXIT_USAGE, "usage", str(exc), as_json=args.json)
    except QmemError as exc:
        if args.json:
            stdout = to_json_text(_error_document(exc))
        else:
            stdout = exc.text if isinstance(exc, StatusProblems) else ""
        return Outcome(code=EXIT_ERROR, error=exc.message, stdout=stdout, json=args.json)
    finally:
        if runtime is not None:
            runtime.close()
    return Outcome(stdout=to_json_text(document) if args.json else text, json=args.json)


def main(argv: "Sequence[str] | None" = None) -> int:
    if sys.stderr.isatty():
        set_wait_observer(ProgressLine(sys.stderr))
    return emit(run(sys.argv[1:] if argv is None else argv), PROG)


if __name__ == "__main__":
    sys.exit(main())
