"""The rules suggest a project_id only from a real project: a git work tree, or recall.project."""

import json
import subprocess
import sys

from qmem.hosts.rules import project_suggestion, rules_block

from .support import REPO, TempHomeTestCase, write_config

INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}) + "\n"


class ProjectSuggestionTests(TempHomeTestCase):
    def test_only_a_git_work_tree_or_a_configured_project(self):
        tree = self.home / "work" / "shop"
        (tree / "src" / "deep").mkdir(parents=True)
        (tree / ".git").write_text("gitdir: elsewhere\n")  # a worktree or submodule: .git is a file
        loose = self.home / "notes"
        loose.mkdir()
        cases = [(tree / "src" / "deep", None, "shop"), (tree, None, "shop"), (loose, None, None),
                 (self.home, None, None), (self.home.parent, None, None), ("/", None, None),
                 (loose, "configured", "configured"), ("/", "configured", "configured")]
        for cwd, configured, expected in cases:
            with self.subTest(cwd=cwd, configured=configured):
                self.assertEqual(project_suggestion(cwd, configured, self.home), expected)
        (self.home / ".git").mkdir()  # a home kept in git (dotfiles) is still no project
        self.assertIsNone(project_suggestion(loose, None, self.home))
        self.assertIsNone(project_suggestion(self.home, None, self.home))
        self.assertEqual(project_suggestion(tree, None, self.home), "shop")

    def test_the_rules_without_a_project(self):
        rules = rules_block(None, "box", "Linux")
        self.assertIn("this session is in no project", rules)
        self.assertNotIn("for this repository use", rules)
        self.assertIn('for this repository use "shop"', rules_block("shop", "box", "Linux"))

    def instructions(self, cwd):
        proc = subprocess.run([sys.executable, "-P", "-m", "qmem.mcp"], input=INITIALIZE, cwd=cwd, env=self.env,
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return json.loads(proc.stdout.splitlines()[0])["result"]["instructions"]

    def test_an_mcp_server_started_in_root_or_home_suggests_none(self):
        self.env["PYTHONPATH"] = str(REPO)
        for cwd in ("/", self.home):
            with self.subTest(cwd=cwd):
                instructions = self.instructions(cwd)
                self.assertIn("this session is in no project", instructions)
                self.assertNotIn("for this repository use", instructions)
        self.assertIn(f'for this repository use "{REPO.name}"', self.instructions(REPO))  # a git work tree
        write_config(self.env, {"recall": {"project": "configured-project"}})
        self.assertIn('for this repository use "configured-project"', self.instructions("/"))
