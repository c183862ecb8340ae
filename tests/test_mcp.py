"""``python -m qmem.mcp``: raw JSON-RPC over real pipes in both protocol eras, and the official MCP
Python SDK clients: 2.3.0 (the 2026-07-28 era, by discovery and pinned, and its handshake
``ClientSession``) and 1.30 (handshake only)."""

import json
import subprocess
import sys
import textwrap

from .fakes import FakeEmbeddings, FakeQdrant, embed_text, refused_url
from .hosts import MCP1_VERSION, MCP_VERSION, inspector_executable, mcp1_python, mcp_python
from .support import REPO, GatewayTestCase


class RawProtocolTests(GatewayTestCase):
    def exchange(self, *lines, env=None, timeout=60):
        """Send ``lines`` (dicts are JSON-encoded), close stdin, return the answers and stderr."""
        payload = "".join((json.dumps(line) if not isinstance(line, str) else line) + "\n" for line in lines)
        proc = subprocess.run([sys.executable, "-m", "qmem.mcp"], input=payload, capture_output=True, text=True,
                              env=env or self.env, cwd=self.home, timeout=timeout)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        answers = [json.loads(line) for line in proc.stdout.splitlines()]  # stdout holds JSON-RPC only
        return answers, proc.stderr

    def request(self, request_id, method, params=None):
        message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        return message

    def initialize(self, version="2025-11-25"):
        return self.request(0, "initialize", {"protocolVersion": version, "capabilities": {},
                                              "clientInfo": {"name": "test", "version": "1"}})

    def test_handshake_versions(self):
        for requested, expected in (("2024-11-05", "2024-11-05"), ("2025-03-26", "2025-03-26"),
                                    ("2025-06-18", "2025-06-18"), ("2025-11-25", "2025-11-25"),
                                    ("2026-07-28", "2025-11-25"), ("1999-01-01", "2025-11-25")):
            with self.subTest(requested=requested):
                [answer], _ = self.exchange(self.initialize(requested))
                result = answer["result"]
                self.assertEqual(result["protocolVersion"], expected)
                self.assertEqual(result["serverInfo"]["name"], "qmem")
                self.assertIn("tools", result["capabilities"])

    def test_error_paths(self):
        answers, _ = self.exchange(
            self.request(1, "server/discover", {"_meta": {}}),  # before initialize: -32601, not silence
            self.initialize(),
            {"jsonrpc": "2.0", "method": "notifications/initialized"},  # never answered
            "{this is not json",
            [self.request(2, "ping")],  # a batch
            {"jsonrpc": "1.0", "id": 3, "method": "ping"},
            {"jsonrpc": "2.0", "id": 4},
            {"jsonrpc": "2.0", "id": [5], "method": "ping"},
            self.request(6, "prompts/list"),
            self.request(7, "tools/call", {"arguments": {}}),
            self.request(8, "tools/call", {"name": "qmem_search", "arguments": "query=x"}),
            self.request(9, "tools/call", {"name": "rm -rf"}),
            self.request(10, "tools/list", ["not", "an", "object"]),
            self.request(11, "ping"),
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}},
        )
        got = [(a.get("id"), a["error"]["code"] if "error" in a else "ok") for a in answers]
        self.assertEqual(got, [(1, -32601), (0, "ok"), (None, -32700), (None, -32600), (3, -32600), (4, -32600),
                               (None, -32600), (6, -32601), (7, -32602), (8, -32602), (9, -32602), (10, -32602),
                               (11, "ok")])
        self.assertEqual(answers[-1]["result"], {})

    ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}}

    def modern(self, request_id, method, params=None, **meta):
        envelope = {key: value for key, value in dict(self.ENVELOPE, **meta).items() if value is not None}
        return self.request(request_id, method, dict(params or {}, _meta=envelope))

    def test_the_2026_era_is_stateless_and_carries_its_required_fields(self):
        answers, _ = self.exchange(
            self.modern(1, "server/discover"),
            self.modern(2, "tools/list"),
            self.modern(3, "tools/call", {"name": "qmem_store", "arguments": {"text": "modern", "project_id": "p"}}),
            self.modern(4, "ping"),  # removed in 2026-07-28
            self.initialize(),  # no handshake on a modern connection
            self.request(5, "tools/list"),  # no envelope
            [self.modern(6, "tools/list")],  # no batches
        )
        by_id = {a.get("id"): a for a in answers}
        discover = by_id[1]["result"]
        self.assertEqual(discover["supportedVersions"], ["2026-07-28"])
        self.assertEqual(discover["capabilities"], {"tools": {"listChanged": False},  # nothing deprecated
                                                    "resources": {"subscribe": False, "listChanged": False}})
        self.assertIn("## qmem rules", discover["instructions"])
        for answer in (by_id[1], by_id[2], by_id[3]):
            result = answer["result"]
            self.assertEqual(result["resultType"], "complete")
            self.assertEqual(result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "qmem")
        for cacheable in (discover, by_id[2]["result"]):
            self.assertEqual((cacheable["ttlMs"], cacheable["cacheScope"]), (0, "private"))
        self.assertEqual(by_id[2]["result"]["tools"][0]["annotations"]["openWorldHint"], False)
        self.assertFalse(by_id[3]["result"]["isError"])
        self.assertTrue(by_id[3]["result"]["structuredContent"]["shared"])
        self.assertEqual(by_id[4]["error"]["code"], -32601)
        self.assertEqual(by_id[0]["error"]["code"], -32022)
        self.assertEqual(by_id[0]["error"]["data"]["supported"], ["2026-07-28"])
        self.assertEqual(by_id[5]["error"]["code"], -32602)
        self.assertEqual(by_id[None]["error"]["code"], -32600)
        self.assertEqual(self.gateway.count_by_text(), {"modern": 1})

    def test_memory_resources_in_both_eras(self):
        stored, _ = self.exchange(self.initialize(), self.request(1, "tools/call", {
            "name": "qmem_store", "arguments": {"text": "a resource record", "project_id": "res"}}))
        record_id = stored[1]["result"]["structuredContent"]["record"]["id"]
        for opening, ask in ((self.initialize(), self.request), (self.modern(0, "server/discover"), self.modern)):
            with self.subTest(era="handshake" if ask == self.request else "2026-07-28"):
                answers, _ = self.exchange(
                    opening, ask(1, "resources/list"), ask(2, "resources/templates/list"),
                    ask(3, "resources/read", {"uri": "memory://meta"}),
                    ask(4, "resources/read", {"uri": f"memory://record/{record_id}"}),
                    ask(5, "resources/read", {"uri": "memory://record/no-such-record"}),
                    ask(6, "resources/read", {"uri": "file:///etc/passwd"}),
                    ask(7, "resources/read", {}))
                by_id = {a.get("id"): a for a in answers}
                self.assertIn("resources", (by_id[0]["result"]["capabilities"]))
                self.assertEqual([r["uri"] for r in by_id[1]["result"]["resources"]], ["memory://meta"])
                self.assertEqual(by_id[2]["result"]["resourceTemplates"][0]["uriTemplate"], "memory://record/{id}")
                self.assertIn("res", by_id[3]["result"]["contents"][0]["text"])
                [content] = by_id[4]["result"]["contents"]
                self.assertEqual((content["uri"], content["mimeType"]), (f"memory://record/{record_id}", "text/plain"))
                self.assertIn("a resource record", content["text"])
                self.assertEqual([by_id[i]["error"]["code"] for i in (5, 6, 7)], [-32002, -32002, -32602])
                if ask == self.modern:
                    for i in (1, 2, 3, 4):
                        self.assertEqual(by_id[i]["result"]["resultType"], "complete")
                        self.assertEqual(by_id[i]["result"]["ttlMs"], 0)
        self.assertEqual(self.gateway.count_by_text(), {"a resource record": 1})  # reading stored nothing

    def test_a_refused_envelope_decides_no_era_and_the_eras_do_not_mix(self):
        answers, _ = self.exchange(
            self.modern(1, "server/discover", **{"io.modelcontextprotocol/protocolVersion": "2099-01-01"}),
            self.modern(2, "server/discover", **{"io.modelcontextprotocol/clientCapabilities": None}),
            self.modern(3, "tools/list", **{"io.modelcontextprotocol/protocolVersion": 7}),
            self.initialize("2024-11-05"),  # still available: nothing was accepted
            self.modern(4, "tools/list"),  # the handshake era is decided now
            self.request(5, "tools/list"),
        )
        by_id = {a.get("id"): a for a in answers}
        refused = by_id[1]["error"]
        self.assertEqual(refused["code"], -32022)
        self.assertEqual(refused["data"], {"supported": ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25",
                                                         "2026-07-28"], "requested": "2099-01-01"})
        self.assertEqual(by_id[2]["error"]["code"], -32602)
        self.assertIn("clientCapabilities", by_id[2]["error"]["message"])
        self.assertEqual(by_id[3]["error"]["code"], -32602)
        self.assertEqual(by_id[0]["result"]["protocolVersion"], "2024-11-05")
        self.assertEqual(by_id[4]["error"]["code"], -32600)
        self.assertNotIn("annotations", by_id[5]["result"]["tools"][0])  # answered at 2024-11-05

    def test_tools_list_annotations_and_features_by_version(self):
        self.configure_recall()
        answers, _ = self.exchange(self.initialize(), self.request(1, "tools/list"),
                                   env=dict(self.env, QMEM_HOST="pi"))
        tools = {tool["name"]: tool for tool in answers[1]["result"]["tools"]}
        self.assertEqual(set(tools), {"qmem_store", "qmem_search", "qmem_correct", "qmem_meta", "qmem_get",
                                      "memory_search"})
        for name, tool in tools.items():
            self.assertEqual(tool["inputSchema"]["type"], "object")
            self.assertIs(tool["annotations"]["openWorldHint"], False)
            self.assertEqual(tool["annotations"]["readOnlyHint"], name in ("qmem_search", "qmem_get", "qmem_meta",
                                                                          "memory_search"))
            self.assertTrue(tool["title"])
        old, _ = self.exchange(self.initialize("2024-11-05"), self.request(1, "tools/list"),
                               self.request(2, "tools/call", {"name": "qmem_meta", "arguments": {}}))
        self.assertNotIn("annotations", old[1]["result"]["tools"][0])
        self.assertNotIn("title", old[1]["result"]["tools"][0])
        self.assertNotIn("structuredContent", old[2]["result"])

    def configure_recall(self):
        self.configure(recall={"qdrantUrl": refused_url(), "embeddingsUrl": refused_url("/v1")})

    def test_memory_search_is_listed_only_where_recall_is_on_for_a_host(self):
        def listed(env):
            answers, _ = self.exchange(self.initialize(), self.request(1, "tools/list"), env=env)
            return {tool["name"] for tool in answers[1]["result"]["tools"]}

        self.assertNotIn("memory_search", listed(dict(self.env, QMEM_HOST="pi")))  # recall not configured
        self.configure_recall()
        self.assertNotIn("memory_search", listed(self.env))  # no host identity
        self.assertNotIn("memory_search", listed(dict(self.env, QMEM_HOST="hermes")))
        self.assertIn("memory_search", listed(dict(self.env, QMEM_HOST="prime")))
        self.configure(recall={"qdrantUrl": refused_url(), "embeddingsUrl": refused_url("/v1"), "enabled": False})
        self.assertNotIn("memory_search", listed(dict(self.env, QMEM_HOST="pi")))

    def test_instructions_are_the_rules_block_with_the_machine(self):
        from qmem.hosts.rules import machine_identity

        (self.home / "shop" / ".git").mkdir(parents=True)
        proc = subprocess.run([sys.executable, "-m", "qmem.mcp"], input=json.dumps(self.initialize()) + "\n",
                              capture_output=True, text=True, env=self.env, cwd=self.home / "shop", timeout=60)
        instructions = json.loads(proc.stdout)["result"]["instructions"]
        hostname, os_name = machine_identity()
        for fragment in ("## qmem rules", 'use "shop"', "qmem_correct", "0.60", "untrusted", "Machine identification",
                         f"Current machine: {hostname} ({os_name})"):
            self.assertIn(fragment, instructions)

    def test_bad_unicode_in_arguments_is_a_tool_error_and_the_answer_is_always_written(self):
        lines = [json.dumps(self.initialize()),
                 '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"qmem_search",'
                 '"arguments":{"query":"bad \\udcff here"}}}',
                 '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"qmem_store",'
                 '"arguments":{"text":"fine","project_id":"p\\ud800"}}}',
                 '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"qmem_\\ud800",'
                 '"arguments":{}}}',
                 '{"jsonrpc":"2.0","id":"\\udc80","method":"ping"}']
        answers, stderr = self.exchange(*lines)
        by_id = {answer.get("id"): answer for answer in answers}
        for request_id, argument in ((1, "query"), (2, "project_id")):
            result = by_id[request_id]["result"]
            self.assertTrue(result["isError"])
            self.assertIn(f"{argument} is not valid Unicode text", result["content"][0]["text"])
        self.assertEqual(by_id[3]["error"]["code"], -32602)  # an unknown tool, named with U+FFFD
        self.assertIn("\ufffd", by_id[3]["error"]["message"])
        self.assertEqual(by_id["\udc80"]["result"], {})  # the id echoed exactly, as an escape
        self.assertNotIn("internal error", stderr)
        self.assertEqual(self.gateway.count_by_text(), {})

    def test_version_and_arguments(self):
        from qmem import __version__

        version = subprocess.run([sys.executable, "-m", "qmem.mcp", "--version"], capture_output=True, text=True,
                                 env=self.env, timeout=60)
        self.assertEqual((version.returncode, version.stdout), (0, f"qmem-mcp {__version__}\n"))
        bad = subprocess.run([sys.executable, "-m", "qmem.mcp", "--frobnicate"], capture_output=True, text=True,
                             env=self.env, timeout=60)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("unexpected arguments", bad.stderr)

    def test_tool_calls_and_tool_errors(self):
        answers, _ = self.exchange(
            self.initialize(),
            self.request(1, "tools/call", {"name": "qmem_store", "arguments": {"text": "from mcp", "project_id": "p"}}),
            self.request(2, "tools/call", {"name": "qmem_store", "arguments": {"text": "no project"}}),
            self.request(3, "tools/call", {"name": "memory_search", "arguments": {"query": "x"}}),
            self.request(4, "tools/call", {"name": "qmem_search", "arguments": {"query": "from mcp"}}),
        )
        stored = answers[1]["result"]
        self.assertFalse(stored["isError"])
        self.assertTrue(stored["structuredContent"]["shared"])
        self.assertEqual(self.gateway.count_by_text(), {"from mcp": 1})
        self.assertTrue(answers[2]["result"]["isError"])
        self.assertIn("project_id", answers[2]["result"]["content"][0]["text"])
        self.assertTrue(answers[3]["result"]["isError"])
        self.assertIn("not configured", answers[3]["result"]["content"][0]["text"])
        self.assertEqual(answers[4]["result"]["structuredContent"]["results"][0]["text"], "from mcp")

    def test_a_thousand_pipelined_requests_in_order(self):
        self.configure(refused_url())
        lines = [self.initialize()]
        for i in range(1, 1001):
            if i % 10 == 0:
                lines.append(self.request(i, "tools/call", {"name": "qmem_search", "arguments": {"query": f"q {i}"}}))
            else:
                lines.append(self.request(i, "ping" if i % 2 else "tools/list"))
        answers, _ = self.exchange(*lines)
        self.assertEqual([a["id"] for a in answers], list(range(0, 1001)))
        self.assertTrue(all("result" in a for a in answers))

    def test_eof_ends_the_server_promptly(self):
        answers, stderr = self.exchange(self.initialize())  # exchange waits for the exit (and fails past 60 s)
        self.assertEqual(len(answers), 1)
        self.assertNotIn("Traceback", stderr)


SDK_CLIENT = textwrap.dedent("""
    import asyncio, json, sys
    from mcp import ClientSession, StdioServerParameters, stdio_client

    async def main():
        params = StdioServerParameters(command=sys.argv[1], args=["-m", "qmem.mcp"], env=json.loads(sys.argv[2]),
                                       cwd=sys.argv[3])
        out = {}
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=60) as session:
                init = await session.initialize()
                out["version"] = init.protocol_version
                out["server"] = init.server_info.name
                tools = await session.list_tools()
                out["tools"] = sorted(t.name for t in tools.tools)
                out["read_only"] = sorted(t.name for t in tools.tools if t.annotations.read_only_hint)
                stored = await session.call_tool("qmem_store", {"text": "stored by the sdk", "project_id": "sdk"})
                out["store"] = {"error": stored.is_error, "structured": stored.structured_content}
                searched = await session.call_tool("qmem_search", {"query": "stored by the sdk"})
                out["search"] = {"error": searched.is_error, "structured": searched.structured_content,
                                 "text": searched.content[0].text}
                bad = await session.call_tool("qmem_get", {})
                out["bad"] = {"error": bad.is_error, "text": bad.content[0].text}
        print(json.dumps(out))

    asyncio.run(main())
""")


class SdkClientTests(GatewayTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.python, reason = mcp_python()
        if cls.python is None:
            cls.skip_reason = reason

    def setUp(self):
        if self.python is None:
            self.skipTest(self.skip_reason)
        super().setUp()

    def client(self, url):
        self.configure(url)
        script = self.home / "client.py"
        script.write_text(SDK_CLIENT)
        # What an MCP configuration gives the server: the SDK passes HOME and PATH, plus this env.
        server_env = {"PYTHONPATH": str(REPO), "QMEM_GATEWAY_API_KEY": self.API_KEY}
        proc = subprocess.run([str(self.python), str(script), sys.executable, json.dumps(server_env), str(self.home)],
                              capture_output=True, text=True, env=self.env, timeout=180)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def test_initialize_list_store_and_search(self):
        out = self.client(self.gateway.url)
        self.assertEqual((out["version"], out["server"]), ("2025-11-25", "qmem"))
        # No recall in this configuration: memory_search is not offered.
        self.assertEqual(out["tools"], ["qmem_correct", "qmem_get", "qmem_meta", "qmem_search", "qmem_store"])
        self.assertEqual(out["read_only"], ["qmem_get", "qmem_meta", "qmem_search"])
        self.assertFalse(out["store"]["error"])
        self.assertTrue(out["store"]["structured"]["shared"])
        self.assertEqual(self.gateway.count_by_text(), {"stored by the sdk": 1})
        self.assertNotIn("fallback", out["search"]["structured"])
        self.assertTrue(out["bad"]["error"])

    def test_search_with_the_gateway_down_is_a_labelled_local_fallback(self):
        out = self.client(refused_url())
        self.assertTrue(out["store"]["structured"]["queued"])
        search = out["search"]
        self.assertFalse(search["error"])
        self.assertEqual(search["structured"]["fallback"], "local_sqlite")
        self.assertIsNone(search["structured"]["results"][0]["score"])
        self.assertIn("no semantic scores", search["text"])


MODERN_CLIENT = textwrap.dedent("""
    import asyncio, json, sys
    import mcp
    from mcp import StdioServerParameters
    from mcp.client import session as mcp_session

    async def main(mode):
        params = StdioServerParameters(command=sys.argv[1], args=["-m", "qmem.mcp"], env=json.loads(sys.argv[2]),
                                       cwd=sys.argv[3])
        out = {}
        # A server that left the discovery probe unanswered would hang the client here past the
        # test's watchdog, instead of costing 10 s and a silent fall back to the handshake.
        mcp_session.DISCOVER_TIMEOUT_SECONDS = 3600
        async with mcp.Client(params, mode=mode, read_timeout_seconds=60) as client:
            session = client.session
            out["version"] = client.protocol_version
            out["discovered"] = session.discover_result is not None
            out["initialized"] = session.initialize_result is not None
            if session.discover_result is not None:
                out["instructions"] = session.discover_result.instructions
                out["server"] = client.server_info.name if client.server_info else None
            tools = await client.list_tools()
            out["tools"] = sorted(t.name for t in tools.tools)
            stored = await client.call_tool("qmem_store", {"text": "stored in 2026", "project_id": "sdk"})
            out["store"] = {"error": stored.is_error, "structured": stored.structured_content}
            searched = await client.call_tool("qmem_search", {"query": "stored in 2026"})
            out["search"] = {"error": searched.is_error, "text": searched.content[0].text}
            recalled = await client.call_tool("memory_search", {"query": "deploy with blue green"})
            out["recall"] = {"error": recalled.is_error, "text": recalled.content[0].text}
            resources = await client.list_resources()
            out["resources"] = [str(r.uri) for r in resources.resources]
            meta = await client.read_resource("memory://meta")
            out["meta"] = meta.contents[0].text
        print(json.dumps(out))

    asyncio.run(main(sys.argv[4]))
""")

SDK1_CLIENT = textwrap.dedent("""
    import asyncio, json, sys
    from mcp import ClientSession, StdioServerParameters, stdio_client
    from mcp.types import LATEST_PROTOCOL_VERSION

    async def main():
        params = StdioServerParameters(command=sys.argv[1], args=["-m", "qmem.mcp"], env=json.loads(sys.argv[2]),
                                       cwd=sys.argv[3])
        out = {"offered": LATEST_PROTOCOL_VERSION}
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                out["version"] = init.protocolVersion
                tools = await session.list_tools()
                out["tools"] = sorted(t.name for t in tools.tools)
                stored = await session.call_tool("qmem_store", {"text": "stored by sdk 1", "project_id": "sdk"})
                out["store"] = {"error": stored.isError, "structured": stored.structuredContent}
                searched = await session.call_tool("qmem_search", {"query": "stored by sdk 1"})
                out["search"] = {"error": searched.isError, "text": searched.content[0].text}
        print(json.dumps(out))

    asyncio.run(main())
""")


class RecallingServerTestCase(GatewayTestCase):
    """A server with recall on for pi: fake Qdrant holding one curated memory, fake embeddings."""

    def setUp(self):
        super().setUp()
        from .test_recall import DIM, payload

        self.qdrant = FakeQdrant(keys={"read": "r"}).start()
        self.addCleanup(self.qdrant.stop)
        self.qdrant.create_collection("qmem_memories", size=DIM, distance="Cosine")
        self.qdrant.add_point("qmem_memories", 1, embed_text("deploy with blue green", DIM),
                              payload("deploy with blue green", host="pi"))
        self.embeddings = FakeEmbeddings(api_key="emb", models={"bge-m3": DIM}).start()
        self.addCleanup(self.embeddings.stop)
        self.configure(recall={"qdrantUrl": self.qdrant.url, "embeddingsUrl": self.embeddings.base_url,
                               "dimension": DIM, "timeoutMs": 5000})

    def run_client(self, python, script_text, *extra):
        script = self.home / "client.py"
        script.write_text(script_text)
        server_env = {"PYTHONPATH": str(REPO), "QMEM_GATEWAY_API_KEY": self.API_KEY, "QMEM_QDRANT_API_KEY": "read",
                      "QMEM_EMBEDDING_API_KEY": "emb", "QMEM_HOST": "pi"}
        proc = subprocess.run([str(python), str(script), sys.executable, json.dumps(server_env), str(self.home),
                               *extra], capture_output=True, text=True, env=self.env, timeout=180)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        return json.loads(proc.stdout.strip().splitlines()[-1])


class ModernSdkClientTests(RecallingServerTestCase):
    """mcp 2.3.0's Client: by default it probes server/discover and must land in 2026-07-28, not fall
    back; pinned to 2026-07-28 it skips discovery and validates every result against that era's schema."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.python, cls.skip_reason = mcp_python()

    def setUp(self):
        if self.python is None:
            self.skipTest(self.skip_reason)
        super().setUp()

    def check(self, out):
        self.assertEqual(out["version"], "2026-07-28")
        self.assertFalse(out["initialized"])
        self.assertEqual(out["tools"], ["memory_search", "qmem_correct", "qmem_get", "qmem_meta", "qmem_search",
                                        "qmem_store"])
        self.assertFalse(out["store"]["error"])
        self.assertTrue(out["store"]["structured"]["shared"])
        self.assertFalse(out["search"]["error"])
        self.assertIn("stored in 2026", out["search"]["text"])
        self.assertFalse(out["recall"]["error"])
        self.assertIn("deploy with blue green", out["recall"]["text"])
        self.assertEqual(out["resources"], ["memory://meta"])
        self.assertIn("sdk", out["meta"])  # the project just stored to

    def test_the_default_client_discovers_2026_07_28(self):
        out = self.run_client(self.python, MODERN_CLIENT, "auto")
        self.check(out)
        self.assertTrue(out["discovered"])
        self.assertEqual(out["server"], "qmem")
        self.assertIn("## qmem rules", out["instructions"])
        self.assertEqual(self.gateway.count_by_text(), {"stored in 2026": 1})

    def test_a_client_pinned_to_2026_07_28_validates_strictly(self):
        out = self.run_client(self.python, MODERN_CLIENT, "2026-07-28")
        self.check(out)
        self.assertTrue(out["discovered"])  # the pin's synthesized discovery: no probe was sent


class Sdk1ClientTests(GatewayTestCase):
    """mcp 1.30: a handshake-only client, as most MCP clients in use are, negotiates the legacy era."""

    def setUp(self):
        self.python, reason = mcp1_python()
        if self.python is None:
            self.skipTest(reason)
        super().setUp()

    def test_the_1x_client_negotiates_the_handshake(self):
        script = self.home / "client.py"
        script.write_text(SDK1_CLIENT)
        server_env = {"PYTHONPATH": str(REPO), "QMEM_GATEWAY_API_KEY": self.API_KEY}
        proc = subprocess.run([str(self.python), str(script), sys.executable, json.dumps(server_env), str(self.home)],
                              capture_output=True, text=True, env=self.env, timeout=180)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        self.assertIn(out["offered"], ("2025-06-18", "2025-11-25"))
        self.assertEqual(out["version"], out["offered"])  # echoed: a handshake version qmem serves
        self.assertEqual(out["tools"], ["qmem_correct", "qmem_get", "qmem_meta", "qmem_search", "qmem_store"])
        self.assertFalse(out["store"]["error"])
        self.assertTrue(out["store"]["structured"]["shared"])
        self.assertIn("stored by sdk 1", out["search"]["text"])

    def test_the_pinned_1x_sdk_is_the_one_tested(self):
        proc = subprocess.run([str(self.python), "-c", "import importlib.metadata as m; print(m.version('mcp'))"],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.stdout.strip(), MCP1_VERSION)


class InspectorCliTests(GatewayTestCase):
    """The MCP Inspector's CLI (npm, its own TypeScript client) lists the tools and calls one."""

    def setUp(self):
        self.inspector, reason = inspector_executable()
        if self.inspector is None:
            self.skipTest(reason)
        super().setUp()

    def inspect(self, *method):
        proc = subprocess.run([str(self.inspector), "--cli", "-e", f"PYTHONPATH={REPO}", "-e",
                               f"QMEM_GATEWAY_API_KEY={self.API_KEY}", sys.executable, "-m", "qmem.mcp", *method],
                              cwd=self.home, env=self.env, capture_output=True, text=True, timeout=180)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        return json.loads(proc.stdout)

    def test_the_inspector_lists_and_calls(self):
        listed = self.inspect("--method", "tools/list")
        self.assertEqual(sorted(t["name"] for t in listed["tools"]),
                         ["qmem_correct", "qmem_get", "qmem_meta", "qmem_search", "qmem_store"])
        stored = self.inspect("--method", "tools/call", "--tool-name", "qmem_store", "--tool-arg",
                              "text=stored by the inspector", "--tool-arg", "project_id=insp")
        self.assertFalse(stored.get("isError"))
        self.assertTrue(stored["structuredContent"]["shared"])
        self.assertEqual(self.gateway.count_by_text(), {"stored by the inspector": 1})


class VersionPinTests(GatewayTestCase):
    def test_the_pinned_sdk_is_the_one_tested(self):
        python, reason = mcp_python()
        if python is None:
            self.skipTest(reason)
        proc = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('mcp'))"],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.stdout.strip(), MCP_VERSION)
