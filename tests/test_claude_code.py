"""End to end with the real Claude Code: qmem installed as a plugin from the repository's marketplace.

``claude plugin marketplace add <clone> && claude plugin install qmem@qmem`` in a throwaway HOME,
then ``claude -p … --output-format json`` from a project full of stdlib-named modules, against the
fake Anthropic Messages API (``ANTHROPIC_BASE_URL``; ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``
and a refused proxy keep everything else on the machine).  Claude Code 2.1.332 defers MCP tools in
``-p`` mode (named in the system prompt, their schemas fetched with ``ToolSearch``) and denies
them unless ``--allowedTools`` names them, so the scripted model selects qmem's tools first.
"""

from __future__ import annotations

import json
import shlex
import unittest
from typing import Any

from .fakes.modelapi import Call, Reply, tool_results
from .hostbench import RECALLED
from .hosts import claude_executable
from .pluginbench import ANSWER, PROJECT, STORED, PluginHostTestCase, store_then_search

PREFIX = "mcp__plugin_qmem_qmem__"  # Claude Code's name for the tools of plugin qmem's server qmem
TOOLS = ("qmem_store", "qmem_search", "qmem_correct", "qmem_meta", "qmem_get")


def tool_names(body: dict[str, Any]) -> set[str]:
    return {tool.get("name") for tool in body.get("tools") or []}


def system_text(body: dict[str, Any]) -> str:
    system = body.get("system")
    text = system if isinstance(system, str) else "".join(part.get("text", "") for part in system or [])
    # Claude Code also puts context into system-role messages
    for message in body.get("messages") or []:
        if message.get("role") == "system":
            content = message.get("content")
            text += content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [])
    return text


class ClaudeCodePluginTests(PluginHostTestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.executable, reason = claude_executable()
        if cls.executable is None:
            raise unittest.SkipTest(reason)

    def setUp(self) -> None:
        super().setUp()
        self.env.update(ANTHROPIC_BASE_URL=self.api.url, ANTHROPIC_API_KEY="dummy",
                        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1")
        select = Call("ToolSearch", {"query": "select:" + ",".join(PREFIX + name for name in ("qmem_store",
                                                                                           "qmem_search"))})
        self.model = store_then_search([select], lambda name: Call(PREFIX + name, {}))

    def script(self, api: str, body: dict[str, Any]) -> Reply:
        if not body.get("stream") or not body.get("tools"):  # a side request (title, summary): a plain answer
            return Reply(text="qmem plugin test")
        return self.model(api, body)

    def install(self) -> None:
        self.host_ok("plugin", "marketplace", "add", str(self.clone))
        self.host_ok("plugin", "install", "qmem@qmem")

    def test_install_run_store_search_uninstall(self):
        self.install()
        claude = self.home / ".claude"
        [copy] = (claude / "plugins" / "cache" / "qmem" / "qmem").iterdir()
        self.assertNotEqual(copy.name, "qmem")  # the copy's folder is the version: no package named qmem
        self.assert_doctor_sees("claude")
        allowed = ",".join(PREFIX + name for name in TOOLS)
        proc = self.host_ok("-p", "remember when deploys run, then look it up", "--output-format", "json",
                            "--allowedTools", allowed)
        result = json.loads(proc.stdout)
        self.assertFalse(result.get("is_error"), result)
        self.assertIn(ANSWER, result["result"])
        self.assertIn(STORED, result["result"])  # qmem_search answered with the stored record
        turns = [body for body in self.api.bodies("messages") if body.get("stream") and body.get("tools")]
        self.assertEqual(len(turns), 4, [tool_names(body) for body in turns])  # select, store, search, answer
        first = system_text(turns[0])
        for name in TOOLS:
            self.assertIn(PREFIX + name, first)  # offered (deferred: named, fetched with ToolSearch)
        for body in turns:
            text = system_text(body)
            self.assertEqual(text.count("## qmem rules"), 1)  # the MCP instructions, once per request
            self.assertIn(f'for this repository use "{PROJECT}"', text)  # the project: the session's directory
            self.assertEqual(text.count("<memory-context"), 1)  # the rule that names the block; no block
        self.assertLessEqual({PREFIX + "qmem_store", PREFIX + "qmem_search"}, tool_names(turns[1]))
        # Claude Code gives the model a result's structuredContent in place of its text
        store_result = json.dumps(turns[2]["messages"][-1])
        self.assertIn('\\"queued\\":true,\\"shared\\":false', store_result)
        self.assert_queued_locally()
        self.assert_nothing_from_the_project()
        transcripts = list((claude / "projects").rglob("*.jsonl"))
        self.assertTrue(transcripts)
        for transcript in transcripts:
            content = transcript.read_text()
            self.assertNotIn("</memory-context>", content)  # no recall block (the rules only name the tag)
            self.assertIn("qmem_store", content)

        self.host_ok("plugin", "uninstall", "qmem@qmem")
        self.host_ok("plugin", "marketplace", "remove", "qmem")
        # Claude Code keeps the copy, marked .orphaned_at, to delete it on a later start
        self.assertTrue((copy / ".orphaned_at").is_file())
        leftovers = [path for path in self.files_mentioning(claude, "qmem")
                     if "/projects/" not in path and "/file-history/" not in path]  # the session's own record
        self.assertEqual({path.split("/")[5] for path in leftovers}, {copy.name}, leftovers)
        self.assertEqual(json.loads((claude / "plugins" / "installed_plugins.json").read_text())["plugins"], {})
        self.assertEqual(self.clone_local("uninstall", "claude").returncode, 0)  # removes what Claude Code left
        self.assertEqual([path for path in self.paths_named_qmem(claude) if "/projects/" not in path], [])

    def test_from_a_git_source_the_server_runs_from_the_copy(self):
        """A Git marketplace is cloned and the plugin copied (a local one is loaded in place): the server
        starts from ~/.claude/plugins/cache/qmem/qmem/<version>, whose folder is not named qmem."""
        self.host_ok("plugin", "marketplace", "add", self.git_source())
        self.host_ok("plugin", "install", "qmem@qmem")
        claude = self.home / ".claude"
        [copy] = (claude / "plugins" / "cache" / "qmem" / "qmem").iterdir()
        proc = self.host_ok("-p", "remember when deploys run, then look it up", "--output-format", "json",
                            "--allowedTools", ",".join(PREFIX + name for name in TOOLS))
        self.assertIn(STORED, json.loads(proc.stdout)["result"])
        self.assert_queued_locally()
        self.assert_nothing_from_the_project()
        ran_from = {path.parent.parent for path in claude.rglob("mcp.cpython-*.pyc")}  # -I writes bytecode
        self.assertEqual(ran_from, {copy})

    def test_memory_search_lane_and_fence(self):
        """QMEM_HOST in Claude Code's environment gives memory_search its lane; its answer reaches the model
        as the fenced block (text, no structuredContent, which Claude Code would show instead)."""
        self.configure_recall()
        steps = [Call("ToolSearch", {"query": "select:" + PREFIX + "memory_search"}),
                 Call(PREFIX + "memory_search", {"query": "blue green deploys"})]
        self.model = lambda api, body: (Reply(calls=[steps[len(tool_results(api, body))]])
                                        if len(tool_results(api, body)) < len(steps) else Reply(text=ANSWER))
        self.install()
        self.host_ok("-p", "what do we know about deploys", "--output-format", "json",
                     "--allowedTools", PREFIX + "memory_search")
        turns = [body for body in self.api.bodies("messages") if body.get("stream") and body.get("tools")]
        self.assertIn(PREFIX + "memory_search", system_text(turns[0]))
        [(_, answer)] = tool_results("messages", turns[-1])[1:]
        self.assertIn('<memory-context trust="untrusted">', answer)
        self.assertIn(RECALLED, answer)

    def test_why_no_hook_recall(self):
        """What a UserPromptSubmit hook adds reaches the model and is also written to the transcript, so an
        automatic recall block from a hook would be persisted: the plugin ships no hooks (README)."""
        mark = "hook-added context 7d1f"
        output = json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": mark}})
        (self.home / ".claude").mkdir(exist_ok=True)
        (self.home / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"UserPromptSubmit": [
            {"hooks": [{"type": "command", "command": f"echo {shlex.quote(output)}"}]}]}}))
        self.model = lambda api, body: Reply(text=ANSWER)
        self.host_ok("-p", "hello", "--output-format", "json")
        self.assertTrue(any(mark in json.dumps(body) for body in self.api.bodies("messages")))
        [transcript] = (self.home / ".claude" / "projects").rglob("*.jsonl")
        self.assertIn(mark, transcript.read_text())

    def test_local_install_and_uninstall(self):
        self.assert_local_install_and_uninstall("claude", self.home / ".claude")

if __name__ == "__main__":
    unittest.main()
