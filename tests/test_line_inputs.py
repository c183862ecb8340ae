"""Lines that once silenced or killed ``qmem.mcp`` or ``qmem.bridge``: each is answered (or dropped
with a warning) and the process goes on serving.

Every exchange ends with a ``ping`` that must be answered, an exit status of 0 at end of input,
no traceback on stderr, and every line written parsing as strict JSON (NaN/Infinity refused).
"""

from __future__ import annotations

import json
import unittest

from qmem.diagnostics import SENTENCES

from .fakes import FakeEmbeddings, FakeQdrant, Fault
from .linepeer import BRIDGE, MCP, NULL, Digits, LivePeer, exchange, id_key
from .support import GatewayTestCase

MCP_PING = {"jsonrpc": "2.0", "id": "last-ping", "method": "ping"}
BRIDGE_PING = {"id": "last-ping", "method": "ping"}


def line(message) -> bytes:
    return message if isinstance(message, bytes) else json.dumps(message).encode()


def mcp_initialize(version: str = "2025-11-25") -> dict:
    return {"jsonrpc": "2.0", "id": "init", "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def outcome(message: dict):
    """(id key, error code or category, or "ok") of one answer."""
    if "error" in message:
        error = message["error"]
        return id_key(message["id"]), error.get("code", error.get("category"))
    return id_key(message["id"]), "ok"


class LineTestCase(GatewayTestCase):
    def mcp(self, *lines, version: str = "2025-11-25") -> list:
        """MCP answers to ``lines`` (after initialize), the final ping checked and left out."""
        done = exchange(MCP, [line(mcp_initialize(version)), *map(line, lines), line(MCP_PING)], self.env,
                        str(self.home))
        self.assertEqual(done.code, 0, done.stderr)
        self.assertNotIn("Traceback", done.stderr)
        answers = done.messages
        self.assertEqual(outcome(answers[0]), (id_key("init"), "ok"))
        self.assertEqual(answers[-1], {"jsonrpc": "2.0", "id": "last-ping", "result": {}})
        return answers[1:-1]

    def bridge(self, *lines) -> list:
        """Bridge messages after ``ready`` for ``lines``, the final ping checked and left out."""
        done = exchange(BRIDGE, [*map(line, lines), line(BRIDGE_PING)], self.env, str(self.home))
        self.assertEqual(done.code, 0, done.stderr)
        self.assertEqual(done.stderr, "")
        self.assertEqual(done.messages[0]["event"], "ready")
        messages = done.messages[1:]
        pong = [m for m in messages if m.get("id") == "last-ping"]
        self.assertEqual(pong, [{"id": "last-ping", "result": {"pong": True}}])
        return [m for m in messages if m is not pong[0]]

    def assertAnswers(self, messages, expected):
        """The answers among ``messages`` (warnings left out) are ``expected``, in any order."""
        answers = [outcome(m) for m in messages if "id" in m]
        self.assertEqual(sorted(answers, key=repr), sorted(expected, key=repr))

    def warned(self, messages) -> list[str]:
        return [m["message"] for m in messages if m.get("event") == "warning"]


class LineInputTests(LineTestCase):
    def test_null_and_other_non_objects(self):
        self.assertAnswers(self.mcp(b"null", b"42", b'"x"', b"true"), [(NULL, -32600)] * 4)
        messages = self.bridge(b"null", b"42", b"[]")
        self.assertEqual(self.warned(messages), [SENTENCES["bridge_protocol"]])  # once, then quiet

    def test_nesting_deeper_than_the_parser_follows(self):
        for depth in (1_000, 5_000, 100_000):
            with self.subTest(depth=depth):
                request = (b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":' + deep(depth) + b'}}')
                self.assertAnswers(self.mcp(deep(depth), request), [(NULL, -32700), (id_key(7), -32700)])
                messages = self.bridge(deep(depth), b'{"id":7,"method":"ping","params":{"x":' + deep(depth) + b"}}")
                self.assertAnswers(messages, [(id_key(7), "bridge")])
                self.assertEqual(self.warned(messages), [SENTENCES["bridge_protocol"]])

    def test_list_and_object_ids(self):
        cancelled = "notifications/cancelled"
        self.assertAnswers(self.mcp({"jsonrpc": "2.0", "id": [1], "method": "ping"},
                                    {"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"},
                                    {"jsonrpc": "2.0", "method": cancelled, "params": {"requestId": [1]}},
                                    {"jsonrpc": "2.0", "method": cancelled, "params": {"requestId": {}}}),
                           [(NULL, -32600), (NULL, -32600)])
        messages = self.bridge({"id": [1], "method": "ping"}, {"id": {"a": [1]}, "method": "ping"},
                               {"method": "cancel", "params": {"id": [1]}}, {"method": "cancel", "params": {"id": {}}},
                               {"id": 3, "method": "cancel", "params": {"id": 1}})  # a notification sent with an id
        self.assertAnswers(messages, [(id_key([1]), "bridge"), (id_key({"a": [1]}), "bridge"),
                                      (id_key(3), "bridge")])

    def test_non_finite_ids_and_numbers(self):
        lines = [b'{"jsonrpc":"2.0","id":NaN,"method":"ping"}', b'{"jsonrpc":"2.0","id":Infinity,"method":"ping"}',
                 b'{"jsonrpc":"2.0","id":-Infinity,"method":"ping"}', b'{"jsonrpc":"2.0","id":1e999,"method":"ping"}',
                 b'{"jsonrpc":"2.0","id":4,"method":"ping","params":{"x":NaN}}']
        self.assertAnswers(self.mcp(*lines), [(NULL, -32700)] * 3 + [(NULL, -32600), (id_key(4), -32700)])
        self.assertAnswers(self.bridge(*(raw.replace(b'"jsonrpc":"2.0",', b"") for raw in lines)),
                           [(NULL, "bridge")] * 4 + [(id_key(4), "bridge")])

    def test_integer_ids_too_long_for_int_are_echoed_exactly(self):
        for digits in ("9" * 5000, "-" + "1" * 4301):
            with self.subTest(length=len(digits)):
                raw = f'{{"jsonrpc":"2.0","id":{digits},"method":"ping"}}'.encode()
                answers = self.mcp(raw, b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":' +
                                   digits.encode() + b"}}")
                self.assertEqual(answers, [{"jsonrpc": "2.0", "id": Digits(digits), "result": {}},
                                           {"jsonrpc": "2.0", "id": 1, "result": {}}])
                [pong] = self.bridge(f'{{"id":{digits},"method":"ping"}}'.encode())
                self.assertEqual(pong, {"id": Digits(digits), "result": {"pong": True}})

    def test_string_ids_with_a_lone_surrogate_are_echoed_exactly(self):
        [answer] = self.mcp(b'{"jsonrpc":"2.0","id":"\\ud800x","method":"ping"}')
        self.assertEqual(answer["id"], "\ud800x")
        [pong] = self.bridge(b'{"id":"\\udfff","method":"ping"}')
        self.assertEqual(pong["id"], "\udfff")

    def test_invalid_utf8_in_a_string_is_answered_with_the_requests_id(self):
        answers = self.mcp(b'{"jsonrpc":"2.0","id":8,"method":"ping","params":{"x":"\xff\xfe"}}',
                           b'{"jsonrpc":"2.0","id":"a\xffb","method":"ping"}')
        self.assertAnswers(answers, [(id_key(8), "ok"), (id_key("a\ufffdb"), "ok")])
        self.assertAnswers(self.bridge(b'{"id":8,"method":"ping","params":{"x":"\xc3"}}'), [(id_key(8), "ok")])

    def test_batches_follow_the_negotiated_protocol_version(self):
        batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "method": "notifications/x"}, 42,
                 mcp_initialize("2025-03-26") | {"id": 2}]
        self.assertAnswers(self.mcp(batch, []), [(NULL, -32600), (NULL, -32600)])  # removed in 2025-06-18
        for version in ("2024-11-05", "2025-03-26"):
            with self.subTest(version=version):
                answers = self.mcp(batch, [], [{"jsonrpc": "2.0", "method": "notifications/x"}], version=version)
                self.assertEqual(len(answers), 2)
                self.assertIsInstance(answers[0], list)  # one array for the batch
                self.assertAnswers(answers[0], [(id_key(1), "ok"), (NULL, -32600), (id_key(2), -32600)])
                self.assertEqual(outcome(answers[1]), (NULL, -32600))  # an empty batch: one error object


class DrainTests(LineTestCase):
    def stored_texts(self, texts):
        """How many times each text is in the local index."""
        from qmem.runtime import Runtime

        rt = Runtime(self.env)
        self.addCleanup(rt.close)
        counts = {}
        for text in texts:
            found = rt.index.find(text.split()[-1], project="p", limit=10).records
            counts[text] = sum(record.text == text for record in found)
        return counts

    def test_forty_stores_then_shutdown_are_all_answered(self):
        peer = LivePeer(BRIDGE, self.env, str(self.home))
        self.addCleanup(peer.kill)
        texts = [f"drained memory number {i} token{i}x" for i in range(40)]
        for i, text in enumerate(texts):
            peer.send({"id": i, "method": "tool", "params": {"name": "qmem_store",
                                                            "args": {"text": text, "project_id": "p"}}})
        peer.send({"id": "bye", "method": "shutdown"})
        done = peer.close()
        self.assertEqual(done.code, 0, done.stderr)
        answers = {m["id"]: m for m in done.messages if "id" in m}
        self.assertEqual(set(answers), set(range(40)) | {"bye"})
        self.assertEqual(done.messages[-1], {"id": "bye", "result": {"ok": True}})  # after every store
        # Those running when the shutdown came were sent; the rest were queued at once, unsent.
        shared = [text for i, text in enumerate(texts) if answers[i]["result"]["details"]["shared"]]
        queued = [text for i, text in enumerate(texts) if answers[i]["result"]["details"].get("queued")]
        self.assertEqual(sorted(shared + queued), sorted(texts))
        self.assertEqual(self.stored_texts(texts), dict.fromkeys(texts, 1))
        sent = self.gateway.count_by_text()  # the shared ones, and what the session's flush sent of the rest
        self.assertLessEqual(set(shared), set(sent))
        self.assertEqual(sent, dict.fromkeys(sent, 1))
        # Nothing lost: the next flush sends the queued ones, each once.
        flushed = self.run_module("qmem.local", "flush")
        self.assertEqual(flushed.code, 0, flushed.stderr)
        self.assertEqual(self.gateway.count_by_text(), dict.fromkeys(texts, 1))
        self.assertEqual(self.stored_texts(texts), dict.fromkeys(texts, 1))

    def test_requests_read_before_end_of_input_are_answered(self):
        pings = [{"id": i, "method": "ping"} for i in range(20)]
        messages = self.bridge(*pings)
        self.assertAnswers(messages, [(id_key(i), "ok") for i in range(20)])

    def test_mcp_answers_every_request_read_before_end_of_input(self):
        texts = [f"pipelined memory number {i} token{i}y" for i in range(60)]
        answers = self.mcp(*({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                              "params": {"name": "qmem_store", "arguments": {"text": text, "project_id": "p"}}}
                             for i, text in enumerate(texts)))
        self.assertEqual([a["id"] for a in answers], list(range(60)))
        self.assertTrue(all(a["result"]["structuredContent"]["shared"] for a in answers))
        self.assertEqual(self.stored_texts(texts), dict.fromkeys(texts, 1))


class CancelByTypeTests(LineTestCase):
    """A cancel names its request by JSON type and value: ``true``, ``"1"`` or ``1.0`` do not cancel ``1``.

    The request is a recall that hangs until its 2 s budget ends it: ``timeout`` if nothing
    cancelled it, ``cancellation`` (within 0.1 s of the cancel) if a wrong cancel did.
    """

    def setUp(self):
        super().setUp()
        self.qdrant = FakeQdrant(keys={"read": "r"}).start()
        self.addCleanup(self.qdrant.stop)
        self.embeddings = FakeEmbeddings(api_key="emb", models={"bge-m3": 8}).start()
        self.addCleanup(self.embeddings.stop)
        self.embeddings.inject(Fault.hang())
        self.env.update(QMEM_QDRANT_API_KEY="read", QMEM_EMBEDDING_API_KEY="emb", QMEM_HOST="pi")
        self.configure(recall={"qdrantUrl": self.qdrant.url, "embeddingsUrl": self.embeddings.base_url,
                               "dimension": 8, "timeoutMs": 2000})

    def test_mcp(self):
        peer = LivePeer(MCP, self.env, str(self.home))
        self.addCleanup(peer.kill)
        peer.send(mcp_initialize())
        peer.answer("init")
        peer.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "memory_search", "arguments": {"query": "blue"}}})
        self.assertTrue(self.embeddings.wait_for_requests(1, timeout=30))  # request 1 is in flight
        for wrong in (True, "1", 1.0, [1]):
            peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": wrong}})
        self.assertEqual(peer.answer(1)["result"]["content"][0]["text"], SENTENCES["timeout"])
        self.assertEqual(peer.close().code, 0)

    def test_bridge(self):
        peer = LivePeer(BRIDGE, self.env, str(self.home))
        self.addCleanup(peer.kill)
        peer.send({"id": 0, "method": "session_start", "params": {
            "cwd": str(self.home), "extensionDir": str(self.home / ".pi" / "agent" / "extensions" / "qmem")}})
        self.assertEqual(peer.answer(0)["result"], {"host": "pi", "recall": True})
        peer.send({"id": 1, "method": "tool", "params": {"name": "memory_search", "args": {"query": "blue"}}})
        self.assertTrue(self.embeddings.wait_for_requests(1, timeout=30))
        for wrong in (True, "1", 1.0, [1], {"a": 1}):
            peer.send({"method": "cancel", "params": {"id": wrong}})
        peer.send({"id": 2, "method": "ping"})
        self.assertEqual(peer.answer(2)["result"], {"pong": True})
        self.assertEqual(peer.answer(1)["error"]["message"], SENTENCES["timeout"])
        self.assertEqual(peer.close().code, 0)


def peak_rss_kib(pid: int) -> int:
    """The process's peak resident set (VmHWM) in KiB, from /proc."""
    with open(f"/proc/{pid}/status") as status:
        for entry in status:
            if entry.startswith("VmHWM:"):
                return int(entry.split()[1])
    raise AssertionError("no VmHWM in /proc status")


class LongLineTests(LineTestCase):
    """A 200 MB line is refused naming the 16 MiB limit, read in bounded memory, and serving goes on."""

    HUGE = 200 * 1000 * 1000

    def send_huge(self, peer: LivePeer, head: bytes) -> None:
        """One ``HUGE``-byte line starting with ``head``, written a MiB at a time (never held whole)."""
        piece = b"a" * (1 << 20)
        tail = b'"}}\n'
        peer.proc.stdin.write(head)
        left = self.HUGE - len(head) - len(tail)
        while left > 0:
            peer.proc.stdin.write(piece[:min(left, len(piece))])
            left -= len(piece)
        peer.proc.stdin.write(tail)
        peer.proc.stdin.flush()

    def check(self, module: str, head: bytes, ping: dict, error_of):
        if not __import__("os").path.exists("/proc/self/status"):
            self.skipTest("needs /proc to read a process's peak memory")
        peer = LivePeer(module, self.env, str(self.home))
        self.addCleanup(peer.kill)
        if module == MCP:
            peer.send(mcp_initialize())
            peer.answer("init")
        peer.send({**ping, "params": {"x": "y" * (3 << 20)}})  # a long line under the limit still reads
        self.assertNotIn("error", peer.answer(ping["id"]))
        self.send_huge(peer, head)
        refused = peer.answer(9)
        self.assertIn("16 MiB", error_of(refused))
        since = len(peer.messages)
        peer.send({**ping, "id": "after"})
        self.assertNotIn("error", peer.answer("after", since=since))
        peak_mb = peak_rss_kib(peer.proc.pid) / 1024
        self.assertLess(peak_mb, 100, f"peak RSS {peak_mb:.0f} MB reading a 200 MB line")
        self.assertEqual(peer.close().code, 0)

    def test_mcp(self):
        self.check(MCP, b'{"jsonrpc":"2.0","id":9,"method":"ping","params":{"x":"',
                   {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                   lambda answer: (self.assertEqual(answer["error"]["code"], -32600), answer["error"]["message"])[1])

    def test_bridge(self):
        self.check(BRIDGE, b'{"id":9,"method":"ping","params":{"x":"', {"id": 1, "method": "ping"},
                   lambda answer: answer["error"]["message"])


class ReadLinesTests(unittest.TestCase):  # the reader alone, on bytes in memory
    def lines(self, data: bytes, limit: int):
        import io

        from qmem.jsonlines import TOO_LONG, UnreadableLine, read_lines

        out = []
        for item in read_lines(io.BufferedReader(io.BytesIO(data)), limit):
            out.append(("too long", item.members) if isinstance(item, UnreadableLine) and item.reason == TOO_LONG
                       else item)
        return out

    def test_the_limit_counts_the_newline_and_a_longer_line_is_read_through(self):
        limit = 200_000  # several pieces
        at_limit = b"x" * (limit - 1) + b"\n"
        over = b'{"id":3,"x":"' + b"y" * limit + b'"}\n'
        self.assertEqual(self.lines(at_limit + over + b"ping\n" + b"last", limit),
                         [at_limit, ("too long", {"id": 3}), b"ping\n", b"last"])
        self.assertEqual(self.lines(b"z" * (limit + 1), limit), [("too long", None)])  # cut by the end of input
