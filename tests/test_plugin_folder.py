"""The plugin folder Claude Code and Codex install, without the hosts: its files, and its MCP entry
started the way each host starts it, from a copy whose folder is not named ``qmem``.

The real hosts run it in ``tests/test_claude_code.py`` and ``tests/test_codex.py``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from qmem import __version__
from qmem.setup.pluginentry import ENV_VARS, expand_for_host, mcp_document

from .shadowing import clean_python, make_shadow_project, markers
from .support import REPO, clean_env

OLD_PYTHONS = sorted(Path("/root/.pyenv/versions").glob("3.[6-9].*/bin/python3"))


def read(path: str) -> dict:
    return json.loads((REPO / path).read_text())


class PluginFilesTests(unittest.TestCase):
    def test_the_entry_file_is_the_documented_entry(self):
        self.assertEqual(read("qmem/.mcp.json"), mcp_document())

    def test_manifests_name_the_plugin_and_this_version(self):
        market = read(".claude-plugin/marketplace.json")
        self.assertEqual(market["name"], "qmem")
        [plugin] = market["plugins"]
        self.assertEqual((plugin["name"], plugin["source"], plugin["version"]), ("qmem", "./qmem", __version__))
        for path in ("qmem/.claude-plugin/plugin.json", "qmem/.codex-plugin/plugin.json"):
            manifest = read(path)
            self.assertEqual((manifest["name"], manifest["version"]), ("qmem", __version__), path)
        codex = read("qmem/.codex-plugin/plugin.json")
        self.assertEqual((codex["skills"], codex["mcpServers"]), ("./skills/", "./.mcp.json"))
        self.assertTrue((REPO / "qmem" / "skills" / "qmem" / "SKILL.md").is_file())

    def test_every_credential_variable_is_named(self):
        for name in ("QMEM_GATEWAY_API_KEY", "QMEM_QDRANT_API_KEY", "QMEM_EMBEDDING_API_KEY", "QMEM_HOST"):
            self.assertIn(name, ENV_VARS)


class PluginEntryTests(unittest.TestCase):
    """The entry, from a copy named ``0.1.0``, in a project full of stdlib-named modules."""

    def setUp(self):
        self.python, reason = clean_python(minimum=(3, 10))
        if self.python is None:
            self.skipTest(reason)
        self.home = Path(tempfile.mkdtemp(prefix="plugin-entry-"))
        self.addCleanup(shutil.rmtree, self.home, True)
        self.copy = self.home / "cache" / "qmem" / "qmem" / __version__
        shutil.copytree(REPO / "qmem", self.copy, ignore=shutil.ignore_patterns("__pycache__"))
        self.markers = self.home / "markers"
        self.work = make_shadow_project(self.home / "work" / "entryproj", self.markers)
        self.env = clean_env(self.home)
        self.env.pop("PYTHONPATH")
        self.entry = mcp_document()["mcpServers"]["qmem"]

    def start(self, host: str, *extra: str, python: Path | None = None) -> subprocess.CompletedProcess:
        argv, cwd = expand_for_host(self.entry, host, str(self.copy))
        argv[0] = str(python or self.python)
        handshake = "\n".join(json.dumps(m) for m in [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]) + "\n"
        return subprocess.run([*argv, *extra], cwd=cwd or self.work, env=self.env, input=handshake,
                              capture_output=True, text=True, timeout=60)

    def answers(self, proc: subprocess.CompletedProcess) -> list[dict]:
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return [json.loads(line) for line in proc.stdout.splitlines()]

    def test_claude_code_way_the_project_is_the_working_directory(self):
        initialize, tools = self.answers(self.start("claude"))
        rules = initialize["result"]["instructions"]
        self.assertIn('for this repository use "entryproj"', rules)
        self.assertIn("qmem_store", {tool["name"] for tool in tools["result"]["tools"]})
        self.assertEqual(markers(self.markers), {})

    def test_codex_way_the_copy_is_never_the_project(self):
        (self.copy / ".git").mkdir()  # even a copy that looks like a work tree
        initialize, _ = self.answers(self.start("codex"))
        rules = initialize["result"]["instructions"]
        self.assertIn("this host does not tell qmem which project", rules)
        self.assertNotIn(__version__, rules.split("### Machine")[0])
        self.assertEqual(markers(self.markers), {})

    def test_configured_project_wins_where_the_host_does_not_tell(self):
        config = self.home / ".config" / "qmem" / "config.json"
        config.parent.mkdir(parents=True)
        config.write_text(json.dumps({"recall": {"project": "configured-proj"}}))
        initialize, _ = self.answers(self.start("codex"))
        self.assertIn('for this repository use "configured-proj"', initialize["result"]["instructions"])

    def test_version_through_the_entry(self):
        argv, cwd = expand_for_host(self.entry, "codex", str(self.copy))
        proc = subprocess.run([str(self.python), *argv[1:], "--version"], cwd=cwd, env=self.env,
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.stdout.strip(), f"qmem-mcp {__version__}", proc.stderr)

    def test_no_plugin_folder_is_one_line(self):
        argv, _ = expand_for_host(self.entry, "codex", str(self.copy))
        proc = subprocess.run([str(self.python), *argv[1:]], cwd=self.work, env=self.env, capture_output=True,
                              text=True, timeout=60)
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        self.assertIn("the plugin folder is missing", proc.stderr)
        self.assertEqual(markers(self.markers), {})

    def test_an_old_python_is_refused_in_one_line(self):
        if not OLD_PYTHONS:
            self.skipTest("no Python 3.6-3.9 on this machine")
        for python in OLD_PYTHONS:
            with self.subTest(str(python)):
                proc = self.start("claude", python=python)
                self.assertEqual(proc.returncode, 1)
                self.assertEqual(proc.stdout, "")
                self.assertRegex(proc.stderr.strip(), r"^qmem needs Python \u2265 3\.10, found 3\.\d$")


class DoctorPluginTests(unittest.TestCase):
    """doctor on installs laid out as Claude Code 2.1.332 and Codex 0.171.0 lay them out (measured)."""

    def setUp(self):
        self.home = Path(tempfile.mkdtemp(prefix="plugin-doctor-"))
        self.addCleanup(shutil.rmtree, self.home, True)
        self.env = clean_env(self.home)
        self.claude_copy = self.home / ".claude" / "plugins" / "cache" / "qmem" / "qmem" / __version__
        self.codex_copy = self.home / ".codex" / "plugins" / "cache" / "qmem" / "qmem" / __version__
        for copy in (self.claude_copy, self.codex_copy):
            shutil.copytree(REPO / "qmem", copy, ignore=shutil.ignore_patterns("__pycache__"))
        plugins = self.home / ".claude" / "plugins"
        (plugins / "installed_plugins.json").write_text(json.dumps({"version": 2, "plugins": {"qmem@qmem": [
            {"scope": "user", "installPath": str(self.claude_copy), "version": __version__}]}}))
        (self.home / ".claude" / "settings.json").write_text(json.dumps({"enabledPlugins": {"qmem@qmem": True}}))
        (self.home / ".codex" / "config.toml").write_text('[plugins."qmem@qmem"]\nenabled = true\n')

    def doctor(self) -> tuple[int, dict]:
        proc = subprocess.run([sys.executable, "-m", "qmem.local", "doctor", "--json"], cwd=self.home, env=self.env,
                              capture_output=True, text=True, timeout=120)
        return proc.returncode, json.loads(proc.stdout)

    def test_both_installs_start(self):
        code, report = self.doctor()
        plugins = report["plugins"]
        self.assertEqual([c["starts"] for c in plugins["claude"]["copies"]], [True])
        self.assertEqual([c["starts"] for c in plugins["codex"]["copies"]], [True])
        self.assertTrue(plugins["claude"]["enabled"])
        self.assertFalse([p for p in report["problems"] if "plugin" in p], report["problems"])

    def test_a_copy_that_would_not_start_is_a_problem(self):
        (self.codex_copy / "mcp.py").unlink()
        code, report = self.doctor()
        self.assertEqual(code, 1)
        [problem] = [p for p in report["problems"] if "Codex plugin" in p]
        self.assertIn("would not start", problem)
        self.assertIn("the plugin folder is missing", problem)

    def test_an_orphaned_copy_is_a_warning(self):
        (self.claude_copy / ".orphaned_at").write_text("1")
        (self.home / ".claude" / "plugins" / "installed_plugins.json").write_text('{"version": 2, "plugins": {}}')
        code, report = self.doctor()
        self.assertTrue(any("left from an uninstall" in w for w in report["warnings"]), report["warnings"])
        self.assertFalse(report["plugins"]["claude"]["installed"])


if __name__ == "__main__":
    unittest.main()
