"""A skip must not hide an installed host under CI, and every run says what it skipped.

:class:`SkipGuardSuite` wraps the whole discovered suite (``tests/__init__.py``'s
``load_tests``, so the command stays ``python -m unittest``).  While it runs it watches the
result's skips:

* under ``CI=true``, a skip in a test that belongs to an installed host (its ``.installed``
  marker exists, or its override variable is set; see :mod:`tests.hosts`) is reported as a
  failure instead, naming the host and the skip's reason — ``.ci/run`` installed that host
  so that its tests run;
* every other skip stays a skip, and after the run one line sums them up, grouped by
  reason, just before unittest's own totals.

A skip raised in ``setUpClass`` reaches the result as one skip for the whole class; it is
attributed through the class named in its description.
"""

from __future__ import annotations

import os
import re
import sys
import unittest
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .hosts import REAL_HOSTS, Host

__all__ = ["SkipGuardSuite", "HostSkippedUnderCI", "is_ci", "host_of", "skip_summary"]

_GUARDED = "_qmem_skip_guard"
_FIXTURE_ID = re.compile(r"^\w+ \((?P<id>[^ ()]+)\)$")  # "setUpClass (tests.test_x.Class)"


class HostSkippedUnderCI(AssertionError):
    """A test of an installed host skipped under CI."""


def is_ci(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get("CI", "").strip().lower() in ("true", "1")


def test_id(test: Any) -> str:
    """The dotted id of a test, or of the class / module a fixture error stands for."""
    ident = test.id() if hasattr(test, "id") else str(test)
    match = _FIXTURE_ID.match(ident)
    return match.group("id") if match else ident


def host_of(ident: str, hosts: Iterable[Host] = REAL_HOSTS) -> Host | None:
    """The host whose longest test prefix covers ``ident``."""
    best: tuple[int, Host] | None = None
    for host in hosts:
        for prefix in host.tests:
            if (ident == prefix or ident.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), host)
    return best[1] if best else None


def skip_summary(reasons: Sequence[str], required: Sequence[Host]) -> str:
    """One line: how many skips, grouped by reason, most frequent first."""
    guard = f" (CI: installed hosts must run: {', '.join(h.directory for h in required)})" if required else ""
    if not reasons:
        return f"skips: none{guard}"
    groups = "; ".join(f"{count} × {reason}" for reason, count in Counter(reasons).most_common())
    return f"skips: {len(reasons)} — {groups}{guard}"


class SkipGuardSuite(unittest.TestSuite):
    """The whole run; see the module docstring.  Running it twice on one result guards once."""

    def __init__(self, tests: Iterable[Any] = (), hosts: Sequence[Host] = REAL_HOSTS,
                 env: Mapping[str, str] | None = None) -> None:
        super().__init__(tests)
        env = os.environ if env is None else env
        self.required = [host for host in hosts if host.installed(env)] if is_ci(env) else []

    def run(self, result: unittest.TestResult, debug: bool = False) -> unittest.TestResult:
        if getattr(result, _GUARDED, False):
            return super().run(result, debug)
        setattr(result, _GUARDED, True)
        skips: list[str] = []
        add_skip = result.addSkip

        def guarded_skip(test: Any, reason: str) -> None:
            host = host_of(test_id(test), self.required)
            if host is None:
                skips.append(reason)
                add_skip(test, reason)
                return
            try:
                raise HostSkippedUnderCI(f"{host.directory} is installed ({host.marker} or ${host.override}), "
                                         f"so under CI its tests must run, but this one skipped: {reason}")
            except HostSkippedUnderCI:
                result.addFailure(test, sys.exc_info())

        result.addSkip = guarded_skip  # type: ignore[method-assign]
        print_errors = getattr(result, "printErrors", None)
        stream = getattr(result, "stream", None)
        if print_errors is not None and stream is not None:
            def print_errors_then_skips() -> None:
                print_errors()
                stream.writeln(skip_summary(skips, self.required))
                stream.flush()

            result.printErrors = print_errors_then_skips  # type: ignore[method-assign]
        return super().run(result, debug)
