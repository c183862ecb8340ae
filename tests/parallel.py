"""Run the discovered suite in a few worker processes and report it as one run.

Most of the suite's time is spent in the real qmem processes its tests start and in the fake
services' deadlines they wait out, not in the test process itself, so a handful of workers
finish it in well under the serial time even on two cores.  ``python -m unittest`` stays the
command: :class:`ParallelSuite` is what ``tests/__init__.py``'s ``load_tests`` hands back.

The promise:

* **One result.**  Every event a worker reports (start, success, failure with its traceback
  text, error, skip with its reason, sub-test, expected failure, unexpected success, stop) is
  replayed onto the caller's result in the worker's order, so ``-v`` output, the failure list,
  the totals and :class:`tests.hostguard.SkipGuardSuite`'s skip accounting are what a serial run
  gives.  A failure's text is the worker's formatted traceback.
* **The unit is a test class** (its ``setUpClass`` / ``tearDownClass`` run once, in one
  worker); tests that are not in a class of an importable ``tests.*`` module (a loader's
  ``_FailedTest``, the caller's own tests) run here, serially.
* **Longest first.**  Units are handed out one at a time, the longest first by the last
  measured durations (``.cache/test-durations.json``, rewritten after each parallel run, or
  ``tests/durations.json`` as committed), so no worker is left with a long class at the end.
* **A worker that dies** (killed, crashed) turns the unit it was running into one error naming
  it and its exit status; the other units still run.
* **Workers run on a clean interpreter** (:mod:`tests.cleanpython`), and so does every process
  a test starts with ``sys.executable``: a base interpreter that preloads modules from a
  ``.pth`` file would add its start-up to each of the suite's hundreds of child processes.
* ``QMEM_TEST_WORKERS=1`` (or any run with fewer than two units, or ``debug``) runs serially,
  in this process, exactly as unittest would.  The default is ``min(cpu_count + 2, 4)``.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
import traceback
import unittest
from pathlib import Path
from typing import Any, Iterable, Iterator

from .cleanpython import clean_interpreter

__all__ = ["ParallelSuite", "worker_count", "units_of"]

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".cache" / "test-durations.json"
COMMITTED = Path(__file__).resolve().parent / "durations.json"
_DEFAULT_SECONDS = 2.0  # a unit never measured: about the median class


def worker_count(env: dict[str, str] | os._Environ = os.environ) -> int:
    raw = env.get("QMEM_TEST_WORKERS", "").strip()
    if raw:
        try:
            return max(1, int(raw))
        except ValueError:
            return 1
    return min((os.cpu_count() or 1) + 2, 4)


def _leaves(suite: Any) -> Iterator[Any]:
    if isinstance(suite, unittest.TestSuite):
        for test in suite:
            yield from _leaves(test)
    else:
        yield suite


def units_of(tests: Iterable[Any], prefix: str = "tests.") -> tuple[dict[str, list[str]], list[Any]]:
    """The class units (``tests.test_x.Class``) a worker can load, in order, each with the ids of
    its selected tests (``-k`` may have kept only some), and the tests that must run here."""
    units: dict[str, list[str]] = {}
    local: list[Any] = []
    for test in _leaves(tests):
        cls = type(test)
        module = cls.__module__
        if isinstance(test, unittest.TestCase) and module.startswith(prefix) and module != __name__ \
                and getattr(sys.modules.get(module), cls.__name__, None) is cls:
            units.setdefault(f"{module}.{cls.__qualname__}", []).append(test.id())
        else:
            local.append(test)
    return units, local


def _durations() -> dict[str, float]:
    merged: dict[str, float] = {}
    for path in (COMMITTED, CACHE):
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(document, dict):
            merged.update({k: float(v) for k, v in document.items() if isinstance(v, (int, float))})
    return merged


def _save_durations(measured: dict[str, float]) -> None:
    try:
        known = json.loads(CACHE.read_text(encoding="utf-8"))
        if not isinstance(known, dict):
            known = {}
    except (OSError, ValueError):
        known = {}
    known.update({k: round(v, 2) for k, v in measured.items()})
    try:
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        tmp = CACHE.with_suffix(".tmp")
        tmp.write_text(json.dumps(known, indent=0, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, CACHE)
    except OSError:
        pass  # a read-only checkout only loses the ordering hint


class RemoteFailure(AssertionError):
    """A failure reported by a worker; its message is the worker's traceback text."""


class RemoteError(Exception):
    """An error reported by a worker; its message is the worker's traceback text."""


class RemoteTest:
    """What the caller's result sees of a test that ran in a worker."""

    failureException = AssertionError

    def __init__(self, ident: str, text: str, short: str | None) -> None:
        self._id, self._text, self._short = ident, text, short

    def id(self) -> str:
        return self._id

    def __str__(self) -> str:
        return self._text

    def shortDescription(self) -> str | None:
        return self._short

    def countTestCases(self) -> int:
        return 1


class RemoteSubTest(unittest.case._SubTest):
    """A worker's sub-test, so that the caller's result prints it as it prints its own."""

    def __init__(self, test: RemoteTest, ident: str, text: str) -> None:
        super().__init__(test, unittest.case._subtest_msg_sentinel, {})  # type: ignore[arg-type]
        self._ident, self._text = ident, text

    def id(self) -> str:
        return self._ident

    def __str__(self) -> str:
        return self._text


def _err(kind: str, text: str) -> tuple[type, BaseException, None]:
    cls = RemoteFailure if kind == "failure" else RemoteError
    return cls, cls(text.rstrip("\n")), None


class ParallelSuite(unittest.TestSuite):
    """The discovered suite, spread over worker processes; see the module docstring.

    ``prefix`` names the package whose classes go to workers and ``path`` what workers add to
    their import path (both for the runner's own tests, which run a sample package).
    """

    def __init__(self, tests: Iterable[Any] = (), prefix: str = "tests.", path: Iterable[str] = ()) -> None:
        super().__init__(tests)
        self.prefix = prefix
        self.path = list(path)

    def run(self, result: unittest.TestResult, debug: bool = False) -> unittest.TestResult:
        units, local = units_of(self, self.prefix)
        workers = min(worker_count(), len(units))
        if debug or workers < 2:
            return super().run(result, debug)
        durations = _durations()
        order = sorted(units, key=lambda u: -durations.get(u, _DEFAULT_SECONDS))
        measured = _Dispatcher(order, units, workers, result, self.path).run()
        if local:
            unittest.TestSuite(local).run(result)
        if not self.path:  # a sample package's durations are not the suite's
            _save_durations(measured)
        return result


class _Dispatcher:
    """Hands units to workers one at a time and replays their events onto ``result``."""

    def __init__(self, order: list[str], selected: dict[str, list[str]], workers: int,
                 result: unittest.TestResult, path: list[str]) -> None:
        self.selected = selected
        self.path = path
        # Workers (and so the processes tests start with sys.executable) run on a clean interpreter.
        self.python = clean_interpreter() or sys.executable
        self.pending = list(order)
        self.workers = workers
        self.result = result
        self.events: queue.Queue[tuple[int, dict[str, Any] | None]] = queue.Queue()
        self.measured: dict[str, float] = {}
        self.tests: dict[str, RemoteTest] = {}
        # A unit's events are replayed together when it ends, so two workers' tests never interleave.
        self.buffers: dict[int, list[dict[str, Any]]] = {i: [] for i in range(workers)}

    def run(self) -> dict[str, float]:
        procs = [self._start(i) for i in range(self.workers)]
        current: dict[int, tuple[str, float] | None] = {i: None for i in range(self.workers)}
        alive = set(range(self.workers))
        for i in range(self.workers):
            self._hand_out(procs[i], i, current)
        while alive:
            index, event = self.events.get()
            if event is None:  # the worker's output ended
                proc = procs[index]
                code = proc.wait()
                if proc.stdin is not None and not proc.stdin.closed:
                    try:
                        proc.stdin.close()
                    except OSError:
                        pass
                alive.discard(index)
                running = current.get(index)
                self._flush(index)
                if running is not None:
                    self._worker_died(running[0], code)
                    current[index] = None
                    if self.pending:  # replace the dead worker so the rest still runs
                        procs[index] = self._start(index)
                        alive.add(index)
                        self._hand_out(procs[index], index, current)
                continue
            if event.get("event") == "unit_done":
                unit, started = current[index] or (event.get("unit", "?"), time.monotonic())
                self.measured[unit] = time.monotonic() - started
                current[index] = None
                self._flush(index)
                if self.result.shouldStop:
                    self.pending.clear()
                self._hand_out(procs[index], index, current)
                continue
            self.buffers[index].append(event)
        return self.measured

    def _flush(self, index: int) -> None:
        events, self.buffers[index] = self.buffers[index], []
        for event in events:
            self._replay(event)

    def _start(self, index: int) -> subprocess.Popen[str]:
        env = dict(os.environ)
        env["QMEM_TEST_WORKERS"] = "1"
        env["PYTHONPATH"] = os.pathsep.join([*self.path, str(REPO), *filter(None, [env.get("PYTHONPATH")])])
        proc = subprocess.Popen([self.python, "-m", "tests.parallel"], cwd=str(REPO), env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8",
                                bufsize=1)
        threading.Thread(target=self._read, args=(index, proc), daemon=True).start()
        return proc

    def _read(self, index: int, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                self.events.put((index, event))
        proc.stdout.close()
        self.events.put((index, None))

    def _hand_out(self, proc: subprocess.Popen[str], index: int,
                  current: dict[int, tuple[str, float] | None]) -> None:
        assert proc.stdin is not None
        try:
            if self.pending:
                unit = self.pending.pop(0)
                current[index] = (unit, time.monotonic())
                proc.stdin.write(json.dumps({"unit": unit, "tests": self.selected[unit]}) + "\n")
                proc.stdin.flush()
            else:
                proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # the reader sees the end and reports the unit

    def _test(self, event: dict[str, Any]) -> RemoteTest:
        ident = str(event.get("id", "?"))
        test = self.tests.get(ident)
        if test is None:
            test = self.tests[ident] = RemoteTest(ident, str(event.get("text", ident)), event.get("short"))
        return test

    def _replay(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        result = self.result
        test = self._test(event)
        if kind == "start":
            result.startTest(test)  # type: ignore[arg-type]
        elif kind == "stop":
            result.stopTest(test)  # type: ignore[arg-type]
            self.tests.pop(test.id(), None)
        elif kind == "success":
            result.addSuccess(test)  # type: ignore[arg-type]
        elif kind in ("failure", "error"):
            add = result.addFailure if kind == "failure" else result.addError
            add(test, _err(kind, event.get("trace", "")))  # type: ignore[arg-type]
        elif kind == "skip":
            result.addSkip(test, str(event.get("reason", "")))  # type: ignore[arg-type]
        elif kind == "expected_failure":
            result.addExpectedFailure(test, _err("failure", event.get("trace", "")))  # type: ignore[arg-type]
        elif kind == "unexpected_success":
            result.addUnexpectedSuccess(test)  # type: ignore[arg-type]
        elif kind == "subtest":
            sub = RemoteSubTest(test, str(event.get("sub_id", "?")), str(event.get("sub_text", "?")))
            outcome = event.get("outcome")
            err = None if outcome is None else _err(outcome, event.get("trace", ""))
            result.addSubTest(test, sub, err)  # type: ignore[arg-type]

    def _worker_died(self, unit: str, code: int) -> None:
        test = RemoteTest(unit, f"{unit} (worker)", None)
        self.result.startTest(test)  # type: ignore[arg-type]
        self.result.addError(test, _err("error", f"the worker running {unit} exited with status {code} "
                                                  "before the unit finished"))  # type: ignore[arg-type]
        self.result.stopTest(test)  # type: ignore[arg-type]


class _ReportingResult(unittest.TestResult):
    """A worker's result: each event is one JSON line on the protocol stream."""

    def __init__(self, stream: Any) -> None:
        super().__init__()
        self.out = stream

    def _send(self, event: str, test: Any, **fields: Any) -> None:
        document = {"event": event, "id": test.id(), "text": str(test),
                    "short": test.shortDescription() if hasattr(test, "shortDescription") else None, **fields}
        self.out.write(json.dumps(document) + "\n")
        self.out.flush()

    def startTest(self, test: Any) -> None:
        super().startTest(test)
        self._send("start", test)

    def stopTest(self, test: Any) -> None:
        super().stopTest(test)
        self._send("stop", test)

    def addSuccess(self, test: Any) -> None:
        super().addSuccess(test)
        self._send("success", test)

    def addFailure(self, test: Any, err: Any) -> None:
        super().addFailure(test, err)
        self._send("failure", test, trace=self._exc_info_to_string(err, test))

    def addError(self, test: Any, err: Any) -> None:
        super().addError(test, err)
        self._send("error", test, trace=self._exc_info_to_string(err, test))

    def addSkip(self, test: Any, reason: str) -> None:
        super().addSkip(test, reason)
        self._send("skip", test, reason=reason)

    def addExpectedFailure(self, test: Any, err: Any) -> None:
        super().addExpectedFailure(test, err)
        self._send("expected_failure", test, trace=self._exc_info_to_string(err, test))

    def addUnexpectedSuccess(self, test: Any) -> None:
        super().addUnexpectedSuccess(test)
        self._send("unexpected_success", test)

    def addSubTest(self, test: Any, subtest: Any, err: Any) -> None:
        super().addSubTest(test, subtest, err)
        outcome = None
        trace = ""
        if err is not None:
            outcome = "failure" if issubclass(err[0], test.failureException) else "error"
            trace = self._exc_info_to_string(err, test)
        self._send("subtest", test, sub_id=subtest.id(), sub_text=str(subtest), outcome=outcome, trace=trace)


def _worker() -> int:
    """Read units from stdin (a JSON line each: the class and its test ids), run each, report
    on the original stdout."""
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # what tests print goes to stderr, never into the protocol
    sys.stdout = sys.stderr
    loader = unittest.TestLoader()
    for line in sys.stdin:
        if not line.strip():
            continue
        order = json.loads(line)
        unit = order["unit"]
        result = _ReportingResult(protocol)
        try:
            suite = loader.loadTestsFromNames(order["tests"])
        except Exception:  # an import error becomes the unit's error, as a loader would report it
            holder = unittest.FunctionTestCase(lambda: None, description=unit)
            result.addError(holder, sys.exc_info())
        else:
            suite.run(result)
        protocol.write(json.dumps({"event": "unit_done", "unit": unit}) + "\n")
        protocol.flush()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(_worker())
    except KeyboardInterrupt:
        traceback.print_exc()
        sys.exit(130)
