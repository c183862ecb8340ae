"""qmem imports nothing from the working directory: the CLIs and every printed MCP entry (DESIGN §8).

A shadow project (:mod:`tests.shadowing`: ``json.py``, ``uuid.py``, ``queue.py``, ``secrets.py``,
``random.py``, ``types.py``, ``signal.py``, ``sqlite3.py``, ``importlib.py``, ``http/`` and a ``qmem/``
package, each marking its import) is the working directory of:

* the CLIs in the forms the README gives for use outside the clone: ``python3 -P -m qmem.local|admin``
  (3.11+) and the installed console scripts (``qmem-local``, ``qmem-admin``; any version, run here by
  3.10); the guard at the top of the entry modules, which covers what qmem imports after a plain
  ``-m``; and plain ``-m`` itself, shown to be unsafe (runpy imports ``types`` and ``importlib`` and
  finds ``qmem`` through the working directory before qmem can act);
* every ``mcp-config`` flavour, printed by a 3.11+ and by a 3.10 interpreter and launched as its
  client launches it — the entry's command, arguments and environment, the client's working directory
  and the client's own environment rules: ``json`` (placeholders replaced by the values), ``claude``
  (the printed shell line run by a shell), ``codex`` (``env_vars`` forwarded from Codex's
  environment) through the official MCP SDK, and ``hermes`` with the environment Hermes' own code
  builds (``${VAR}`` interpolation, its safe-environment list).

The bridge under the real pi and Prime, and Prime's ``mcp-config`` flavour through Prime's kernel,
are in ``tests/test_pi_host.py`` and ``tests/test_prime_host.py``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import tomllib
import unittest
from pathlib import Path
from typing import Any

from .fakes import FakeEmbeddings, FakeGateway, FakeQdrant, embed_text
from .hosts import hermes_python, mcp_python
from .shadowing import BEFORE_QMEM, clean_python, make_shadow_project, markers
from .support import REPO, clean_env

DIM = 16
RECALLED = "Shadow projects never run inside qmem"
KEYS = {"QMEM_GATEWAY_API_KEY": "gw-key", "QMEM_QDRANT_API_KEY": "read-key", "QMEM_EMBEDDING_API_KEY": "emb-key"}
ADMIN_KEY = "admin-key"
#: Interpreter labels -> what clean_python is asked for.
PYTHONS = {"3.11+": {"minimum": (3, 11)}, "3.10": {"exactly": (3, 10)}}
#: The names a project could hold that runpy does not import before qmem: the entry modules' guard keeps them out.
AFTER_RUNPY = ("json", "uuid", "queue", "secrets", "random", "signal", "sqlite3", "http")
#: What the bridge imports first, and ``__future__``: no entry may import them before its guard.
BRIDGE_FIRST = ("dataclasses", "threading", "__future__")


class ShadowTestCase(unittest.TestCase):
    """A HOME with qmem configured against fakes (gateway, curated Qdrant, embeddings, each keyed) and a shadow project."""

    def setUp(self) -> None:
        super().setUp()
        self.home = Path(tempfile.mkdtemp(prefix="qmem-shadow-"))
        self.addCleanup(shutil.rmtree, self.home, True)
        self.gateway = FakeGateway(api_key=KEYS["QMEM_GATEWAY_API_KEY"]).start()
        self.qdrant = FakeQdrant(keys={KEYS["QMEM_QDRANT_API_KEY"]: "r", ADMIN_KEY: "rw"}).start()
        self.embeddings = FakeEmbeddings(api_key=KEYS["QMEM_EMBEDDING_API_KEY"], models={"bge-m3": DIM}).start()
        for fake in (self.gateway, self.qdrant, self.embeddings):
            self.addCleanup(fake.stop)
        self.qdrant.create_collection("qmem_memories", size=DIM)
        self.qdrant.add_point("qmem_memories", 1, embed_text(RECALLED, DIM), {
            "host": "pi", "status": "active", "secret_scan": "passed", "text": RECALLED, "project": "shadowproj",
            "source_type": "hermes", "source_collection": "hermes_memories", "source_id": "1",
            "import_run_id": "ab" * 32, "transform_version": "hermes-v1", "created_at": "2026-01-01T00:00:00Z"})
        config = self.home / ".config" / "qmem" / "config.json"
        config.parent.mkdir(parents=True)
        config.write_text(json.dumps({"url": self.gateway.url, "connectTimeoutMs": 5000, "timeoutMs": 5000,
                                      "recall": {"qdrantUrl": self.qdrant.url, "embeddingsUrl": self.embeddings.base_url,
                                                 "dimension": DIM, "timeoutMs": 5000}}))
        self.markers = self.home / "markers"
        self.project = make_shadow_project(self.home / "work" / "shadowproj", self.markers)
        self.env = clean_env(self.home, **KEYS)
        del self.env["PYTHONPATH"]

    def python(self, label: str) -> Path:
        path, reason = clean_python(**PYTHONS[label])
        if path is None:
            self.skipTest(reason)
        return path

    def assertNothingImported(self) -> None:
        self.assertEqual(markers(self.markers), {}, "imported from the project")


# --- the CLIs --------------------------------------------------------------------------------

CONSOLE_SCRIPT = """#!{python}
# -*- coding: utf-8 -*-
import re
import sys
from {module} import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""

LOCAL_COMMANDS = (["--version"], ["status"], ["store", "--project", "shadowproj", "--text", "stored from a shadow"],
                  ["find", "stored", "shadow"], ["queue"], ["doctor"], ["mcp-config", "json"])
ADMIN_COMMANDS = (["--version"], ["init"], ["status"])


class CliTests(ShadowTestCase):
    def setUp(self) -> None:
        super().setUp()
        # The curated collection as `qmem.admin init` makes it (with its keyword indexes), so admin status answers.
        self.qdrant.drop_collection("qmem_memories")
        made = subprocess.run([sys.executable, "-m", "qmem.admin", "init"], cwd=REPO,
                              env=dict(self.env, QMEM_ADMIN_QDRANT_API_KEY=ADMIN_KEY), capture_output=True, text=True,
                              timeout=60)
        self.assertEqual(made.returncode, 0, made.stderr)

    def run_cli(self, argv: list[str], *, pythonpath: bool = True) -> subprocess.CompletedProcess:
        env = dict(self.env, QMEM_ADMIN_QDRANT_API_KEY=ADMIN_KEY)
        if pythonpath:
            env["PYTHONPATH"] = str(REPO)  # where a pip install would put qmem
        return subprocess.run(argv, cwd=self.project, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=120)

    def console_script(self, python: Path, name: str, module: str) -> Path:
        """The wrapper pip writes for a console script (``[project.scripts]``)."""
        path = self.home / "bin" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(CONSOLE_SCRIPT.format(python=python, module=module))
        path.chmod(0o755)
        return path

    def assertAnswers(self, argv: list[str]) -> None:
        proc = self.run_cli(argv)
        self.assertEqual(proc.returncode, 0, f"{argv}: {proc.stderr}{proc.stdout[-2000:]}")
        self.assertNotIn("Traceback", proc.stderr)
        self.assertNothingImported()

    def test_the_readme_forms_import_nothing_from_the_project(self):
        forms = {"3.11+": lambda python, module: [str(python), "-P", "-m", module],
                 "3.10": lambda python, module: [str(self.console_script(python, f"qmem-{module[5:]}", module))]}
        for label, form in forms.items():
            python = self.python(label)
            for module, commands in (("qmem.local", LOCAL_COMMANDS), ("qmem.admin", ADMIN_COMMANDS)):
                for args in commands:
                    with self.subTest(python=label, module=module, args=args):
                        self.assertAnswers([*form(python, module), *args])
        self.assertEqual(self.gateway.count_by_text(), {"stored from a shadow": 1})  # the second: a duplicate

    def test_the_entry_modules_keep_the_working_directory_out_of_what_qmem_imports(self):
        """Plain `-m`: the guard drops the working directory before qmem's own imports."""
        shutil.rmtree(self.project)
        make_shadow_project(self.project, self.markers, AFTER_RUNPY)
        for label in PYTHONS:
            python = self.python(label)
            for module, args in (("qmem.local", ["status"]), ("qmem.local", ["doctor"]), ("qmem.admin", ["init"]),
                                 ("qmem.admin", ["status"]), ("qmem.mcp", ["--version"])):
                with self.subTest(python=label, module=module):
                    self.assertAnswers([str(python), "-m", module, *args])

    def test_the_bridge_started_directly_in_a_project_imports_nothing_from_it(self):
        """`python3 -m qmem.bridge` run by hand in a project (not through index.js): the same guard as the others.

        The bridge's own first imports (``dataclasses``, ``concurrent``, ``threading``) and ``__future__``
        (which an entry must not import before its guard) are shadowed besides the names qmem uses later."""
        shutil.rmtree(self.project)
        make_shadow_project(self.project, self.markers, AFTER_RUNPY + BRIDGE_FIRST)
        for label in PYTHONS:
            python = self.python(label)
            with self.subTest(python=label):
                requests = [{"id": 0, "method": "session_start", "params": {"cwd": str(self.project), "loaded": None}},
                            {"id": 1, "method": "tool", "params": {"name": "qmem_store", "args": {
                                "text": f"stored by a bridge in a shadow project ({label})", "project_id": "shadowproj"}}},
                            {"id": 2, "method": "tool", "params": {"name": "qmem_search", "args": {"query": "shadow"}}}]
                answers = self.converse([str(python), "-m", "qmem.bridge"], requests)
                self.assertNothingImported()
                for request_id in (1, 2):
                    self.assertIn("result", answers[request_id], answers[request_id])

    def converse(self, argv: list[str], requests: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
        """Send each request once the previous one is answered, then shutdown; the answers by id."""
        env = dict(self.env, PYTHONPATH=str(REPO))
        proc = subprocess.Popen(argv, cwd=self.project, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        watchdog = threading.Timer(120, proc.kill)  # a bridge that stops answering fails the test, never hangs it
        watchdog.start()
        answers: dict[Any, dict[str, Any]] = {}
        try:
            for request in [*requests, {"id": "end", "method": "shutdown"}]:
                proc.stdin.write(json.dumps(request) + "\n")
                proc.stdin.flush()
                while request["id"] not in answers:
                    line = proc.stdout.readline()
                    if not line:
                        self.fail(f"the bridge closed stdout: {proc.stderr.read()[-2000:]}")
                    message = json.loads(line)
                    if "id" in message:
                        answers[message["id"]] = message
            self.assertEqual(proc.wait(), 0)
        finally:
            watchdog.cancel()
            proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                stream.close()
        return answers

    def test_plain_dash_m_in_a_project_is_not_safe(self):
        """Why the README gives other forms: before any qmem code runs, `-m` imports from the project."""
        for label in PYTHONS:
            python = self.python(label)
            for name in BEFORE_QMEM:
                with self.subTest(python=label, module=name):
                    shutil.rmtree(self.project)
                    shutil.rmtree(self.markers)
                    make_shadow_project(self.project, self.markers, (name,))
                    self.run_cli([str(python), "-m", "qmem.local", "--version"])
                    self.assertEqual(list(markers(self.markers)), [name])


# --- MCP entries, launched as each client launches them -------------------------------------

SDK_DRIVER = textwrap.dedent("""
    import asyncio, json, sys
    from mcp import ClientSession, StdioServerParameters, stdio_client

    async def run(spec, calls):
        params = StdioServerParameters(command=spec["command"], args=spec["args"], env=spec["env"],
                                       cwd=spec.get("cwd"))
        out = {"calls": {}}
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=60) as session:
                init = await session.initialize()
                out["instructions"] = init.instructions
                out["tools"] = sorted(t.name for t in (await session.list_tools()).tools)
                for name, arguments in calls:
                    result = await session.call_tool(name, arguments)
                    out["calls"][name] = {"error": result.is_error, "text": result.content[0].text}
        return out

    async def main(job):  # one server after the other: the SDK is imported once
        print(json.dumps([await run(spec, job["calls"]) for spec in job["specs"]]))

    asyncio.run(main(json.load(sys.stdin)))
""")

#: What Hermes does to an mcp_servers entry before starting it (tools/mcp_tool.py): ${VAR} filled in
#: from its environment, then its safe environment list plus the entry's env.
HERMES_ENV = textwrap.dedent("""
    import json, sys, yaml
    from tools.mcp_tool import _build_safe_env, _interpolate_env_vars
    entry = _interpolate_env_vars(yaml.safe_load(open(sys.argv[1]))["mcp_servers"]["qmem"])
    print(json.dumps({"command": entry["command"], "args": entry["args"], "env": _build_safe_env(entry.get("env"))}))
""")

#: Codex's DEFAULT_ENV_VARS (codex-rs/rmcp-client/src/utils.rs): what every server gets from Codex's environment.
CODEX_DEFAULT_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "USER", "__CF_USER_TEXT_ENCODING", "LANG", "LC_ALL", "TERM",
                     "TMPDIR", "TZ")

CALLS = [["qmem_store", {"text": "stored over MCP from a shadow project", "project_id": "shadowproj"}],
         ["qmem_search", {"query": "shadow project"}], ["qmem_meta", {}],
         ["memory_search", {"query": "shadow projects never run"}]]


class McpEntryTestCase(ShadowTestCase):
    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.sdk, reason = mcp_python()
        if cls.sdk is None:
            raise unittest.SkipTest(reason)

    def printed(self, python: Path, client: str) -> str:
        """`mcp-config CLIENT` as the README says to run it: from the clone, with the interpreter the entry names."""
        proc = subprocess.run([str(python), "-m", "qmem.local", "mcp-config", client], cwd=REPO, env=self.env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        for value in KEYS.values():
            self.assertNotIn(value, proc.stdout)  # names, never values
        return proc.stdout

    def launch(self, *specs: dict[str, Any], cwd: Path | None = None) -> list[dict[str, Any]]:
        """Start each server as the official SDK client does (``cwd`` None: the client's own), call every tool."""
        driver = self.home / "sdk_driver.py"
        driver.write_text(SDK_DRIVER)
        proc = subprocess.run([str(self.sdk), str(driver)], input=json.dumps({"specs": specs, "calls": CALLS}),
                              cwd=cwd or self.home, env=self.env, capture_output=True, text=True, timeout=300)
        self.assertNothingImported()  # first: a server that imported the project may not have answered at all
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def assertEveryToolAnswers(self, out: dict[str, Any]) -> None:
        self.assertNothingImported()
        self.assertIn("memory_search", out["tools"])
        for name, answer in out["calls"].items():
            self.assertFalse(answer["error"], f"{name}: {answer['text']}")
        self.assertIn(RECALLED, out["calls"]["memory_search"]["text"])
        self.assertIn('for this repository use "shadowproj"', out["instructions"])


class McpEntryTests(McpEntryTestCase):
    def json_entry(self, python: Path, values: dict[str, str]) -> dict[str, Any]:
        entry = json.loads(self.printed(python, "json"))["mcpServers"]["qmem"]
        filled = {name: values.get(name, "") if value == f"<your {name}>" else value
                  for name, value in entry["env"].items()}
        self.assertEqual({name for name, value in entry["env"].items() if value.startswith("<your ")}, set(KEYS))
        return {"command": entry["command"], "args": entry["args"], "env": filled, "cwd": str(self.project)}

    def claude_entry(self, python: Path) -> dict[str, Any]:
        recorded = self.home / "claude-args.json"
        shell = (f'claude() {{ "{sys.executable}" -c \'import json, sys; print(json.dumps(sys.argv[1:]))\' "$@" '
                 f'> "{recorded}"; }}\n' + self.printed(python, "claude"))
        proc = subprocess.run(["bash", "-c", shell], cwd=self.home, env=self.env, capture_output=True, text=True,
                              timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        argv = json.loads(recorded.read_text())
        self.assertEqual(argv[:6], ["mcp", "add", "qmem", "--scope", "user", "-e"])
        split = argv.index("--")
        options, command = argv[3:split], argv[split + 1:]
        env = dict(options[i + 1].split("=", 1) for i, option in enumerate(options) if option == "-e")
        return {"command": command[0], "args": command[1:], "env": env, "cwd": str(self.project)}

    def codex_entry(self, python: Path, codex_env: dict[str, str]) -> dict[str, Any]:
        table = tomllib.loads(self.printed(python, "codex"))["mcp_servers"]["qmem"]
        env = {name: codex_env[name] for name in (*CODEX_DEFAULT_ENV, *table.get("env_vars", ())) if name in codex_env}
        env.update(table.get("env", {}))
        return {"command": table["command"], "args": table["args"], "env": env, "cwd": str(self.project)}

    def test_every_flavour_on_every_entry_form(self):
        cases = {}
        for label in PYTHONS:
            python = self.python(label)
            cases.update({(label, "json"): self.json_entry(python, KEYS), (label, "claude"): self.claude_entry(python),
                          (label, "codex"): self.codex_entry(python, self.env)})
        answers = self.launch(*cases.values())
        for ((label, client), spec), out in zip(cases.items(), answers, strict=True):
            with self.subTest(python=label, client=client):
                self.assertEveryToolAnswers(out)
                form = spec["args"][:2] if label == "3.11+" else spec["args"][:1]
                self.assertEqual(form, ["-P", "-m"] if label == "3.11+" else ["-c"])
        self.assertEqual(self.gateway.count_by_text(), {"stored over MCP from a shadow project": 1})

    def test_a_missing_or_refused_key_is_named(self):
        python = self.python("3.11+")
        codex_env = {k: v for k, v in self.env.items() if k != "QMEM_QDRANT_API_KEY"}  # not exported for Codex
        missing, refused = self.launch(self.codex_entry(python, codex_env),
                                       self.json_entry(python, {**KEYS, "QMEM_EMBEDDING_API_KEY": "wrong"}))
        missing = missing["calls"]["memory_search"]
        self.assertTrue(missing["error"])
        self.assertIn("Qdrant wants an API key and QMEM_QDRANT_API_KEY is not set", missing["text"])
        answer = refused["calls"]["memory_search"]
        self.assertTrue(answer["error"])
        self.assertEqual(answer["text"], "memory_search is unavailable: the embeddings service refused the key in "
                                         "QMEM_EMBEDDING_API_KEY; `python3 -m qmem.local doctor` checks it.")
        for text in (missing["text"], answer["text"]):
            self.assertNotIn("127.0.0.1", text)
            self.assertNotIn("wrong", text)


class HermesEntryTests(McpEntryTestCase):
    """Hermes 0.19's venv has no MCP SDK (an optional extra), so its own code builds the environment and
    the official SDK starts the server, without a cwd: Hermes' own, the project."""

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.hermes, reason = hermes_python()
        if cls.hermes is None:
            raise unittest.SkipTest(reason)

    def test_the_hermes_entry_on_every_entry_form(self):
        script = self.home / "hermes_env.py"
        script.write_text(HERMES_ENV)
        hermes_home = self.home / ".hermes"
        hermes_home.mkdir()
        specs = []
        for label in PYTHONS:
            text = self.printed(self.python(label), "hermes")
            self.assertIn('QMEM_QDRANT_API_KEY: "${QMEM_QDRANT_API_KEY}"', text)
            (hermes_home / "config.yaml").write_text(text)
            proc = subprocess.run([str(self.hermes), str(script), str(hermes_home / "config.yaml")],
                                  cwd=self.home, env=dict(self.env, HERMES_HOME=str(hermes_home)),
                                  capture_output=True, text=True, timeout=120)
            self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
            specs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            self.assertEqual(specs[-1]["env"]["QMEM_QDRANT_API_KEY"], KEYS["QMEM_QDRANT_API_KEY"])
        for label, out in zip(PYTHONS, self.launch(*specs, cwd=self.project), strict=True):
            with self.subTest(python=label):
                self.assertEveryToolAnswers(out)


if __name__ == "__main__":
    unittest.main()
