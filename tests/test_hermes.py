"""The Hermes Agent plugin: a contract test of register(ctx), and Hermes' own loader when installed."""

import ast
import inspect
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from unittest import mock

import qmem
from qmem import hermes

from .hosts import HERMES_VERSION, hermes_python
from .support import REPO, GatewayTestCase, TempHomeTestCase
from .test_hostsetup import HERMES_SHAPES


class DocumentedContext:
    """Hermes 0.19's PluginContext surface that qmem uses, with its documented signatures."""

    def __init__(self):
        self.tools, self.commands, self.hooks = {}, {}, []

    def register_tool(self, name, toolset, schema, handler, check_fn=None, requires_env=None, is_async=False,
                      description="", emoji="", override=False):
        self.tools[name] = {"toolset": toolset, "schema": schema, "handler": handler, "is_async": is_async,
                            "override": override}

    def register_command(self, name, handler, description="", args_hint=""):
        self.commands[name] = {"handler": handler, "description": description, "args_hint": args_hint}

    def register_hook(self, hook_name, callback):
        self.hooks.append(hook_name)


class ContractTests(GatewayTestCase):
    def register(self, env):
        ctx = DocumentedContext()
        self.addCleanup(self.forget_session)
        with mock.patch.dict("os.environ", env, clear=True):
            hermes._session = None
            qmem.register(ctx)
        return ctx

    def test_memory_search_is_registered_only_where_recall_is_on(self):
        gateway_tools = {"qmem_store", "qmem_search", "qmem_correct", "qmem_meta", "qmem_get"}
        self.assertEqual(set(self.register(dict(self.env, QMEM_HOST="pi")).tools), gateway_tools)
        self.configure(recall={"qdrantUrl": "http://127.0.0.1:9", "embeddingsUrl": "http://127.0.0.1:9"})
        self.assertEqual(set(self.register(self.env).tools), gateway_tools)  # no host identity
        self.assertEqual(set(self.register(dict(self.env, QMEM_HOST="pi")).tools), gateway_tools | {"memory_search"})

    def test_register_against_the_documented_context(self):
        ctx = self.register(self.env)
        self.assertEqual(set(ctx.tools), {"qmem_store", "qmem_search", "qmem_correct", "qmem_meta", "qmem_get"})
        self.assertEqual(ctx.hooks, [])  # no automatic recall on Hermes: its pre_llm_call context is persisted
        for entry in ctx.tools.values():
            self.assertEqual(entry["toolset"], "qmem")
            self.assertEqual(set(entry["schema"]), {"name", "description", "parameters"})
            self.assertEqual(entry["schema"]["parameters"]["type"], "object")
            self.assertFalse(entry["is_async"] or entry["override"])
        self.assertEqual(set(ctx.commands), {"qmem:local", "qmem:config"})

    def test_handlers_return_json_strings(self):
        self.configure(recall={"qdrantUrl": "http://127.0.0.1:9", "embeddingsUrl": "http://127.0.0.1:9"})
        ctx = self.register(dict(self.env, QMEM_HOST="pi"))
        store = ctx.tools["qmem_store"]["handler"]
        hermes._session = None  # a fresh "process" for this test's HOME, without a host identity
        with mock.patch.dict("os.environ", self.env, clear=True):
            answer = store({"text": "via hermes", "project_id": "p"}, task_id="t", session_id="s", user_task="u")
            failure = store({"text": "no project"}, task_id="t")
            recall = ctx.tools["memory_search"]["handler"]({"query": "x"})
            listing = ctx.commands["qmem:local"]["handler"]("find via hermes")
        self.assertIsInstance(answer, str)
        self.assertTrue(json.loads(answer)["details"]["shared"])
        self.assertEqual(json.loads(failure)["category"], "input")
        self.assertIn("not configured", json.loads(recall)["error"])
        self.assertIn("via hermes", listing)
        self.assertEqual(self.gateway.count_by_text(), {"via hermes": 1})

    @staticmethod
    def forget_session():
        if hermes._session is not None:
            hermes._session.close()
        hermes._session = None

    def test_hermes_treats_the_folder_as_a_general_plugin(self):
        head = (REPO / "qmem" / "__init__.py").read_text()[:8192]
        for word in ("MemoryProvider", "register_memory_provider"):
            self.assertNotIn(word, head)
        manifest = (REPO / "qmem" / "plugin.yaml").read_text()
        self.assertIn("\nkind: standalone\n", manifest)
        self.assertTrue(manifest.startswith("name: qmem\n"))

    def test_nothing_of_the_pi_adapter_is_imported(self):
        tree = ast.parse(inspect.getsource(hermes))
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        self.assertFalse({"bridge", "mcp"} & imported)
        self.assertTrue(all(node.level == 1 for node in ast.walk(tree)
                            if isinstance(node, ast.ImportFrom) and node.module not in ("__future__", "typing",
                                                                                         "pathlib")))


LOADER = textwrap.dedent("""
    import json, sys
    from hermes_cli import plugins as hp
    from tools.registry import registry
    manager = hp.get_plugin_manager()
    manager.discover_and_load(force=True)
    info = {p["key"]: p for p in manager.list_plugins()}.get("qmem")
    loaded = manager._plugins.get("qmem")
    out = {"info": {k: info.get(k) for k in ("enabled", "kind", "error", "tools", "commands", "hooks")},
           "module": loaded.module.__name__,
           "definitions": sorted(d["function"]["name"] for d in registry.get_definitions(
               {"qmem_store", "qmem_search", "qmem_correct", "qmem_meta", "qmem_get", "memory_search"})),
           "toolset": sorted(registry.get_tool_names_for_toolset("qmem"))}
    out["store"] = registry.dispatch("qmem_store", {"text": "stored through hermes", "project_id": "hermes"},
                                     task_id="t1", session_id="s1", user_task="u")
    out["search"] = registry.dispatch("qmem_search", {"query": "stored through hermes"}, task_id="t1", session_id="s1")
    out["command"] = hp.resolve_plugin_command_result(hp.get_plugin_command_handler("qmem:local")("find hermes"))
    out["pi_adapter_loaded"] = sorted(m for m in sys.modules if m.endswith((".bridge", ".mcp")) and "qmem" in m)
    print(json.dumps(out))
""")


class HermesLoaderTests(GatewayTestCase):
    def setUp(self):
        self.python, reason = hermes_python()
        if self.python is None:
            self.skipTest(reason)
        super().setUp()

    def test_loaded_by_hermes_own_loader(self):
        hermes_home = self.home / "hermes"
        shutil.copytree(REPO / "qmem", hermes_home / "plugins" / "qmem",
                        ignore=lambda d, names: [n for n in names if n == "__pycache__"])
        (hermes_home / "config.yaml").write_text("plugins:\n  enabled: [qmem]\n")
        script = self.home / "loader.py"
        script.write_text(LOADER)
        env = dict(self.env, HERMES_HOME=str(hermes_home), TIRITH_ENABLED="0")
        env.pop("PYTHONPATH")  # Hermes imports the folder itself, as hermes_plugins.qmem
        proc = subprocess.run([str(self.python), str(script)], capture_output=True, text=True, env=env,
                              cwd=self.home, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        self.assertEqual((out["info"]["enabled"], out["info"]["kind"], out["info"]["error"]),
                         (True, "standalone", None))
        self.assertEqual(out["info"]["hooks"], 0)
        self.assertEqual(out["module"], "hermes_plugins.qmem")
        self.assertEqual(out["definitions"], ["qmem_correct", "qmem_get", "qmem_meta", "qmem_search", "qmem_store"])
        self.assertEqual(out["toolset"], out["definitions"])
        self.assertTrue(json.loads(out["store"])["details"]["shared"])
        self.assertEqual(self.gateway.count_by_text(), {"stored through hermes": 1})
        self.assertEqual(json.loads(out["search"])["details"]["results"][0]["text"], "stored through hermes")
        self.assertIn("stored through hermes", out["command"])
        self.assertEqual(out["pi_adapter_loaded"], [])

    def test_installed_and_enabled_by_the_cli(self):
        hermes_home = self.home / "hermes"
        env = dict(self.env, HERMES_HOME=str(hermes_home), TIRITH_ENABLED="0")
        installed = subprocess.run([sys.executable, "-m", "qmem.local", "install", "hermes"], capture_output=True,
                                   text=True, env=env, cwd=self.home, timeout=60)
        self.assertEqual(installed.returncode, 0, installed.stderr)
        script = self.home / "loader.py"
        script.write_text(LOADER)
        env.pop("PYTHONPATH")
        proc = subprocess.run([str(self.python), str(script)], capture_output=True, text=True, env=env,
                              cwd=self.home, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        self.assertEqual((out["info"]["enabled"], out["info"]["error"]), (True, None))  # a link, loaded as is
        self.assertTrue(json.loads(out["store"])["details"]["shared"])

    def test_the_pinned_version_is_the_one_tested(self):
        proc = subprocess.run([str(self.python), "-c", "import importlib.metadata as m; "
                               "print(m.version('hermes-agent'))"], capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.stdout.strip(), HERMES_VERSION)


HERMES_READS = textwrap.dedent("""
    import json
    from hermes_cli.plugins_cmd import _get_enabled_set, _get_disabled_set
    print(json.dumps({"enabled": sorted(_get_enabled_set()), "disabled": sorted(_get_disabled_set())}))
""")


class HermesReadsTheEditTests(TempHomeTestCase):
    """What Hermes 0.19's own config reader makes of the edited files."""

    def setUp(self):
        self.python, reason = hermes_python()
        if self.python is None:
            self.skipTest(reason)
        super().setUp()

    def hermes_sees(self, hermes_home: Path) -> dict:
        env = dict(self.env, HERMES_HOME=str(hermes_home), TIRITH_ENABLED="0")
        env.pop("PYTHONPATH")
        proc = subprocess.run([str(self.python), "-c", HERMES_READS], capture_output=True, text=True, env=env,
                              cwd=self.home, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def test_hermes_sees_qmem_enabled_after_install_and_not_after_uninstall(self):
        shapes = {"fresh": None, **{name: HERMES_SHAPES[name][0] for name in ("hermes writes", "enabled null",
                                                                           "disabled block", "no plugins key")}}
        for name, text in shapes.items():
            with self.subTest(shape=name):
                hermes_home = self.home / name.replace(" ", "-")
                hermes_home.mkdir()
                if text is not None:
                    (hermes_home / "config.yaml").write_text(text)
                env = dict(self.env, HERMES_HOME=str(hermes_home))
                self.assertEqual(self.run_module("qmem.local", "install", "hermes", env=env).code, 0)
                seen = self.hermes_sees(hermes_home)
                self.assertIn("qmem", seen["enabled"])
                self.assertNotIn("qmem", seen["disabled"])
                self.assertEqual(self.run_module("qmem.local", "uninstall", "hermes", env=env).code, 0)
                self.assertNotIn("qmem", self.hermes_sees(hermes_home)["enabled"])
