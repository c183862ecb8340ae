"""The Hermes Agent plugin: a contract test of register(ctx); with Hermes installed, its own loader,
its middleware chain driven request by request, and the lane read from the config.

The real ``hermes chat`` turns are in ``tests/test_hermes_host.py``.
"""

import ast
import contextlib
import io
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from unittest import mock

import qmem
from qmem import config
from qmem.hermes import adapter as hermes_adapter

from .fakes import FakeEmbeddings, FakeQdrant, refused_url
from .hosts import HERMES_VERSION, hermes_python
from .support import REPO, GatewayTestCase, TempHomeTestCase
from .test_hermes_host import DIM, ELIGIBLE, INELIGIBLE, seed_curated
from .test_hostsetup import HERMES_SHAPES


class DocumentedContext:
    """Hermes 0.16's PluginContext surface that qmem uses (before middleware), with its signatures."""

    def __init__(self):
        self.tools, self.commands, self.hooks, self.skills, self.middleware = {}, {}, [], {}, []

    def register_tool(self, name, toolset, schema, handler, check_fn=None, requires_env=None, is_async=False,
                      description="", emoji="", override=False):
        self.tools[name] = {"toolset": toolset, "schema": schema, "handler": handler, "is_async": is_async,
                            "override": override}

    def register_command(self, name, handler, description="", args_hint=""):
        self.commands[name] = {"handler": handler, "description": description, "args_hint": args_hint}

    def register_hook(self, hook_name, callback):
        self.hooks.append(hook_name)

    def register_skill(self, name, path, description=""):
        if not path.exists():  # Hermes checks it with Path.exists(): a str would fail
            raise FileNotFoundError(path)
        self.skills[name] = path


class MiddlewareContext(DocumentedContext):
    """Hermes 0.17+'s surface: register_middleware too (the kinds are read from Hermes itself)."""

    def register_middleware(self, kind, callback):
        self.middleware.append(kind)


class ContractTests(GatewayTestCase):
    def setUp(self):
        super().setUp()
        self.stderr = io.StringIO()  # what the plugin says while registering

    def register(self, env, ctx=None):
        ctx = ctx or DocumentedContext()
        self.addCleanup(self.forget_session)
        with mock.patch.dict("os.environ", env, clear=True), contextlib.redirect_stderr(self.stderr):
            hermes_adapter._session = None
            qmem.register(ctx)
        return ctx

    def test_memory_search_is_registered_only_where_recall_is_on(self):
        gateway_tools = {"qmem_store", "qmem_search", "qmem_correct", "qmem_meta", "qmem_get"}
        self.assertEqual(set(self.register(dict(self.env, QMEM_HOST="pi")).tools), gateway_tools)
        self.configure(recall={"qdrantUrl": "http://127.0.0.1:9", "embeddingsUrl": "http://127.0.0.1:9"})
        self.assertEqual(set(self.register(self.env).tools), gateway_tools)  # no host identity
        self.assertEqual(set(self.register(dict(self.env, QMEM_HOST="pi")).tools), gateway_tools | {"memory_search"})
        self.configure(recall={"qdrantUrl": "http://127.0.0.1:9", "embeddingsUrl": "http://127.0.0.1:9",
                               "host": "prime"})
        self.assertEqual(set(self.register(self.env).tools), gateway_tools | {"memory_search"})  # the config's lane
        self.assertEqual(set(self.register(dict(self.env, QMEM_HOST="hermes")).tools), gateway_tools)  # invalid

    def test_register_against_a_hermes_without_middleware(self):
        for ctx in (DocumentedContext(), MiddlewareContext()):  # the second: this process has no Hermes loaded
            with self.subTest(context=type(ctx).__name__):
                hermes_adapter._said_no_middleware = False
                self.stderr = io.StringIO()
                self.register(self.env, ctx)
                self.register(self.env, type(ctx)())  # Hermes may load plugins again: said once
                self.assertEqual(self.stderr.getvalue(), hermes_adapter.NO_MIDDLEWARE + "\n")
                self.assertEqual((ctx.hooks, ctx.middleware), ([], []))  # tools only: no rules, no recall
                self.assertEqual(ctx.skills, {"qmem": REPO / "qmem" / "skills" / "qmem" / "SKILL.md"})

    def test_register_against_the_documented_context(self):
        ctx = self.register(self.env)
        self.assertEqual(set(ctx.tools), {"qmem_store", "qmem_search", "qmem_correct", "qmem_meta", "qmem_get"})
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
        hermes_adapter._session = None  # a fresh "process" for this test's HOME, without a host identity
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
        if hermes_adapter._session is not None:
            hermes_adapter._session.close()
        hermes_adapter._session = None
        hermes_adapter._said_no_middleware = False

    def test_hermes_treats_the_folder_as_a_general_plugin(self):
        head = (REPO / "qmem" / "__init__.py").read_text()[:8192]
        for word in ("MemoryProvider", "register_memory_provider"):
            self.assertNotIn(word, head)
        manifest = (REPO / "qmem" / "plugin.yaml").read_text()
        self.assertIn("\nkind: standalone\n", manifest)
        self.assertTrue(manifest.startswith("name: qmem\n"))

    def test_nothing_of_the_pi_adapter_and_nothing_of_hermes_is_imported(self):
        for module in ("adapter", "request", "turns"):
            tree = ast.parse((REPO / "qmem" / "hermes" / f"{module}.py").read_text())
            imports = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
            relative = {node.module for node in imports if isinstance(node, ast.ImportFrom) and node.level > 1}
            absolute = {alias.name.split(".")[0] for node in imports if isinstance(node, ast.Import)
                        for alias in node.names} | {node.module.split(".")[0] for node in imports
                                                    if isinstance(node, ast.ImportFrom) and not node.level}
            self.assertFalse({"bridge", "mcp"} & relative, module)
            self.assertLessEqual(absolute, set(sys.stdlib_module_names) | {"__future__"}, module)


class LaneTests(GatewayTestCase):
    """Whose curated memories recall uses where the adapter cannot tell: QMEM_HOST, else recall.host."""

    def test_environment_first_then_the_config(self):
        self.assertIsNone(config.recall_host(self.env))
        self.configure(recall={"host": "prime"})
        self.assertEqual(config.recall_host(self.env), "prime")
        self.assertEqual(config.recall_host(dict(self.env, QMEM_HOST="pi")), "pi")
        self.assertEqual(config.recall_host(dict(self.env, QMEM_HOST=" ")), "prime")  # empty counts as unset
        self.assertIsNone(config.recall_host(dict(self.env, QMEM_HOST="hermes")))  # invalid: off, no fallback
        self.assertEqual(config.setting_sources(self.env)["recall.host"], "file")
        self.configure(recall={"host": "hermes"})
        self.assertIsNone(config.recall_host(self.env))  # an invalid config gives no lane (doctor says why)

    def test_the_mcp_server_honours_the_config(self):
        self.configure(recall={"qdrantUrl": refused_url(), "embeddingsUrl": refused_url("/v1"), "host": "pi"})
        lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize",
                  "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}},
                 {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]
        proc = subprocess.run([sys.executable, "-m", "qmem.mcp"], input="".join(json.dumps(x) + "\n" for x in lines),
                              capture_output=True, text=True, env=self.env, cwd=self.home, timeout=60)
        answers = [json.loads(line) for line in proc.stdout.splitlines()]
        self.assertIn("memory_search", {tool["name"] for tool in answers[1]["result"]["tools"]})


LOADER = textwrap.dedent("""
    import json, sys
    from hermes_cli import plugins as hp
    from tools.registry import registry
    manager = hp.get_plugin_manager()
    manager.discover_and_load(force=True)
    info = {p["key"]: p for p in manager.list_plugins()}.get("qmem")
    loaded = manager._plugins.get("qmem")
    out = {"info": {k: info.get(k) for k in ("enabled", "kind", "error", "tools", "commands", "hooks", "middleware")},
           "module": loaded.module.__name__,
           "definitions": sorted(d["function"]["name"] for d in registry.get_definitions(
               {"qmem_store", "qmem_search", "qmem_correct", "qmem_meta", "qmem_get", "memory_search"})),
           "toolset": sorted(registry.get_tool_names_for_toolset("qmem"))}
    text = sys.argv[1]
    out["store"] = registry.dispatch("qmem_store", {"text": text, "project_id": "hermes"},
                                     task_id="t1", session_id="s1", user_task="u")
    out["search"] = registry.dispatch("qmem_search", {"query": text}, task_id="t1", session_id="s1")
    out["command"] = hp.resolve_plugin_command_result(hp.get_plugin_command_handler("qmem:local")("find hermes"))
    out["pi_adapter_loaded"] = sorted(m for m in sys.modules if m.endswith((".bridge", ".mcp")) and "qmem" in m)
    from tools.skills_tool import skill_view
    out["skill"] = json.loads(skill_view("qmem:qmem"))
    print(json.dumps(out))
""")


class HermesLoaderTests(GatewayTestCase):
    def setUp(self):
        self.python, reason = hermes_python()
        if self.python is None:
            self.skipTest(reason)
        super().setUp()

    def test_installed_by_the_cli_and_loaded_by_hermes_own_loader(self):
        # As the README installs it: `install hermes` (a link, enabled in config.yaml) and its --copy;
        # Hermes is started in a project, never in the checkout.
        for form in ((), ("--copy",)):
            with self.subTest(install=form):
                self.assertLoaded(self.home / f"hermes{len(form)}", form)

    def assertLoaded(self, hermes_home, form):
        env = dict(self.env, HERMES_HOME=str(hermes_home), TIRITH_ENABLED="0")
        installed = subprocess.run([sys.executable, "-m", "qmem.local", "install", "hermes", *form],
                                   capture_output=True, text=True, env=env, cwd=self.home, timeout=60)
        self.assertEqual(installed.returncode, 0, installed.stderr)
        self.assertEqual((hermes_home / "plugins" / "qmem").is_symlink(), not form)
        project = self.home / "work" / f"project{len(form)}"
        (project / ".git").mkdir(parents=True)
        script = self.home / "loader.py"
        script.write_text(LOADER)
        env.pop("PYTHONPATH")  # Hermes imports the folder itself, as hermes_plugins.qmem
        text = f"stored through hermes, installed {' '.join(form) or 'as a link'}"
        proc = subprocess.run([str(self.python), str(script), text], capture_output=True, text=True, env=env,
                              cwd=project, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        self.assertEqual((out["info"]["enabled"], out["info"]["kind"], out["info"]["error"]),
                         (True, "standalone", None))
        self.assertEqual((out["info"]["hooks"], out["info"]["middleware"]), (1, 1))  # pre_llm_call, llm_execution
        self.assertTrue(out["skill"]["success"])
        self.assertIn("# qmem: shared long-term memory", out["skill"]["content"])
        self.assertEqual(out["module"], "hermes_plugins.qmem")
        self.assertEqual(out["definitions"], ["qmem_correct", "qmem_get", "qmem_meta", "qmem_search", "qmem_store"])
        self.assertEqual(out["toolset"], out["definitions"])
        self.assertTrue(json.loads(out["store"])["details"]["shared"])
        self.assertEqual(self.gateway.count_by_text()[text], 1)
        self.assertEqual(json.loads(out["search"])["details"]["results"][0]["text"], text)
        self.assertIn(text, out["command"])
        self.assertEqual(out["pi_adapter_loaded"], [])

    def test_the_pinned_version_is_the_one_tested(self):
        proc = subprocess.run([str(self.python), "-c", "import importlib.metadata as m; "
                               "print(m.version('hermes-agent'))"], capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.stdout.strip(), HERMES_VERSION)


MIDDLEWARE_TURNS = textwrap.dedent("""
    # Hermes' own plugin loader and middleware chain, driven the way agent/conversation_loop.py drives
    # them, with a stand-in for the provider call: one JSON line of what each request became.
    import copy, json, os, sys, threading
    from hermes_cli import plugins as hp
    from hermes_cli.middleware import run_llm_execution_middleware
    from tools.skill_provenance import set_current_write_origin

    hp.get_plugin_manager().discover_and_load(force=True)
    hp.get_plugin_manager().discover_and_load(force=True)  # loaded again: still one callback each
    OPEN = '<memory-context trust="untrusted">'
    SESSION = "20261201_101010_abcdef"

    class Unreadable(list):
        def __iter__(self):
            raise RuntimeError("a payload qmem cannot read")

    def build(prompt, step, tools):
        messages = [{"role": "system", "content": "You are Hermes."}, {"role": "user", "content": prompt}]
        for n in range(step):
            messages += [{"role": "assistant", "content": "", "tool_calls": [{"id": f"c{n}", "type": "function",
                          "function": {"name": "qmem_meta", "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": f"c{n}", "content": "result"}]
        request = {"model": "fake-model", "messages": messages}
        if tools == "unreadable":
            request["tools"] = Unreadable([{}])
        elif tools:
            request["tools"] = [{"type": "function", "function": {"name": n, "parameters": {}}}
                                for n in ("qmem_meta", "terminal")]
        return request

    def turn(name, platform="cli", origin="assistant_tool", task_id=SESSION, session_id=SESSION, observe=True,
             tools=True, requests=3, provider_error=False, env=None, words="how do blue green deploys work"):
        os.environ.update(env or {})
        set_current_write_origin(origin)
        prompt = f"{name}: {words}"
        turn_id = f"{session_id}:{task_id}:{name}"
        context = dict(task_id=task_id, turn_id=turn_id, session_id=session_id, platform=platform,
                       model="fake-model", provider="custom", base_url="http://127.0.0.1:9/v1",
                       api_mode="chat_completions")
        hooks = hp.invoke_hook("pre_llm_call", session_id=session_id, task_id=task_id, turn_id=turn_id,
                               user_message=prompt, conversation_history=[], is_first_turn=True,
                               model="fake-model", platform=platform, sender_id="") if observe else []
        seen = []
        for step in range(requests):
            live = build(prompt, step, tools)
            before = copy.deepcopy(live) if tools != "unreadable" else None
            sent = []
            def provider(kwargs):
                sent.append(kwargs)
                if provider_error:
                    raise ConnectionResetError("the provider went away")
                return {"answer": step}
            try:
                answer = run_llm_execution_middleware(live, provider, original_request=live, middleware_trace=[],
                                                      api_request_id=f"{turn_id}:api:{step + 1}",
                                                      api_call_count=step + 1, **context)
            except ConnectionResetError as exc:
                answer = {"raised": type(exc).__name__}
            body = sent[0]
            users = [m for m in body["messages"] if m["role"] == "user"]
            seen.append({"answer": answer, "calls": len(sent), "same": body is live,
                         "untouched": before is None or live == before,
                         "rules": body["messages"][0]["content"].count("## qmem rules"),
                         "blocks": sum(str(m["content"]).count(OPEN) for m in users),
                         "text": json.dumps(body["messages"])})
        for key in env or {}:
            del os.environ[key]
        return {"hooks": hooks, "requests": seen}

    out = {"main": turn("main"), "unobserved": turn("unobserved", observe=False),
           "background": turn("background", task_id="bg_101010_abcdef", session_id="bg_101010_abcdef"),
           "review": turn("review", origin="background_review"), "cron": turn("cron", platform="cron"),
           "kanban": turn("kanban", env={"HERMES_KANBAN_TASK": "t-1"}),
           "no_tools": turn("no_tools", tools=False), "unreadable": turn("unreadable", tools="unreadable"),
           "provider_error": turn("provider_error", requests=1, provider_error=True),
           "credential": turn("credential", words="deploy with ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8")}
    # A sub-agent runs on a worker thread of the parent's process, with its own write origin.
    worker = threading.Thread(target=lambda: out.update(subagent=turn("subagent", platform="subagent",
                                                                      task_id="sa-0-1a2b3c4d")))
    worker.start()
    worker.join()
    print(json.dumps(out))
""")


class HermesMiddlewareTests(GatewayTestCase):
    """Hermes' own plugin loader and middleware chain, request by request, against fake recall services."""

    def setUp(self):
        self.python, reason = hermes_python()
        if self.python is None:
            self.skipTest(reason)
        super().setUp()
        self.qdrant = FakeQdrant().start()
        self.embeddings = FakeEmbeddings(models={"bge-m3": DIM}).start()
        for fake in (self.qdrant, self.embeddings):
            self.addCleanup(fake.stop)
        seed_curated(self.qdrant)
        self.configure(recall={"qdrantUrl": self.qdrant.url, "embeddingsUrl": self.embeddings.base_url,
                               "dimension": DIM, "host": "pi"})

    def test_turns_through_the_middleware_chain(self):
        hermes_home = self.home / "hermes"
        env = dict(self.env, HERMES_HOME=str(hermes_home), HERMES_DISABLE_LAZY_INSTALLS="1")
        installed = subprocess.run([sys.executable, "-m", "qmem.local", "install", "hermes"], capture_output=True,
                                   text=True, env=env, cwd=self.home, timeout=60)
        self.assertEqual(installed.returncode, 0, installed.stderr)
        env.pop("PYTHONPATH")
        work = self.home / "work" / "e2eproj"
        (work / ".git").mkdir(parents=True)
        script = self.home / "turns.py"
        script.write_text(MIDDLEWARE_TURNS)
        proc = subprocess.run([str(self.python), str(script)], capture_output=True, text=True, env=env, cwd=work,
                              timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        for name, turn in out.items():
            with self.subTest(turn=name):
                self.assertEqual(turn["hooks"], [])  # pre_llm_call only observes: nothing for Hermes to inject
                for request in turn["requests"]:
                    self.assertEqual(request["calls"], 1)  # the provider is called exactly once
                    self.assertTrue(request["untouched"])  # Hermes' own request is left as it was
                    self.assertEqual(request["rules"], 0 if name in ("no_tools", "unreadable") else 1)
                    self.assertEqual(request["blocks"], 1 if name in ("main", "no_tools", "provider_error") else 0)
                    if request["blocks"]:
                        self.assertIn(ELIGIBLE, request["text"])
                        for mark in INELIGIBLE:
                            self.assertNotIn(mark, request["text"])
        self.assertEqual([r["answer"] for r in out["main"]["requests"]], [{"answer": n} for n in range(3)])
        self.assertTrue(all(r["same"] for r in out["unreadable"]["requests"]))  # passed on as Hermes built it
        self.assertEqual(out["provider_error"]["requests"][0]["answer"], {"raised": "ConnectionResetError"})
        # One embedding per main turn, however many requests; none for the prompt holding a credential.
        # The recall starts at pre_llm_call, before any request exists: the turn whose requests qmem
        # could not read (and so got no block) was recalled too.
        self.assertEqual(sorted(self.embeddings.inputs), [f"{name}: how do blue green deploys work"
                                                         for name in ("main", "no_tools", "provider_error",
                                                                      "unreadable")])
        self.assertEqual(proc.stderr.count("qmem: recalled memories could not be formatted"), 1)  # unreadable


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
