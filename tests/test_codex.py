"""End to end with the real Codex: qmem installed as a plugin from the repository's marketplace.

``codex plugin marketplace add <clone> && codex plugin add qmem@qmem`` with a throwaway
``CODEX_HOME``, then ``codex exec --skip-git-repo-check`` from a project full of stdlib-named
modules, against the fake OpenAI Responses API (a ``model_provider`` whose ``base_url`` is the
fake; a refused proxy keeps Codex's own update and plugin-catalogue requests on the machine).
Codex 0.171.0 offers a plugin's MCP tools in a namespace (``mcp__qmem``) whose description is the
server's MCP ``instructions``, and asks before an MCP tool call unless the server's tools are
approved (``mcp_servers.qmem.default_tools_approval_mode``; ``codex exec`` cannot ask).
"""

from __future__ import annotations

import json
import unittest
from typing import Any

from .fakes.modelapi import Call, Reply, tool_results
from .hostbench import RECALLED
from .hosts import codex_executable
from .pluginbench import ANSWER, STORED, PluginHostTestCase, store_then_search

NAMESPACE = "mcp__qmem"
TOOLS = ("qmem_store", "qmem_search", "qmem_correct", "qmem_meta", "qmem_get")


def namespace_of(body: dict[str, Any]) -> dict[str, Any] | None:
    return next((tool for tool in body.get("tools") or []
                 if tool.get("type") == "namespace" and tool.get("name") == NAMESPACE), None)


class CodexPluginTests(PluginHostTestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.executable, reason = codex_executable()
        if cls.executable is None:
            raise unittest.SkipTest(reason)

    def setUp(self) -> None:
        super().setUp()
        self.codex_home = self.home / ".codex"
        self.codex_home.mkdir()
        (self.codex_home / "config.toml").write_text("\n".join([
            'model = "fake-model"', 'model_provider = "fake"', "check_for_update_on_startup = false", "",
            "[model_providers.fake]", 'name = "fake"', f'base_url = "{self.api.url}/v1"', 'wire_api = "responses"',
            'env_key = "FAKE_MODEL_KEY"', "request_max_retries = 0", "stream_max_retries = 0", "", ""]))
        self.env.update(CODEX_HOME=str(self.codex_home), FAKE_MODEL_KEY="dummy")
        self.model = store_then_search([], lambda name: Call(name, {}, namespace=NAMESPACE))

    def script(self, api: str, body: dict[str, Any]) -> Reply:
        return self.model(api, body)

    def test_install_run_store_search_uninstall(self):
        self.host_ok("plugin", "marketplace", "add", str(self.clone))
        self.host_ok("plugin", "add", "qmem@qmem")
        [copy] = (self.codex_home / "plugins" / "cache" / "qmem" / "qmem").iterdir()
        self.assertNotEqual(copy.name, "qmem")  # the copy's folder is the version: no package named qmem
        self.assert_doctor_sees("codex")
        with (self.codex_home / "config.toml").open("a") as config:  # what the README tells a user of codex exec
            config.write('\n[plugins."qmem@qmem".mcp_servers.qmem]\ndefault_tools_approval_mode = "approve"\n')
        proc = self.host_ok("exec", "--skip-git-repo-check", "remember when deploys run, then look it up")
        self.assertIn(ANSWER, proc.stdout)
        self.assertIn(STORED, proc.stdout)  # qmem_search answered with the stored record
        turns = self.api.bodies("responses")
        self.assertEqual(len(turns), 3, proc.stderr)  # store, search, answer
        for body in turns:
            namespace = namespace_of(body)
            self.assertIsNotNone(namespace, [tool.get("name") for tool in body.get("tools") or []])
            self.assertLessEqual(set(TOOLS), {tool["name"] for tool in namespace["tools"]})
            rules = json.dumps(body).count("## qmem rules")
            self.assertEqual(rules, 1)  # the MCP instructions, as the namespace's description, once
            self.assertIn("## qmem rules", namespace["description"])
            self.assertIn("this host does not tell qmem which project", namespace["description"])
        outputs = [item for item in turns[1]["input"] if item.get("type") == "function_call_output"]
        # Codex gives the model a result's structuredContent in place of its text
        self.assertIn('\\"queued\\":true,\\"shared\\":false', json.dumps(outputs))
        self.assert_queued_locally()
        self.assert_nothing_from_the_project()
        rollouts = list((self.codex_home / "sessions").rglob("*.jsonl"))
        self.assertTrue(rollouts)
        for rollout in rollouts:
            content = rollout.read_text()
            self.assertNotIn("</memory-context>", content)  # no recall block (the rules only name the tag)
            self.assertIn("qmem_store", content)

        self.host_ok("plugin", "remove", "qmem@qmem")
        self.host_ok("plugin", "marketplace", "remove", "qmem")
        leftovers = [path for path in self.files_mentioning(self.codex_home, "qmem")
                     # the session's own record: Codex's history database, with its write-ahead log when
                     # it has not been checkpointed yet
                     if "/sessions/" not in path and not path.endswith((".sqlite", ".sqlite-wal", ".sqlite-shm"))]
        self.assertEqual(leftovers, [])
        # Codex leaves the marketplace's cache folder, empty (measured with 0.171.0)
        self.assertEqual([p for p in self.paths_named_qmem(self.codex_home) if "/sessions/" not in p],
                         [".codex/plugins/cache/qmem"])
        self.assertEqual(list((self.codex_home / "plugins" / "cache" / "qmem").iterdir()), [])
        self.assertEqual(self.clone_local("uninstall", "codex").returncode, 0)  # removes what Codex left
        self.assertEqual([p for p in self.paths_named_qmem(self.codex_home) if "/sessions/" not in p], [])

    def test_from_a_git_source(self):
        self.host_ok("plugin", "marketplace", "add", self.git_source())
        self.host_ok("plugin", "add", "qmem@qmem")
        self.assert_doctor_sees("codex")

    def test_memory_search_lane_and_fence(self):
        """QMEM_HOST reaches the server through env_vars, so memory_search is offered and searches pi's
        curated memories; its answer reaches the model as the fenced block (text, no structuredContent)."""
        self.configure_recall()
        self.model = lambda api, body: (Reply(calls=[Call("memory_search", {"query": "blue green deploys"},
                                                          namespace=NAMESPACE)])
                                        if not tool_results(api, body) else Reply(text=ANSWER))
        self.host_ok("plugin", "marketplace", "add", str(self.clone))
        self.host_ok("plugin", "add", "qmem@qmem")
        with (self.codex_home / "config.toml").open("a") as config:
            config.write('\n[plugins."qmem@qmem".mcp_servers.qmem]\ndefault_tools_approval_mode = "approve"\n')
        self.host_ok("exec", "--skip-git-repo-check", "what do we know about deploys")
        first, second = self.api.bodies("responses")
        self.assertIn("memory_search", {tool["name"] for tool in namespace_of(first)["tools"]})
        [(_, answer)] = tool_results("responses", second)
        self.assertIn('<memory-context trust="untrusted">', answer)
        self.assertIn(RECALLED, answer)
        self.assertIn("</memory-context>", answer)

    def test_local_install_and_uninstall(self):
        self.assert_local_install_and_uninstall("codex", self.codex_home)


if __name__ == "__main__":
    unittest.main()
