"""``python -m qmem.mcp``: raw JSON-RPC over real pipes, and the official MCP Python SDK client."""

import json
import subprocess
import sys
import textwrap

from .fakes import refused_url
from .hosts import MCP_VERSION, mcp_python
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
            self.request(6, "resources/list"),
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
    import mcp
    from mcp.client import session as mcp_session

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
        # The high-level client probes with server/discover first and must fall back on qmem's
        # -32601.  Its probe timeout is lifted far past the test's watchdog: a server that left the
        # probe unanswered would hang the client here instead of costing 10 s unnoticed.
        mcp_session.DISCOVER_TIMEOUT_SECONDS = 3600
        async with mcp.Client(params) as client:
            listed = await client.list_tools()
            out["auto_tools"] = len(listed.tools)
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
        self.assertEqual(out["auto_tools"], 5)  # after -32601 to server/discover (see SDK_CLIENT)

    def test_search_with_the_gateway_down_is_a_labelled_local_fallback(self):
        out = self.client(refused_url())
        self.assertTrue(out["store"]["structured"]["queued"])
        search = out["search"]
        self.assertFalse(search["error"])
        self.assertEqual(search["structured"]["fallback"], "local_sqlite")
        self.assertIsNone(search["structured"]["results"][0]["score"])
        self.assertIn("no semantic scores", search["text"])


class VersionPinTests(GatewayTestCase):
    def test_the_pinned_sdk_is_the_one_tested(self):
        python, reason = mcp_python()
        if python is None:
            self.skipTest(reason)
        proc = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('mcp'))"],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.stdout.strip(), MCP_VERSION)
