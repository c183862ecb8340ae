"""The parallel runner reports what a serial run reports (tests/parallel.py).

A sample package with every kind of outcome (pass, failure, error, skip, sub-tests, expected
failure, unexpected success, a class fixture that fails, a class with shared state, output
printed by a test, a test whose worker dies) runs in a real ``python`` process once serially
and once over three workers; the verbose lines, the totals and the failure texts must agree.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

from tests.parallel import units_of

REPO = Path(__file__).resolve().parents[1]

SAMPLE = {
    "__init__.py": "",
    "test_outcomes.py": '''
        import unittest

        class Outcomes(unittest.TestCase):
            def test_pass(self):
                print("printed by a test")
                self.assertTrue(True)

            def test_fail(self):
                self.assertEqual(1, 2, "one is not two")

            def test_error(self):
                raise KeyError("missing")

            @unittest.skip("not today")
            def test_skip(self):
                pass

            def test_subtests(self):
                for i in range(3):
                    with self.subTest(i=i):
                        self.assertNotEqual(i, 1)

            @unittest.expectedFailure
            def test_expected(self):
                self.assertTrue(False)

            @unittest.expectedFailure
            def test_unexpected(self):
                pass
    ''',
    "test_fixtures.py": '''
        import unittest

        class BrokenFixture(unittest.TestCase):
            @classmethod
            def setUpClass(cls):
                raise RuntimeError("fixture broke")

            def test_never(self):
                pass

        class SharedState(unittest.TestCase):
            seen = []

            def test_a(self):
                self.seen.append("a")

            def test_b(self):
                self.seen.append("b")
                self.assertEqual(self.seen, ["a", "b"])  # one class, one process, in order
    ''',
    "test_more.py": "\n".join(
        ["import unittest", ""] + [
            f"class Many{n}(unittest.TestCase):\n    def test_{n}(self):\n        self.assertEqual({n}, {n})\n"
            for n in range(8)]),
    "test_dies.py": '''
        import os
        import unittest

        class Dies(unittest.TestCase):
            def test_exit(self):
                if os.environ.get("QMEM_SAMPLE_DIE") == "1":
                    os._exit(3)
    ''',
}

RUNNER = '''
import sys, unittest
from tests.parallel import ParallelSuite
root, report = sys.argv[1], sys.argv[2]
sys.path.insert(0, root)
loader = unittest.TestLoader()
found = loader.discover(start_dir=root + "/qmemsample", top_level_dir=root)
with open(report, "w", encoding="utf-8") as stream:  # apart from what the tests print
    result = unittest.TextTestRunner(verbosity=2, stream=stream).run(
        ParallelSuite([found], prefix="qmemsample.", path=[root]))
sys.exit(0 if result.wasSuccessful() else 1)
'''


class ParallelRunnerTests(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory(prefix="qmem-parallel-")
        self.addCleanup(tmp.cleanup)
        self.root = Path(tmp.name)
        package = self.root / "qmemsample"
        package.mkdir()
        for name, body in SAMPLE.items():
            (package / name).write_text(textwrap.dedent(body), encoding="utf-8")

    def run_sample(self, workers: int, **extra: str) -> tuple[int, str, str]:
        """Exit status, the runner's report, and what the processes printed."""
        env = {**os.environ, "QMEM_TEST_WORKERS": str(workers), "PYTHONPATH": str(REPO), **extra}
        report = self.root / f"report-{workers}.txt"
        done = subprocess.run([sys.executable, "-c", RUNNER, str(self.root), str(report)], cwd=str(REPO),
                              env=env, capture_output=True, text=True, timeout=300)
        return done.returncode, report.read_text(encoding="utf-8"), done.stdout + done.stderr

    @staticmethod
    def verdicts(output: str) -> list[str]:
        """The sorted ``test (id) ... verdict`` lines and the failure headers."""
        lines = [line for line in output.splitlines()
                 if " ... " in line or line.startswith(("FAIL:", "ERROR:"))]
        return sorted(lines)

    @staticmethod
    def totals(output: str) -> str:
        return "\n".join(line for line in output.splitlines()
                         if re.match(r"^(Ran \d+ tests?|OK|FAILED)", line)).split(" in ")[0]

    def test_parallel_reports_what_serial_reports(self) -> None:
        serial_code, serial, _ = self.run_sample(1)
        code, parallel, printed = self.run_sample(3)
        self.assertEqual((serial_code, code), (1, 1), parallel + printed)
        self.assertEqual(self.verdicts(parallel), self.verdicts(serial))
        self.assertIn("FAILED (failures=2, errors=2, skipped=1, expected failures=1, unexpected successes=1)",
                      parallel)
        self.assertEqual(re.sub(r" in [\d.]+s", "", self.totals(parallel)),
                         re.sub(r" in [\d.]+s", "", self.totals(serial)))
        for text in ("one is not two", "KeyError: 'missing'", "fixture broke", "(i=1)"):
            self.assertIn(text, parallel)
        self.assertIn("printed by a test", printed)  # never into the protocol
        self.assertNotIn('"event"', parallel + printed)

    def test_a_worker_that_dies_is_one_error_and_the_rest_runs(self) -> None:
        code, parallel, _ = self.run_sample(3, QMEM_SAMPLE_DIE="1")
        self.assertEqual(code, 1)
        self.assertRegex(parallel, r"ERROR: qmemsample\.test_dies\.Dies \(worker\)")
        self.assertIn("exited with status 3", parallel)
        for n in range(8):
            self.assertRegex(parallel, rf"test_{n} \(qmemsample\.test_more\.Many{n}\.test_{n}\) \.\.\. ok")

    def test_units_are_classes_of_the_package(self) -> None:
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(ParallelRunnerTests)
        units, local = units_of(suite)
        self.assertEqual(list(units), ["tests.test_parallel.ParallelRunnerTests"])
        self.assertEqual(sorted(units["tests.test_parallel.ParallelRunnerTests"]), sorted(t.id() for t in suite))
        self.assertEqual(local, [])
        units, local = units_of(suite, prefix="elsewhere.")
        self.assertEqual((units, len(local)), ({}, suite.countTestCases()))

    def test_a_selection_runs_only_the_selected_tests(self) -> None:
        env = {**os.environ, "QMEM_TEST_WORKERS": "3", "PYTHONPATH": str(REPO)}
        report = self.root / "report-k.txt"
        runner = RUNNER.replace("loader = unittest.TestLoader()",
                                "loader = unittest.TestLoader(); loader.testNamePatterns = ['*test_[0-3]', '*test_a']")
        done = subprocess.run([sys.executable, "-c", runner, str(self.root), str(report)], cwd=str(REPO),
                              env=env, capture_output=True, text=True, timeout=300)
        text = report.read_text(encoding="utf-8")
        self.assertEqual(done.returncode, 0, text + done.stderr)
        self.assertIn("Ran 5 tests", text)


if __name__ == "__main__":
    unittest.main()
