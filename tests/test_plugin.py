"""The host-neutral plugin core: definitions, hooks and commands (real fakes, real files)."""

import json
import os
import stat
import unittest
from pathlib import Path

from qmem.diagnostics import SENTENCES, Warnings
from qmem.errors import QmemError
from qmem.hosts.rules import machine_identity, rules_block
from qmem.hosts.session import PluginSession
from qmem.hosts.tools import TOOLS, tools_document
from qmem.store import ToolError

from .support import GatewayTestCase, REPO, TempHomeTestCase, write_config


class ScriptedUI:
    """A host UI that answers from a script and records what it was asked."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.asked = []
        self.notes = []

    def _next(self, kind, *args):
        self.asked.append((kind, *args))
        return self.answers.pop(0) if self.answers else None

    def select(self, title, options):
        return self._next("select", title, tuple(options))

    def input(self, title, placeholder=""):
        return self._next("input", title)

    def confirm(self, title, message):
        return bool(self._next("confirm", title))

    def notify(self, message, level="info"):
        self.notes.append((message, level))


class DefinitionTests(unittest.TestCase):
    def test_tools_json_is_generated_from_the_python_definitions(self):
        on_disk = json.loads((REPO / "qmem" / "tools.json").read_text())
        self.assertEqual(on_disk, tools_document(), "regenerate: python3 -m qmem.hosts.tools --tools-json > qmem/tools.json")

    def test_every_tool_is_complete(self):
        self.assertEqual([t.name for t in TOOLS],
                         ["qmem_store", "qmem_search", "qmem_correct", "qmem_meta", "qmem_get", "memory_search"])
        for tool in TOOLS:
            with self.subTest(tool=tool.name):
                self.assertTrue(tool.label and tool.description and tool.prompt_snippet)
                self.assertTrue(tool.prompt_guidelines)
                self.assertTrue(all(tool.name in line or "memory" in line for line in tool.prompt_guidelines))
                self.assertEqual(tool.parameters["type"], "object")
                self.assertIs(tool.parameters["additionalProperties"], False)
                self.assertTrue(set(tool.parameters["required"]) <= set(tool.parameters["properties"]))
        by_name = {t.name: t for t in TOOLS}
        self.assertIn("project_id", by_name["qmem_store"].parameters["required"])
        self.assertEqual({t.name for t in TOOLS if t.read_only}, {"qmem_search", "qmem_meta", "qmem_get",
                                                                 "memory_search"})
        guidance = " ".join(line for t in TOOLS for line in t.prompt_guidelines)
        for rule in ("project_id", "0.60", "0.45", "qmem_correct", "qmem_meta", "untrusted"):
            self.assertIn(rule, guidance)

    def test_descriptions_are_accurate_and_complete(self):
        by_name = {t.name: t for t in TOOLS}
        for tool in TOOLS:
            for name, schema in tool.parameters["properties"].items():
                with self.subTest(tool=tool.name, parameter=name):
                    self.assertTrue(schema.get("description"), f"{tool.name}.{name} is not described")
        search = by_name["qmem_search"].parameters["properties"]
        self.assertNotIn("default", search["kind"]["description"])  # a filter has no default kind
        self.assertIn("omit for every kind", search["kind"]["description"])
        self.assertIn("local fallback", search["min_score"]["description"])
        self.assertIn("records without a scope do not match", search["scope"]["description"])
        self.assertIn("default 10", search["top_k"]["description"])
        self.assertIn("memory_search", by_name["qmem_search"].description)  # when to use which
        self.assertIn("qmem_search", by_name["memory_search"].description)
        self.assertEqual([t.name for t in TOOLS if t.needs_recall], ["memory_search"])
        self.assertTrue(tools_document()["tools"][-1]["needsRecall"])

    def test_skill_frontmatter(self):
        text = (REPO / "qmem" / "skills" / "qmem" / "SKILL.md").read_text()
        head = text.split("---")[1]
        self.assertIn("\nname: qmem\n", head)
        self.assertRegex(head, r"\ndescription: \S.{20,1000}\n")

    def test_package_manifest(self):
        manifest = json.loads((REPO / "qmem" / "package.json").read_text())
        self.assertEqual(manifest["pi"], {"extensions": ["./index.js"], "skills": ["./skills"]})
        self.assertEqual(manifest.get("dependencies", {}), {})

    def test_rules_block(self):
        block = rules_block("myproj", "box-7", "Debian GNU/Linux 12")
        for fragment in ("project_id", '"myproj"', "0.60", "qmem_correct", "qmem_meta", "box-7",
                         "Debian GNU/Linux 12", "Machine identification", "untrusted"):
            self.assertIn(fragment, block)
        self.assertNotIn("memory_search searches", block)
        self.assertIn("memory_search searches the curated collection",
                      rules_block("myproj", "box-7", "Debian", memory_search=True))


class SessionTests(TempHomeTestCase):
    def session(self, host="pi"):
        (self.home / "repo" / ".git").mkdir(parents=True, exist_ok=True)
        said = []
        session = PluginSession(host=host, cwd=self.home / "repo", env=dict(self.env), warnings=Warnings(said.append))
        self.addCleanup(session.close)
        return session, said

    def test_rules_only_while_qmem_tools_are_active(self):
        session, _ = self.session()
        block = session.system_prompt_addition(["read", "qmem_search"])
        self.assertIn('"repo"', block)
        self.assertIn(machine_identity()[0], block)
        self.assertIsNone(session.system_prompt_addition(["read", "bash"]))
        self.assertIsNotNone(session.system_prompt_addition(None))
        # Built once per session, not re-read from the disk before every prompt.
        self.assertIs(session.system_prompt_addition(None), block)

    def test_tools_through_the_session(self):
        session, _ = self.session()
        result = session.call_tool("qmem_store", {"text": "plugin note", "project_id": "repo"})
        self.assertEqual(result["content"][0]["type"], "text")
        self.assertTrue(result["details"]["queued"])
        found = session.call_tool("qmem_search", {"query": "plugin note"})
        self.assertEqual(found["details"]["fallback"], "local_sqlite")
        with self.assertRaises(ToolError):
            session.call_tool("rm_rf", {})
        with self.assertRaises(QmemError):
            session.call_tool("qmem_store", {"text": "no project"})
        anonymous, _ = self.session(host=None)
        with self.assertRaises(QmemError) as caught:
            anonymous.call_tool("memory_search", {"query": "anything"})
        # Recall is off until both service URLs are in the config: that is what the answer says.
        self.assertIn("not configured", str(caught.exception))

    def test_memory_search_is_offered_only_where_recall_is_on_for_a_host(self):
        def offered(host):
            session, _ = self.session(host=host)
            return [tool.name for tool in session.offered_tools()], session.recall_offered()

        self.assertEqual(offered("pi"), (["qmem_store", "qmem_search", "qmem_correct", "qmem_meta", "qmem_get"],
                                         False))
        write_config(self.env, {"recall": {"qdrantUrl": "http://127.0.0.1:9", "embeddingsUrl": "http://127.0.0.1:9"}})
        self.assertEqual(offered("prime")[1], True)
        self.assertIn("memory_search", offered("pi")[0])
        self.assertEqual(offered(None)[1], False)
        session, _ = self.session(host="pi")
        self.assertIn("memory_search searches the curated collection", session.system_prompt_addition(None))
        write_config(self.env, {"recall": "broken"})
        self.assertEqual(offered("pi")[1], False)  # a broken config offers nothing, and does not raise

    def test_auto_recall_never_raises(self):
        session, said = self.session()
        self.assertIsNone(session.auto_recall("anything"))  # recall not configured: nothing sent, nothing said
        self.assertEqual(said, [])
        write_config(self.env, {"recall": "broken"})
        broken, said = self.session()
        self.assertIsNone(broken.auto_recall("anything"))
        self.assertEqual(said, [SENTENCES["configuration"]])

    def test_text_that_is_not_unicode_is_refused_before_any_tool_runs(self):
        session, _ = self.session()
        for args in ({"query": "bad \udcff"}, {"query": "ok", "project_id": "\ud800"},
                     {"query": "ok", "nested": {"deep": ["\udfff"]}}, {"\udc80": "x", "query": "ok"}):
            with self.subTest(args=args):
                with self.assertRaises(QmemError) as caught:
                    session.call_tool("qmem_search", args)
                self.assertEqual(caught.exception.category, "input")
                self.assertIn("not valid Unicode text", caught.exception.message)

    def test_local_command_shares_the_cli(self):
        session, _ = self.session()
        session.call_tool("qmem_store", {"text": "shared cli note", "project_id": "repo"})
        self.assertIn("shared cli note", session.command("qmem:local", "find shared"))
        self.assertIn("pending 1", session.command("qmem:local", "queue"))
        self.assertIn("records", session.command("qmem:local", ""))
        self.assertIn("qmem:local:", session.command("qmem:local", "find"))  # usage error, one line
        self.assertIn("qmem:local:", session.command("qmem:local", 'find "unbalanced'))


class ConfigCommandTests(GatewayTestCase):
    def session(self):
        session = PluginSession(host="pi", cwd=self.home, env=dict(self.env))
        self.addCleanup(session.close)
        return session

    def config_file(self) -> Path:
        return self.home / ".config" / "qmem" / "config.json"

    def test_quick_mode(self):
        session = self.session()
        self.assertIn("connected", session.command("qmem:config", "test"))
        self.assertIn("2.12.0", session.command("qmem:config", "test"))
        self.assertIn("not saved", session.command("qmem:config", "url https://user:pw@example.com"))
        self.assertIn("saved", session.command("qmem:config", f"url {self.gateway.url}/"))
        self.assertEqual(stat.S_IMODE(os.stat(self.config_file()).st_mode), 0o600)
        answer = session.command("qmem:config", "apikey brand-new-key")
        self.assertIn("this process only", answer)
        self.assertIn("export QMEM_GATEWAY_API_KEY", answer)
        self.assertNotIn("brand-new-key", answer)
        self.assertIn("refused the API key", session.command("qmem:config", "test"))  # the new key is wrong
        self.assertNotIn("brand-new-key", self.config_file().read_text())
        shown = session.command("qmem:config", "show")
        self.assertNotIn("brand-new-key", shown)
        self.assertIn('"QMEM_GATEWAY_API_KEY": "set"', shown)
        self.assertIn("usage", session.command("qmem:config", "frobnicate"))

    def test_show_names_the_family_of_a_credential_in_a_non_secret_field(self):
        token = "ghp_" + "Zq7vX2mN9pL4kR8sT1wY6bC3dF5gH0jK2aE8"  # synthetic
        write_config(self.env, {"url": self.gateway.url,
                                "recall": {"qdrantUrl": "http://127.0.0.1:9", "embeddingsUrl": "http://127.0.0.1:9/v1",
                                           "collection": token}})
        shown = self.session().command("qmem:config", "show")
        self.assertNotIn(token, shown)
        self.assertNotIn(token[4:16], shown)
        self.assertIn("github", shown.lower())
        self.assertIn(self.gateway.url, shown)  # the rest is shown as it is

    def test_menu(self):
        session = self.session()
        ui = ScriptedUI("Set gateway URL", "https://gateway.example/v2")
        self.assertIn("saved", session.command("qmem:config", "", ui))
        self.assertEqual(ui.asked[0][0], "select")
        self.assertEqual(json.loads(self.config_file().read_text())["url"], "https://gateway.example/v2")
        self.assertEqual(session.command("qmem:config", "", ScriptedUI("Cancel")), "cancelled")
        self.assertEqual(session.command("qmem:config", "", None), "cancelled")  # no UI: nothing happens
        ui = ScriptedUI("Set API key (this process only)", self.API_KEY)
        session.command("qmem:config", "", ui)
        self.assertNotIn(self.API_KEY, self.config_file().read_text())

    def test_url_is_written_through_a_dotfiles_link(self):
        # config.json is a relative link into a dotfiles checkout: the checkout's file gets the
        # URL (0600, replaced atomically in its own directory) and the link stays a link.
        dotfiles = self.home / "dotfiles" / "qmem"
        dotfiles.mkdir(parents=True)
        target = dotfiles / "config.json"
        self.config_file().replace(target)
        target.chmod(0o644)
        self.config_file().symlink_to(os.path.relpath(target, self.config_file().parent))
        session = self.session()
        self.assertIn("saved", session.command("qmem:config", f"url {self.gateway.url}/v9"))
        self.assertTrue(self.config_file().is_symlink())
        self.assertEqual(json.loads(target.read_text())["url"], f"{self.gateway.url}/v9")
        self.assertEqual(stat.S_IMODE(os.stat(target).st_mode), 0o600)
        self.assertEqual(sorted(p.name for p in dotfiles.iterdir()), ["config.json"])  # no temp file left
        self.assertEqual(sorted(p.name for p in self.config_file().parent.iterdir()), ["config.json"])
        self.assertIn("saved", session.command("qmem:config", f"url {self.gateway.url}"))
        self.assertIn("connected", session.command("qmem:config", "test"))  # the session reads the new URL

    def test_unreachable(self):
        self.gateway.stop()
        self.assertIn("unreachable", self.session().command("qmem:config", "test"))


class SessionStartTests(GatewayTestCase):
    def test_session_start_flushes_in_the_background(self):
        self.configure(None)
        offline = PluginSession(host="pi", cwd=self.home, env=dict(self.env))
        offline.call_tool("qmem_store", {"text": "queued before the session", "project_id": "p"})
        offline.close()
        self.configure()
        session = PluginSession(host="pi", cwd=self.home, env=dict(self.env))
        self.addCleanup(session.close)
        session.session_start()
        session.wait_for_flush(timeout=30)
        self.assertEqual(self.gateway.count_by_text(), {"queued before the session": 1})

    def test_a_successful_store_flushes_what_was_queued(self):
        write_config(self.env, {"url": None})
        offline = PluginSession(host="pi", cwd=self.home, env=dict(self.env))
        offline.call_tool("qmem_store", {"text": "older queued note", "project_id": "p"})
        offline.close()
        self.configure()
        session = PluginSession(host="pi", cwd=self.home, env=dict(self.env))
        self.addCleanup(session.close)
        session.call_tool("qmem_store", {"text": "fresh note", "project_id": "p"})
        session.wait_for_flush(timeout=30)
        self.assertEqual(self.gateway.count_by_text(), {"older queued note": 1, "fresh note": 1})
