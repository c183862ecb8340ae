"""The entry points: one version everywhere, console scripts that run, one line on a Python that is too old."""

import json
import re
import subprocess
import sys
import unittest
from pathlib import Path

import qmem
from qmem.entryguard import unsupported_message

from .support import REPO, TempHomeTestCase

#: An interpreter older than qmem supports, when this machine has one (pyenv layout).
OLD_PYTHON = Path("/root/.pyenv/versions/3.9.18/bin/python")
ENTRY_POINTS = ("qmem.local", "qmem.admin", "qmem.mcp", "qmem.bridge")


def _pyproject() -> str:
    return (REPO / "pyproject.toml").read_text(encoding="utf-8")


def _scripts() -> dict[str, str]:
    section = _pyproject().split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    return dict(re.findall(r'^([\w-]+)\s*=\s*"([\w.:]+)"', section, re.M))


class VersionTests(unittest.TestCase):
    def test_one_version_everywhere(self):
        version = qmem.__version__
        self.assertRegex(version, r"^\d+\.\d+\.\d+")
        self.assertEqual(re.search(r'^version\s*=\s*"([^"]+)"', _pyproject(), re.M).group(1), version)
        self.assertEqual(json.loads((REPO / "qmem" / "package.json").read_text())["version"], version)
        self.assertEqual(json.loads((REPO / "package.json").read_text())["version"], version)
        self.assertRegex((REPO / "qmem" / "plugin.yaml").read_text(), rf'(?m)^version: "{re.escape(version)}"$')

    def test_the_root_manifest_is_for_pi_install_only(self):
        """`pi install <clone>` / `git:` read it; npm runs a git install's lifecycle scripts, so it has none."""
        manifest = json.loads((REPO / "package.json").read_text())
        self.assertEqual(manifest["pi"], {"extensions": ["qmem/index.js"], "skills": ["qmem/skills"]})
        self.assertTrue(manifest["private"])
        self.assertEqual(set(manifest) - {"name", "version", "private", "description", "license", "pi"}, set())

    def test_the_init_file_stays_short_for_hermes(self):
        self.assertLess(len((REPO / "qmem" / "__init__.py").read_bytes()), 8192)


class ConsoleScriptTests(TempHomeTestCase):
    def test_every_console_script_runs_its_version(self):
        scripts = _scripts()
        self.assertEqual(set(scripts), {"qmem-local", "qmem-admin", "qmem-mcp"})
        for name, target in scripts.items():
            module, function = target.split(":")
            with self.subTest(script=name):
                # What the installed wrapper does: import the module, call the function with argv set.
                code = (f"import sys; sys.argv = [{name!r}, '--version']; from {module} import {function}; "
                        f"sys.exit({function}())")
                proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=self.env,
                                      cwd=self.home, timeout=60)
                self.assertEqual((proc.returncode, proc.stdout, proc.stderr), (0, f"{name} {qmem.__version__}\n", ""))


class OldPythonTests(TempHomeTestCase):
    def test_the_message(self):
        self.assertEqual(unsupported_message((3, 9)), "qmem needs Python ≥ 3.10, found 3.9")
        self.assertEqual(unsupported_message((3, 8), " (set QMEM_PYTHON)"),
                         "qmem needs Python ≥ 3.10, found 3.8 (set QMEM_PYTHON)")

    def test_every_entry_point_prints_one_line_and_exits_1(self):
        if not OLD_PYTHON.exists():
            self.skipTest(f"no Python 3.9 at {OLD_PYTHON} to run the entry points with")
        self.run_module("qmem.local", "store", "--queue-only", "--project", "p", "--text", "made by 3.11")
        cases = [(module, args) for module in ENTRY_POINTS for args in ([],)]
        cases += [("qmem.local", ["find", "made"]), ("qmem.local", ["queue"]), ("qmem.local", ["--version"]),
                  ("qmem.admin", ["status", "--json"])]
        for module, args in cases:
            with self.subTest(module=module, args=args):
                proc = subprocess.run([str(OLD_PYTHON), "-m", module, *args], capture_output=True, text=True,
                                      env=self.env, cwd=self.home, input='{"id": 1, "method": "ping"}\n', timeout=60)
                hint = " (set QMEM_PYTHON)" if module == "qmem.bridge" else ""
                self.assertEqual((proc.returncode, proc.stdout, proc.stderr),
                                 (1, "", f"qmem needs Python ≥ 3.10, found 3.9{hint}\n"))
