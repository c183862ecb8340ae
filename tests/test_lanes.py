"""The lanes hold only what they need: the recall lane never reaches the index, the outbox or the gateway,
and a host handshake loads no lane at all.

Four guards, each able to fail on its own:

* a static one: the import closure of the lane's modules (function-level imports included)
  reaches none of the writable side's modules;
* a process that imports *and runs* the lane — the handle built without the runtime, an
  automatic recall and a ``memory_search`` against the loopback fakes — and then finds none
  of them in ``sys.modules``;
* a walk over everything a real session's :class:`~qmem.recall.Recall` holds, after the
  session stored a record and recalled: no runtime, index, outbox, gateway client or SQLite
  connection is reachable from it, so handing it the runtime again (or a method or closure
  of it) fails here;
* a process that answers an MCP ``initialize`` and ``tools/list`` and a bridge ``ping``, then
  finds no SQLite, HTTP stack, scanner or lane module loaded.
"""

import gc
import json
import subprocess
import sys
import textwrap
import types
import unittest

from qmem.clients.embeddings import EmbeddingsClient
from qmem.clients.gateway import GatewayClient
from qmem.clients.qdrant import ReadOnlyQdrant
from qmem.config import load_config, resolve_paths
from qmem.diagnostics import Warnings
from qmem.hosts.recallservices import RecallServices
from qmem.hosts.session import PluginSession
from qmem.localdb.outbox import Outbox
from qmem.localindex import LocalIndex
from qmem.recall import Recall
from qmem.runtime import Runtime

from .fakes import FakeEmbeddings, FakeQdrant, embed_text
from .packagemap import import_closure
from .support import REPO, GatewayTestCase

#: The recall lane, and the handle it is given.
RECALL_LANE = ("recall", "clients.qdrant", "clients.embeddings", "fence.memorycontext", "hosts.recallservices")
#: What the recall lane must never load: the writable local side, the gateway lane, the runtime.
WRITABLE_SIDE = {"localindex", "localdb.outbox", "store", "sync", "clients.gateway", "runtime"}

DIM = 32
READ_KEY, EMB_KEY = "lane-read-key", "lane-embedding-key"


def reachable(root: object) -> list[object]:
    """Every object ``root`` holds, directly or not: attributes, items, closure cells, bound
    methods' ``self``.  Classes, modules and functions' globals are not followed: they lead to
    everything loaded, not to what this object was given."""
    seen: set[int] = set()
    found: list[object] = []
    pending = [root]
    while pending:
        obj = pending.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        found.append(obj)
        if isinstance(obj, (type, types.ModuleType, str, bytes, int, float, type(None))):
            continue
        if isinstance(obj, types.FunctionType):
            pending += [cell.cell_contents for cell in obj.__closure__ or () if cell.cell_contents is not None]
            pending += [*(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values()]
            continue
        pending += gc.get_referents(obj)
    return found


class StaticTests(unittest.TestCase):
    def test_the_recall_lane_imports_nothing_of_the_writable_side(self):
        closure = import_closure(RECALL_LANE)
        self.assertIn("secretscan.engine", closure)  # the walk really follows imports
        self.assertEqual(closure & WRITABLE_SIDE, set(), sorted(closure))


LANE_RUN = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path

    from qmem import config
    from qmem.diagnostics import Warnings
    from qmem.recall import Recall
    from qmem.hosts.recallservices import recall_services

    env = dict(os.environ)
    loaded = config.load_config(env)
    said = []
    services = recall_services(loaded, config.resolve_paths(loaded, env), env, Warnings(said.append))
    recall = Recall(services, host="pi", cwd=Path(sys.argv[1]))
    messages = recall.context([{"role": "user", "content": "how do we deploy blue green?"}])
    answer = recall.memory_search({"query": "blue green deploys"})
    recall.close()
    print(json.dumps({"block": messages[-1].get("content"), "answer": answer["text"], "said": said,
                      "modules": sorted(m for m in sys.modules if m.startswith("qmem"))}))
""")


class RecallLaneTestCase(GatewayTestCase):
    def setUp(self):
        super().setUp()
        self.qdrant = FakeQdrant(keys={READ_KEY: "r"}).start()
        self.addCleanup(self.qdrant.stop)
        self.embeddings = FakeEmbeddings(api_key=EMB_KEY, models={"bge-m3": DIM}).start()
        self.addCleanup(self.embeddings.stop)
        self.qdrant.create_collection("qmem_memories", size=DIM, distance="Cosine")
        text = "The deploy pipeline uses blue green switching"
        self.qdrant.add_point("qmem_memories", 1, embed_text(text, DIM), {
            "host": "pi", "status": "active", "secret_scan": "passed", "text": text, "project": "proj",
            "source_type": "hermes", "source_collection": "hermes_memories", "source_id": "1",
            "import_run_id": "ab" * 32, "transform_version": "hermes-v1", "created_at": "2026-01-01T00:00:00Z"})
        self.env.update(QMEM_QDRANT_API_KEY=READ_KEY, QMEM_EMBEDDING_API_KEY=EMB_KEY)
        self.configure(recall={"qdrantUrl": self.qdrant.url, "embeddingsUrl": self.embeddings.base_url,
                               "dimension": DIM, "timeoutMs": 5000})
        self.project = self.home / "proj"
        (self.project / ".git").mkdir(parents=True)


class LaneProcessTests(RecallLaneTestCase):
    def test_running_the_recall_lane_loads_nothing_of_the_writable_side(self):
        proc = subprocess.run([sys.executable, "-c", LANE_RUN, str(self.project)], cwd=REPO, env=self.env,
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        # The lane really ran: one embedding, both lanes searched, the record recalled and found.
        self.assertIn("blue green switching", report["block"])
        self.assertIn("blue green switching", report["answer"])
        self.assertEqual(report["said"], [])
        self.assertEqual(len(self.embeddings.inputs), 2)
        self.assertEqual(self.qdrant.mutations(), [])
        loaded = {name.removeprefix("qmem.") for name in report["modules"]}
        self.assertLessEqual(set(RECALL_LANE), loaded)
        self.assertEqual(loaded & WRITABLE_SIDE, set(), sorted(loaded))
        self.assertFalse(resolve_paths(load_config(self.env), self.env).database.exists())  # no index was made


class HandleTests(RecallLaneTestCase):
    def test_recall_takes_the_handle_and_refuses_the_runtime(self):
        runtime = Runtime(self.env)
        self.addCleanup(runtime.close)
        with self.assertRaises(TypeError):
            Recall(runtime, host="pi", cwd=self.project)
        services = runtime.recall_services()
        self.assertIs(type(services), RecallServices)
        self.assertEqual(services.credential("qdrant"), READ_KEY)
        with self.assertRaises(ValueError):  # the handle holds no gateway key
            services.credential("gateway")
        self.assertNotIn(READ_KEY, repr(services))

    def test_nothing_a_session_recall_holds_reaches_the_index_the_outbox_or_the_gateway(self):
        session = PluginSession(host="pi", cwd=self.project, env=dict(self.env), warnings=Warnings([].append))
        self.addCleanup(session.close)
        session.call_tool("qmem_store", {"text": "a record through the gateway", "project_id": "proj"})
        self.assertEqual(self.gateway.count_by_text(), {"a record through the gateway": 1})
        session.call_tool("qmem_search", {"query": "record"})
        self.assertIn("blue green switching", session.context([{"role": "user", "content": "blue green"}])[-1]
                      ["content"])
        self.assertIn("blue green switching", session.call_tool("memory_search", {"query": "deploys"})
                      ["content"][0]["text"])
        session.wait_for_flush(timeout=30)

        forbidden = (Runtime, LocalIndex, Outbox, GatewayClient, __import__("sqlite3").Connection)
        held = reachable(session.recall)
        self.assertTrue(any(isinstance(obj, ReadOnlyQdrant) for obj in held))  # the walk reaches the clients
        self.assertTrue(any(isinstance(obj, EmbeddingsClient) for obj in held))
        self.assertEqual([type(obj).__name__ for obj in held if isinstance(obj, forbidden)], [])
        self.assertIs(type(session.recall.services), RecallServices)
        # The same walk from the session finds the writable side: it can see what it looks for.
        from_session = {type(obj) for obj in reachable(session) if isinstance(obj, forbidden)}
        self.assertLessEqual({Runtime, LocalIndex, GatewayClient}, from_session)


STARTUP_LANES = textwrap.dedent("""
    import io, json, sys
    from qmem import bridge, mcp
    from qmem.diagnostics import Warnings
    from qmem.hosts.session import PluginSession

    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    out = io.BytesIO()
    session = PluginSession(host=None, cwd=sys.argv[1], env={"HOME": sys.argv[1]}, warnings=Warnings())
    mcp.McpServer(session, io.BytesIO("".join(json.dumps(m) + "\\n" for m in lines).encode()), out).serve()
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [a["id"] for a in answers] == [1, 2] and "tools" in answers[1]["result"], answers
    out = io.BytesIO()
    bridge.Bridge(io.BytesIO(b'{"id": 1, "method": "ping"}\\n'), out, {"HOME": sys.argv[1]}).serve()
    assert b'"pong"' in out.getvalue(), out.getvalue()
    print(json.dumps(sorted(sys.modules)))
""")


class StartUpLaneTests(GatewayTestCase):
    """An MCP handshake, a tool list and a bridge's ready line load no lane they do not use: no
    SQLite, no HTTP stack, no credential scanner, no index, outbox, gateway or recall."""

    def test_the_handshake_loads_no_lane(self):
        proc = subprocess.run([sys.executable, "-c", STARTUP_LANES, str(self.home)], cwd=self.home, env=self.env,
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
        loaded = set(json.loads(proc.stdout.strip().splitlines()[-1]))
        unused = {"sqlite3", "http.client", "ssl", "qmem.secretscan.engine", "qmem.localindex", "qmem.localdb.outbox",
                  "qmem.clients.gateway", "qmem.store", "qmem.sync", "qmem.recall", "qmem.clients.qdrant", "qmem.clients.embeddings"}
        self.assertEqual(unused & loaded, set())


#: Runs ``qmem.local`` with the given arguments in this process, then prints what it loaded.
COMMAND_MODULES = textwrap.dedent("""
    import json, runpy, sys
    command = sys.argv[1:]
    sys.argv = ["qmem-local", *command]
    try:
        runpy.run_module("qmem.local", run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        code = stop.code
    else:
        code = 0
    sys.stderr.write(json.dumps({"code": code, "modules": sorted(sys.modules)}) + chr(10))
""")

#: What a read of the local index never needs: the outbox's writer, the atomic-write stack
#: (tempfile, shutil and the compressors it brings), the credential scanner, any HTTP.
READS_NEVER_LOAD = {
    "qmem.localdb.outbox", "qmem.files.atomicfile", "tempfile", "random",
    "qmem.secretscan", "qmem.secretscan.engine", "qmem.secretscan.families",
    "http", "http.client", "urllib.request", "socket", "ssl", "email",
    "qmem.clients.transport", "qmem.clients.gateway", "qmem.clients.qdrant", "qmem.clients.embeddings",
    "qmem.store", "qmem.sync", "qmem.recall", "qmem.setup.doctor",
}


class CommandImportTests(GatewayTestCase):
    """``find``, ``status`` and ``queue`` load only what a read of the index uses, on a clean
    interpreter (no ``.pth`` preloading part of it).  A change that imports one of
    :data:`READS_NEVER_LOAD` eagerly on these paths fails here."""

    def loaded_by(self, *command: str) -> set[str]:
        from .cleanpython import clean_interpreter

        python = clean_interpreter() or sys.executable
        proc = subprocess.run([python, "-c", COMMAND_MODULES, *command], cwd=self.home, env=self.env,
                              capture_output=True, text=True, timeout=120)
        report = json.loads(proc.stderr.strip().splitlines()[-1])
        self.assertEqual(report["code"], 0, proc.stdout + proc.stderr[-2000:])
        return set(report["modules"])

    def test_an_import_with_nothing_new_loads_no_doctor_scanner_or_http(self):
        sessions = self.home / ".pi" / "agent" / "sessions" / "p"
        sessions.mkdir(parents=True)
        (sessions / "s.jsonl").write_text('{"type": "session", "id": "s"}\n', encoding="utf-8")
        self.configure()
        for _ in range(2):  # the second run finds nothing new
            loaded = self.loaded_by("import")
        never = {"qmem.setup", "qmem.setup.doctor", "qmem.secretscan.audit", "qmem.clients.embeddings",
                 "qmem.clients.gateway", "qmem.clients.transport", "http.client", "ssl", "tempfile", "shutil"}
        self.assertEqual(loaded & never, set())

    def test_reads_load_no_writer_scanner_or_http(self):
        self.configure()
        self.run_module("qmem.local", "store", "--queue-only", "--project", "p", "--text", "a lane note")
        for command in (("find", "lane"), ("find", "--json", "--project", "p", "lane"), ("status",),
                        ("status", "--json"), ("queue",), ("queue", "--json")):
            with self.subTest(command=command):
                self.assertEqual(self.loaded_by(*command) & READS_NEVER_LOAD, set())
