"""Under CI an installed host's tests cannot skip, and every run ends with its skips in one line."""

import ast
import io
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from .hostguard import HostSkippedUnderCI, SkipGuardSuite, host_of, skip_summary
from .hosts import PI, REAL_HOSTS, Host
from .support import REPO, clean_env

HOST_LOOKUPS = {"pi_executable", "prime_executable", "prime_kernel_python", "mcp_python", "mcp1_python",
                "inspector_executable", "hermes_python", "venv_python", "claude_executable", "codex_executable",
                "npm_executable"}


def sample_case():
    """A host test class that skips once in setUpClass, and one that skips inside a test."""
    class SkipsInSetUpClass(unittest.TestCase):
        @classmethod
        def setUpClass(cls):
            raise unittest.SkipTest("the sample host is not installed")

        def test_never_runs(self):
            raise AssertionError("setUpClass skipped")

    class SkipsInATest(unittest.TestCase):
        def test_skips(self):
            self.skipTest("the sample host is not installed")

        def test_passes(self):
            pass

    return SkipsInSetUpClass, SkipsInATest


class SkipGuardSuiteTests(unittest.TestCase):
    def setUp(self):
        self.root = Path(tempfile.mkdtemp(prefix="qmem-hosts-"))
        self.addCleanup(__import__("shutil").rmtree, self.root, True)
        self.classes = sample_case()
        prefixes = tuple(f"{c.__module__}.{c.__qualname__}" for c in self.classes)
        self.host = Host("sample-1.0", "QMEM_TEST_SAMPLE", prefixes, root=self.root)

    def run_guarded(self, env, marker):
        if marker:
            (self.root / "sample-1.0").mkdir()
            self.host.marker.touch()
        loader = unittest.TestLoader()
        suite = SkipGuardSuite([loader.loadTestsFromTestCase(c) for c in self.classes], hosts=[self.host], env=env)
        stream = io.StringIO()
        result = unittest.TextTestRunner(stream=stream, verbosity=0).run(suite)
        return result, stream.getvalue()

    def test_under_ci_a_skip_of_an_installed_host_fails(self):
        result, output = self.run_guarded({"CI": "true"}, marker=True)
        self.assertEqual((len(result.failures), len(result.skipped), result.testsRun), (2, 0, 2))
        self.assertIn("FAIL: setUpClass (", output)
        self.assertIn(HostSkippedUnderCI.__name__, output)
        self.assertIn("sample-1.0 is installed", output)
        self.assertIn("skips: none (CI: installed hosts must run: sample-1.0)", output)

    def test_without_the_marker_or_outside_ci_a_skip_stays_a_skip(self):
        for env, marker in (({"CI": "true"}, False), ({}, True), ({"CI": "false"}, True)):
            with self.subTest(env=env, marker=marker):
                if self.host.marker.exists():
                    self.host.marker.unlink()
                    self.host.marker.parent.rmdir()
                result, output = self.run_guarded(env, marker)
                self.assertTrue(result.wasSuccessful())
                self.assertEqual(len(result.skipped), 2)
                lines = output.splitlines()
                summary = lines.index("skips: 2 — 2 × the sample host is not installed")
                self.assertTrue(lines[summary + 2].startswith("Ran 2 tests"), lines)  # at the end, before the totals

    def test_an_override_counts_as_installed(self):
        result, _ = self.run_guarded({"CI": "true", "QMEM_TEST_SAMPLE": "/somewhere/sample"}, marker=False)
        self.assertEqual(len(result.failures), 2)

    def test_summary_groups_reasons_most_frequent_first(self):
        self.assertEqual(skip_summary(["b", "a", "b"], []), "skips: 3 — 2 × b; 1 × a")
        self.assertEqual(skip_summary([], []), "skips: none")

    def test_longest_prefix_wins(self):
        self.assertEqual(host_of("tests.test_prime_host.PrimeKernelTests.test_x").directory, "prime-kernel-0.8.0")
        self.assertEqual(host_of("tests.test_prime_host.PrimeHostTests.test_x").directory, "prime-agent-0.8.0")
        self.assertIsNone(host_of("tests.test_prime_hostile.Tests.test_x"))


class ReadmeCommandTests(unittest.TestCase):
    """The real wiring: ``python -m unittest``'s discovery goes through ``tests/__init__.py``."""

    def discover_pi_tests(self, hosts: Path, ci: bool) -> subprocess.CompletedProcess:
        env = clean_env(Path(tempfile.gettempdir()), QMEM_TEST_HOSTS=str(hosts))
        env.pop("CI", None)
        if ci:
            env["CI"] = "true"
        # `discover -p` is `python -m unittest` restricted to one module, so that this stays fast.
        return subprocess.run([sys.executable, "-m", "unittest", "discover", "-p", "test_pi_host.py"], cwd=REPO,
                              env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)

    def test_a_marker_without_a_working_host_fails_under_ci(self):
        hosts = Path(tempfile.mkdtemp(prefix="qmem-hosts-"))
        self.addCleanup(__import__("shutil").rmtree, hosts, True)
        (hosts / PI.directory).mkdir()
        (hosts / PI.directory / ".installed").touch()  # a marker, but no pi behind it
        failed = self.discover_pi_tests(hosts, ci=True)
        self.assertEqual(failed.returncode, 1, failed.stderr)
        self.assertIn("FAIL: setUpClass (tests.test_pi_host.PiHostTests)", failed.stderr)
        self.assertIn(f"skips: none (CI: installed hosts must run: {PI.directory})", failed.stderr)
        passed = self.discover_pi_tests(hosts, ci=False)
        self.assertEqual(passed.returncode, 0, passed.stderr)
        self.assertRegex(passed.stderr, r"skips: 1 — 1 × (pi 0\.73\.1 is not installed|node is not installed)")
        (hosts / PI.directory / ".installed").unlink()
        absent = self.discover_pi_tests(hosts, ci=True)
        self.assertEqual(absent.returncode, 0, absent.stderr)
        self.assertIn("skips: 1 — 1 × ", absent.stderr)

    def test_every_module_that_needs_a_real_host_is_guarded(self):
        guarded = {prefix for host in REAL_HOSTS for prefix in host.tests}
        needing = set()
        for path in sorted((REPO / "tests").glob("test_*.py")):
            module = f"tests.{path.stem}"
            lookups = {alias.name for node in ast.walk(ast.parse(path.read_text()))
                       if isinstance(node, ast.ImportFrom) and node.module == "hosts"
                       for alias in node.names} & HOST_LOOKUPS
            if lookups:
                needing.add(module)
                with self.subTest(module):
                    self.assertTrue(any(p == module or p.startswith(module + ".") for p in guarded), lookups)
        self.assertLessEqual({"tests.test_pi_host", "tests.test_prime_host", "tests.test_mcp", "tests.test_hermes"},
                             needing)


if __name__ == "__main__":
    unittest.main()
