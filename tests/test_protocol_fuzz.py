"""Seeded fuzz of ``python3 -m qmem.mcp`` (in both MCP eras) and ``python3 -m qmem.bridge`` over real pipes.

The MCP server is fuzzed twice: on a handshake connection (``initialize`` at 2025-03-26, the
version with batches) and on a 2026-07-28 connection opened by ``server/discover``, where
requests carry ``_meta`` envelopes that are mostly right and sometimes lack a key, name another
version or hold a bad capabilities value, modern and removed methods (``ping``, ``initialize``)
are mixed in, and every batch is one error.

Each process reads rounds of generated lines: every JSON type at every position, nesting up
to 5,000 levels, huge strings and ids, invalid UTF-8, NaN and Infinity, integers too long
for ``int()``, duplicate keys, non-objects and batches, notifications (some sent with an
id), cancels for unknown and live ids, and real stores against a fake gateway that fails in
the last rounds.  The generator knows what each line must get under the protocol's rules.
After every round the process must answer a ping; every request must have exactly one answer
with its id (or ``null`` where the rules say so) and nothing else; every line written must
be strict JSON.  Once, a recall in flight must outlive cancels naming its id with another
JSON type.  The last round ends the input at once (the bridge's with ``shutdown``), and what
was read must still be answered.  At the end the exit status is 0, stderr holds no traceback
or internal error, and every store answered as shared or queued is in the local index exactly
once (and on the gateway at most once); refused ones are not there.

The seed is ``QMEM_FUZZ_SEED`` (default 22); a failure names it as ``(seed=…)``.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from dataclasses import dataclass, field

from qmem.diagnostics import SENTENCES

from .fakes import FakeEmbeddings, FakeQdrant, Fault
from .linepeer import BRIDGE, MCP, NULL, Digits, LivePeer, id_key, parse_int
from .support import GatewayTestCase

SEED = int(os.environ.get("QMEM_FUZZ_SEED", "22"))
ROUNDS = 10
LINES_PER_ROUND = 210
MCP_VERSION = "2025-03-26"  # the version with batches: the richer path (later ones refuse them)
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
TOO_DEEP = 1_500  # nests this deep or deeper are beyond the parser; others stay under 400


class _Unread:
    """A value a reader cannot take (NaN, Infinity): a line holding one is not JSON."""


UNREAD = _Unread()


def parse_fragment(data: bytes):
    """What a strict reader that replaces invalid UTF-8 makes of one JSON fragment."""
    return json.loads(data.decode("utf-8", "replace"), parse_constant=lambda name: UNREAD, parse_int=parse_int)


def is_id(value) -> bool:
    return isinstance(value, (str, Digits)) or (isinstance(value, int) and not isinstance(value, bool))


def strictly_writable(value) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


@dataclass
class Flags:
    """What a line holds that decides how it is read."""

    non_finite: bool = False  # a NaN / Infinity literal: not JSON
    too_deep: bool = False


@dataclass
class Line:
    data: bytes
    answers: list[tuple[str, str]] = field(default_factory=list)  # id keys of the answers it must get
    store: tuple[tuple[str, str], str] | None = None  # (id key, text) of a store to check


class Generator:
    """Random lines for one protocol (``mcp`` or ``bridge``), each with the answers it must get."""

    def __init__(self, rng: random.Random, protocol: str) -> None:
        self.rng = rng
        self.protocol = protocol
        self.mcp = protocol in ("mcp", "mcp-modern")
        self.modern = protocol == "mcp-modern"  # a 2026-07-28 connection: envelopes, no batches
        self.count = 0
        self.sent_ids: list[bytes] = []  # valid ids already sent, as JSON text (targets for cancels)
        self.stores = 0

    # -- JSON text

    def string(self, longest: int = 12) -> bytes:
        rng = self.rng
        parts = [b'"']
        for _ in range(rng.randrange(longest + 1)):
            parts.append(rng.choice([
                rng.choice("abcxyz019 _-/:.").encode(), "é".encode(), "😀".encode(), b"\\n", b'\\"', b"\\\\",
                b"\\u00e9", b"\\ud83d\\ude00", b"[", b"}", b"\\ud800", b"\\udfff", b"\xff", b"\xc3", b"\xed\xa0\x80",
                b"\\u0000"]))
        return b"".join(parts) + b'"'

    def scalar(self, flags: Flags) -> bytes:
        rng = self.rng
        kind = rng.randrange(16)
        if kind == 0:
            return b"null"
        if kind == 1:
            return rng.choice([b"true", b"false"])
        if kind in (2, 3):
            return str(rng.randrange(-10**6, 10**6)).encode()
        if kind == 4:
            return str(rng.uniform(-1e6, 1e6)).encode()
        if kind == 5:
            return rng.choice([b"1e999", b"-1e999", b"1e-999", b"1.0", b"-0", b"0.5e3", b"1E+2"])
        if kind == 6:
            return (rng.choice(["", "-"]) + "9" * rng.choice([20, 4300, 4301, 6000])).encode()
        if kind == 7 and rng.random() < 0.3:
            flags.non_finite = True
            return rng.choice([b"NaN", b"Infinity", b"-Infinity"])
        if kind == 8 and rng.random() < 0.1:
            return b'"' + b"x" * rng.choice([10_000, 200_000]) + b'"'
        return self.string()

    def value(self, flags: Flags, depth: int = 0) -> bytes:
        rng = self.rng
        roll = rng.random()
        if roll < 0.03 and depth == 0:
            nest = rng.choice([300, 399, TOO_DEEP, 5_000])
            flags.too_deep |= nest >= TOO_DEEP
            opener, closer = rng.choice([(b"[", b"]"), (b'{"k":', b"}")])
            return opener * nest + self.scalar(flags) + closer * nest
        if depth > 4 or roll < 0.6:
            return self.scalar(flags)
        if roll < 0.8:
            return b"[" + b",".join(self.value(flags, depth + 1) for _ in range(rng.randrange(4))) + b"]"
        return self.object([(self.string(6), self.value(flags, depth + 1)) for _ in range(rng.randrange(4))])

    def envelope(self) -> bytes:
        """A 2026-07-28 ``_meta``: mostly right, sometimes lacking a key or naming another version."""
        rng = self.rng
        version = rng.choice([b'"2026-07-28"'] * 6 + [b'"2025-11-25"', b'"2099-01-01"', b"7", self.string()])
        members = [(b'"io.modelcontextprotocol/protocolVersion"', version)]
        if rng.random() < 0.9:
            members.append((b'"io.modelcontextprotocol/clientCapabilities"',
                            b"{}" if rng.random() < 0.9 else self.value(Flags(), 3)))
        if rng.random() < 0.5:
            members.append((b'"io.modelcontextprotocol/clientInfo"', b'{"name":"fuzz","version":"1"}'))
        return self.object(members)

    def object(self, members: list[tuple[bytes, bytes]]) -> bytes:
        space = self.rng.choice([b"", b"", b" "])
        return b"{" + (b"," + space).join(key + b":" + space + value for key, value in members) + b"}"

    # -- ids

    def new_id(self) -> bytes:
        """A valid id never sent before, of a random type and size."""
        self.count += 1
        n = self.count
        kind = self.rng.randrange(8)
        return [str(n).encode(), str(-n).encode(), f'"r{n}"'.encode(), f'"r{n}é"'.encode(), f'"r{n}\\udc80"'.encode(),
                b'"r%d\xff"' % n, str(n).encode() + b"0" * 4400 if kind == 6 else b"",
                b'"r%d' % n + b"y" * 100_000 + b'"' if kind == 7 else b""][kind]

    def bad_id(self, flags: Flags) -> bytes:
        choice = self.rng.choice([b"null", b"true", b"false", b"1.5", b"1.0", b"1e999", b"[1]", b'{"a":"b"}',
                                  b"[" + b"9" * 5000 + b"]", b"[1.5,[true]]", None])
        return self.value(flags, 1) if choice is None else choice

    def answer_for(self, id_data: bytes | None, unreadable: bool) -> list[tuple[str, str]]:
        """The answers a message with this ``id`` (None: no id member) must get."""
        if id_data is None:
            return [NULL] if unreadable and self.mcp else []
        value = parse_fragment(id_data)
        if is_id(value):
            return [id_key(value)]
        if self.mcp:
            return [NULL]
        if unreadable:  # the bridge reads the id of an unreadable line only when it is a scalar
            scalar = not isinstance(value, (list, dict))
            return [id_key(value) if scalar and strictly_writable(value) else NULL]
        return [id_key(value) if strictly_writable(value) else NULL]

    # -- messages

    def method_and_params(self, flags: Flags) -> list[tuple[bytes, bytes]]:
        rng = self.rng
        members = []
        inner = Flags()  # what the params hold: counts only if they are sent
        if self.mcp:
            method = rng.choice([b'"ping"', b'"tools/list"', b'"tools/call"', b'"tools/call"', b'"resources/list"',
                                 b'"notifications/cancelled"', None]) or self.scalar(flags)
            if method == b'"tools/call"' and rng.random() < 0.7:
                name = rng.choice([b'"qmem_search"', b'"qmem_get"', b'"qmem_meta"', b'"qmem_store"',
                                   b'"memory_search"', b'"qmem_correct"', None]) or self.string()
                arguments = self.object([(rng.choice([b'"query"', b'"text"', b'"id"', b'"project_id"', b'"top_k"',
                                                      None]) or self.string(5), self.value(inner, 1))
                                         for _ in range(rng.randrange(4))])
                pairs = [(b'"name"', name), (b'"arguments"', arguments)]
                if self.modern and rng.random() < 0.8:
                    pairs.append((b'"_meta"', self.envelope()))
                params = self.object(pairs)
            elif self.modern and rng.random() < 0.4:  # a modern method, usually with its envelope
                method = rng.choice([b'"server/discover"', b'"tools/list"', b'"initialize"', b'"ping"'])
                params = self.object([(b'"_meta"', self.envelope())] if rng.random() < 0.8 else [])
            else:
                params = self.value(inner)
        else:
            method = rng.choice([b'"ping"', b'"tool"', b'"tool"', b'"context"', b'"before_agent_start"',
                                 b'"command"', None]) or self.scalar(flags)
            if method == b'"tool"':
                name = rng.choice([b'"qmem_search"', b'"qmem_get"', b'"qmem_store"', b'"memory_search"', None])
                params = self.object([(b'"name"', name or self.string()), (b'"args"', self.value(inner))])
            elif method == b'"context"':
                params = self.object([(b'"messages"', self.value(inner)), (b'"rlmDepth"', self.value(inner, 3))])
            elif method == b'"command"':
                params = self.object([(b'"name"', self.string()), (b'"hasUI"', b"false")])
            else:
                params = self.value(inner)
        if method in (b'"shutdown"', b'"session_start"'):
            method = b'"ping"'
        members.append((b'"method"', method))
        if rng.random() < 0.85:
            members.append((b'"params"', params))
            flags.non_finite |= inner.non_finite
            flags.too_deep |= inner.too_deep
        if self.mcp:
            members.append((b'"jsonrpc"', b'"2.0"' if rng.random() < 0.9 else self.value(flags, 1)))
        return members

    def cancel(self, flags: Flags) -> list[tuple[bytes, bytes]]:
        rng = self.rng
        target = rng.choice(self.sent_ids[-20:] or [b"1"]) if rng.random() < 0.6 else self.bad_id(flags)
        if self.mcp:
            return [(b'"jsonrpc"', b'"2.0"'), (b'"method"', b'"notifications/cancelled"'),
                    (b'"params"', self.object([(b'"requestId"', target)]))]
        if rng.random() < 0.3:  # the answer to a dialog nobody opened
            return [(b'"method"', b'"ui_result"'), (b'"params"', self.object([(b'"id"', rng.choice([b'"u1"', target])),
                                                                          (b'"value"', self.value(flags, 1))]))]
        return [(b'"method"', b'"cancel"'), (b'"params"', self.object([(b'"id"', target)]))]

    def message(self, flags: Flags, kind: str) -> tuple[bytes, bytes | None]:
        """One object line: its text and the text of its id (None if it has none)."""
        rng = self.rng
        members = self.cancel(flags) if kind.startswith("cancel") else self.method_and_params(flags)
        id_data = None
        if kind in ("request", "cancel with id"):  # a notification sent with an id is a request
            id_data = self.new_id()
            self.sent_ids.append(id_data)
        elif kind == "bad id":
            id_data = self.bad_id(flags)
        if rng.random() < 0.1:
            members.append((self.string(4), self.value(flags)))
        rng.shuffle(members)
        if id_data is not None:  # at a random place; a duplicate key before it (the last one counts)
            ids = [(b'"id"', self.bad_id(flags))] if rng.random() < 0.1 else []
            at = rng.randrange(len(members) + 1)
            members[at:at] = ids + [(b'"id"', id_data)]
        return self.object(members), id_data

    def store(self) -> Line:
        self.stores += 1
        text = f"fuzz memory {self.stores} token{SEED}x{self.stores}q"
        id_data = f'"store-{self.stores}"'.encode()
        args = {"text": text, "project_id": "fuzz"}
        if self.mcp:
            message = {"jsonrpc": "2.0", "id": f"store-{self.stores}", "method": "tools/call",
                       "params": {"name": "qmem_store", "arguments": args}}
            if self.modern:
                message["params"]["_meta"] = ENVELOPE
        else:
            message = {"id": f"store-{self.stores}", "method": "tool", "params": {"name": "qmem_store", "args": args}}
        key = id_key(f"store-{self.stores}")
        self.sent_ids.append(id_data)
        return Line(json.dumps(message).encode(), [key], (key, text))

    def line(self) -> Line:
        rng = self.rng
        roll = rng.random()
        flags = Flags()
        if roll < 0.08:
            return self.store()
        if roll < 0.14:  # not JSON at all (never shaped like an object)
            data = b"#" + rng.choice([b"", b"\xff\xfe", b"{", b'"id":1}']) + self.string()
            return Line(data, [NULL] if self.mcp else [])
        if roll < 0.20:  # JSON, but not an object
            if rng.random() < 0.6:
                data = self.value(flags)
            else:  # a batch
                items = [self.message(flags, rng.choice(["request", "bad id", "note"]))[0]
                         for _ in range(rng.randrange(4))]
                data = b"[" + b",".join(items) + b"]"
            return Line(data, self.non_object(data, flags))
        if roll < 0.23:
            return Line(rng.choice([b" ", b"\t", b"  \r"]))  # blank: skipped
        if roll < 0.30:  # a truncated message: not JSON, not readable
            data, _ = self.message(Flags(), "request")
            data = data[:rng.randrange(1, len(data) - 1)]
            return Line(data, [NULL] if self.mcp else [])
        kind = rng.choice(["request", "request", "request", "bad id", "note", "cancel", "cancel with id"])
        data, id_data = self.message(flags, kind)
        unreadable = flags.non_finite or flags.too_deep
        return Line(data, self.answer_for(id_data, unreadable))

    def non_object(self, data: bytes, flags: Flags) -> list[tuple[str, str]]:
        """The answers to a line that is JSON but not a message: a scalar, an array (a batch)."""
        if self.protocol == "bridge":
            return []  # dropped with one warning
        if flags.non_finite or flags.too_deep:
            return [NULL]
        parsed = parse_fragment(data)
        if isinstance(parsed, dict):
            return []  # an object without id: a notification, however odd
        if not isinstance(parsed, list):
            return [NULL]
        if not parsed or self.modern:
            return [NULL]  # an empty batch, or any batch in the modern era: one error
        answers = []
        for item in parsed:
            if not isinstance(item, dict):
                answers.append(NULL)
            elif "id" in item:
                answers.append(id_key(item["id"]) if is_id(item["id"]) else NULL)
        return answers


def answer_keys(message) -> list[tuple[str, str]]:
    if isinstance(message, list):  # a batch answer
        return [key for item in message for key in answer_keys(item)]
    if isinstance(message, dict) and "id" in message and "ui" not in message:
        return [id_key(message["id"])]
    return []


def received(messages) -> Counter:
    return Counter(key for message in messages for key in answer_keys(message))


def shown(keys: Counter) -> list[str]:
    """A difference of answer counts, readable in a failure message."""
    return sorted(f"{count} x {kind} {text[:60]}" for (kind, text), count in keys.items())


class ProtocolFuzzTests(GatewayTestCase):
    def setUp(self):
        super().setUp()
        self.qdrant = FakeQdrant(keys={"read": "r"}).start()
        self.addCleanup(self.qdrant.stop)
        self.qdrant.create_collection("qmem_memories", size=8, distance="Cosine")
        self.embeddings = FakeEmbeddings(api_key="emb", models={"bge-m3": 8}).start()
        self.addCleanup(self.embeddings.stop)
        self.env.update(QMEM_QDRANT_API_KEY="read", QMEM_EMBEDDING_API_KEY="emb", QMEM_HOST="pi")
        self.configure(recall={"qdrantUrl": self.qdrant.url, "embeddingsUrl": self.embeddings.base_url,
                               "dimension": 8, "timeoutMs": 1500})

    def probe_cancels(self, peer: LivePeer, protocol: str) -> None:
        """A recall in flight goes on when cancels name its id with another JSON type."""
        self.embeddings.clear()
        self.embeddings.inject(Fault.hang())  # until the recall's own 1.5 s budget ends it
        since = len(peer.messages)  # id 1 may have been used before: its answer was read
        if protocol.startswith("mcp"):
            params = {"name": "memory_search", "arguments": {"query": "probe"}}
            if protocol == "mcp-modern":
                params["_meta"] = ENVELOPE
            peer.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        else:
            peer.send({"id": 1, "method": "tool", "params": {"name": "memory_search", "args": {"query": "probe"}}})
        self.assertTrue(self.embeddings.wait_for_requests(1, timeout=60))
        for wrong in (True, 1.0, "1", [1], {"1": 1}):
            peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": wrong}}
                      if protocol.startswith("mcp") else {"method": "cancel", "params": {"id": wrong}})
        answer = peer.answer(1, timeout=120, since=since)
        said = answer["result"]["content"][0]["text"] if protocol.startswith("mcp") else answer["error"]["message"]
        self.assertEqual(said, SENTENCES["timeout"], "a cancel for another id stopped request 1")

    def fuzz(self, module: str, protocol: str) -> None:
        rng = random.Random(f"{SEED}-{protocol}")
        generator = Generator(rng, protocol)
        peer = LivePeer(module, self.env, str(self.home))
        self.addCleanup(peer.kill)
        if protocol == "mcp":
            peer.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
                "protocolVersion": MCP_VERSION, "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}})
            expected = Counter([id_key("init")])
        elif protocol == "mcp-modern":  # the era opens with an accepted envelope
            peer.send({"jsonrpc": "2.0", "id": "init", "method": "server/discover", "params": {"_meta": ENVELOPE}})
            opened = peer.answer("init", timeout=120)
            self.assertEqual(opened["result"]["supportedVersions"], ["2026-07-28"])
            expected = Counter([id_key("init")])
        else:
            peer.send({"id": "start", "method": "session_start", "params": {
                "cwd": str(self.home), "extensionDir": str(self.home / ".pi" / "agent" / "extensions" / "qmem")}})
            expected = Counter([id_key("start")])
        stores: dict[tuple[str, str], str] = {}
        sent = 0
        for round_number in range(ROUNDS + 1):
            if round_number == ROUNDS - 3:  # from here on the gateway fails: stores are queued locally
                self.gateway.inject(Fault.status(503, times=None))
            for _ in range(LINES_PER_ROUND):
                line = generator.line()
                peer.write(line.data)
                sent += 1
                expected.update(line.answers)
                if line.store:
                    stores[line.store[0]] = line.store[1]
            if round_number == ROUNDS:
                break  # the last round ends at once, with its requests still running or waiting
            ping = f"ping-{round_number}"
            if protocol == "mcp-modern":  # ping is gone from this era: tools/list is the liveness probe
                peer.send({"jsonrpc": "2.0", "id": ping, "method": "tools/list", "params": {"_meta": ENVELOPE}})
            else:
                peer.send({"jsonrpc": "2.0", "id": ping, "method": "ping"} if protocol == "mcp"
                          else {"id": ping, "method": "ping"})
            expected[id_key(ping)] += 1
            peer.answer(ping, timeout=120)  # alive, and reading
            if protocol == "bridge":  # answers come as requests finish, the ping's perhaps first
                try:
                    peer.wait_for_all(lambda messages: not expected - received(messages), timeout=60)
                except AssertionError:
                    pass  # told below, with what is missing
            self.assertAnswered(expected, received(peer.messages), f"round {round_number}")
            self.assertEqual(peer.bad_lines, [], "lines that are not strict JSON")
            if round_number == ROUNDS - 1:  # all answered: nothing else can take the hanging embedding
                self.probe_cancels(peer, protocol)
                expected[id_key(1)] += 1
        self.assertGreaterEqual(sent, 2000)
        if protocol == "bridge":  # what the shim does at the end of a session
            peer.send({"id": "bye", "method": "shutdown"})
            expected[id_key("bye")] += 1
        done = peer.close()  # end of input: everything read must still be answered
        self.assertEqual(done.code, 0, done.stderr[-2000:])
        self.assertAnswered(expected, received(done.messages), "at the end")
        self.assertEqual(peer.bad_lines, [], "lines that are not strict JSON")
        self.assertNotIn("Traceback", done.stderr)
        self.assertNotIn("internal error", done.stderr)  # the MCP server's note of a bug it answered -32603
        internal = [m for m in done.messages
                    if isinstance(m, dict) and m.get("error", {}).get("category") == "internal"]
        self.assertEqual(internal, [])  # the bridge's answer for a bug
        self.check_stores(done.messages, stores, protocol)
        if protocol == "mcp-modern":  # the modern paths were really taken, refusals included
            answers = [m for m in done.messages if isinstance(m, dict)]
            codes = Counter(m["error"]["code"] for m in answers if "error" in m)
            complete = [m for m in answers if m.get("result", {}).get("resultType") == "complete"]
            self.assertGreater(len(complete), 100, codes)
            self.assertTrue(all(m["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "qmem"
                                for m in complete))
            self.assertGreater(codes[-32022], 5, codes)  # another version, and initialize on this connection
            self.assertGreater(codes[-32602], 5, codes)  # an envelope lacking a key, or none

    def assertAnswered(self, expected: Counter, got: Counter, when: str) -> None:
        self.assertEqual(shown(got - expected), [], f"{when}: answers nobody asked for")
        self.assertEqual(shown(expected - got), [], f"{when}: requests not answered")

    def check_stores(self, messages, stores, protocol) -> None:
        from qmem.runtime import Runtime

        answers = {id_key(m["id"]): m for m in messages if isinstance(m, dict) and "id" in m}
        kept, refused = [], []
        kinds = Counter()
        for key, text in stores.items():
            answer = answers[key]
            if protocol.startswith("mcp"):
                result = answer["result"]
                said = result["content"][0]["text"]
                ok = not result["isError"] and said.startswith(("Stored:", "Queued locally"))
            else:
                details = answer.get("result", {}).get("details", {})
                ok = bool(details.get("shared") or details.get("queued"))
            (kept if ok else refused).append(text)
            mcp = protocol.startswith("mcp")
            kinds[said.split()[0] if mcp else "shared" if ok and details.get("shared") else "other"] += 1
        self.assertGreater(len(kept), 10)
        self.assertTrue(kinds["Stored:"] or kinds["shared"], kinds)  # the gateway took some
        self.assertTrue(kinds["Queued"] or len(kept) > kinds["shared"], kinds)  # and failed on others
        rt = Runtime(self.env)
        self.addCleanup(rt.close)
        on_gateway = self.gateway.count_by_text()
        for text in kept + refused:
            found = rt.index.find(text.split()[-1], project="fuzz", limit=10).records
            self.assertEqual(sum(record.text == text for record in found), 1 if text in kept else 0, text)
            self.assertLessEqual(on_gateway.get(text, 0), 1, text)

    def test_mcp_server(self):
        with self.subTest(seed=SEED):
            self.fuzz(MCP, "mcp")

    def test_mcp_server_in_the_2026_era(self):
        with self.subTest(seed=SEED):
            self.fuzz(MCP, "mcp-modern")

    def test_bridge(self):
        with self.subTest(seed=SEED):
            self.fuzz(BRIDGE, "bridge")
