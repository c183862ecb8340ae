"""qmem's own keys, known by value, never come back out: not from a server's error, id or record.

The unit tests pin :class:`qmem.clients.knownkeys.KnownKeys` (every 12-character piece, short values
whole, documents, linear time under a watchdog).  The end-to-end test gives every credential
variable a sentinel value (random, so no scanner shape matches it), makes the fake gateway,
Qdrant and embeddings services echo those values bare, in JSON values, in ids and in 409
bodies, drives the CLIs, the MCP server and the admin CLI through them, and then looks for
every 12-character piece of every sentinel in all their output and in every byte under HOME.
"""

import json
import random
import string
import subprocess
import sys
import textwrap
import unittest

from qmem.clients import gateway as gateway_mod
from qmem.clients.knownkeys import MARKER, PIECE, KnownKeys, known_keys, safe_server_text
from qmem.config import CREDENTIAL_VARIABLES

from .fakes import FakeEmbeddings, FakeGateway, FakeQdrant, Fault
from .support import REPO, TempHomeTestCase, write_config

DIM = 16


def pieces(value: str) -> list[str]:
    """What must never be seen of ``value``: itself when short, else every PIECE-character piece."""
    return [value] if len(value) < PIECE else [value[at:at + PIECE] for at in range(len(value) - PIECE + 1)]


def leaks(blob: str | bytes, values) -> list[str]:
    """The variables whose value has a piece in ``blob``."""
    data = blob.encode("utf-8", "surrogatepass") if isinstance(blob, str) else blob
    return sorted(name for name, value in values.items() if any(p.encode() in data for p in pieces(value)))


class KnownKeysTests(unittest.TestCase):
    KEY = "Zr4mQ8vT1wXy6pLk3nBd7sHf"  # 24 characters, no credential shape

    def test_the_whole_value_and_every_piece_become_one_marker(self):
        keys = KnownKeys([self.KEY])
        self.assertEqual(keys.redact(f"token {self.KEY} lacks scope"), f"token {MARKER} lacks scope")
        for at in range(len(self.KEY) - PIECE + 1):
            piece = self.KEY[at:at + PIECE]
            with self.subTest(at=at):
                self.assertEqual(keys.redact(f"id={piece}!"), f"id={MARKER}!")
        self.assertEqual(keys.redact(self.KEY[:PIECE - 1]), self.KEY[:PIECE - 1])  # 11 characters: not a piece
        self.assertEqual(keys.redact(self.KEY + self.KEY[3:20] + " " + self.KEY), f"{MARKER} {MARKER}")
        self.assertEqual(keys.redact("nothing here"), "nothing here")

    def test_a_short_value_is_redacted_whole_only(self):
        keys = KnownKeys(["hunter2x", "  ", ""])
        self.assertEqual(keys.redact("pw hunter2x and hunter2 and unter2x"), f"pw {MARKER} and hunter2 and unter2x")
        self.assertEqual(KnownKeys([""]).redact("anything"), "anything")
        self.assertFalse(KnownKeys([""]))

    def test_documents_keys_and_values_at_any_depth(self):
        keys = KnownKeys([self.KEY])
        document = {"error": "x", "detail": [{"loc": ["body", self.KEY[2:16]], "msg": f"token {self.KEY}"}],
                    self.KEY: {"id": self.KEY}, "n": 3, "ok": None}
        redacted = keys.redact_document(document)
        self.assertEqual(redacted, {"error": "x", "detail": [{"loc": ["body", MARKER], "msg": f"token {MARKER}"}],
                                    MARKER: {"id": MARKER}, "n": 3, "ok": None})
        clean = {"a": ["b", {"c": "d"}]}
        self.assertIs(keys.redact_document(clean), clean)
        self.assertEqual(keys.redact_document(self.KEY), MARKER)

    def test_random_texts_keep_no_piece_and_lose_nothing_else(self):
        rng = random.Random(20)
        for _ in range(1500):
            alphabet = rng.choice(["ab", "abc", string.ascii_letters + string.digits])
            values = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(rng.randint(1, 3))]
            text = "".join(rng.choice(values)[rng.randint(0, 10):rng.randint(10, 40)] if rng.random() < 0.5
                           else "".join(rng.choice(alphabet + " ") for _ in range(rng.randint(0, 10)))
                           for _ in range(rng.randint(0, 8)))
            keys = KnownKeys(values)
            out = keys.redact(text)
            everything = {p for value in values for p in pieces(value)}
            for part in out.split(MARKER):
                self.assertFalse([p for p in everything if p in part], (values, text, out))
            covered = [False] * len(text)
            for p in everything:
                at = text.find(p)
                while at >= 0:
                    covered[at:at + len(p)] = [True] * len(p)
                    at = text.find(p, at + 1)
            for start, end in keys.spans(text):  # nothing redacted that is not part of an occurrence
                self.assertTrue(all(covered[start:end]), (values, text, start, end))

    def test_every_credential_variable_and_alias_is_known(self):
        env = {name: f"value-of-{name}-0123456789" for names in CREDENTIAL_VARIABLES.values() for name in names}
        env["UNRELATED"] = "unrelated-value-0123456789"
        keys = known_keys(env)
        for name, value in env.items():
            with self.subTest(name=name):
                self.assertEqual(keys.redact(value) == MARKER, name != "UNRELATED")
        self.assertEqual(known_keys({"QMEM_GATEWAY_API_KEY": "  padded-key-0123456789 \n"}).redact(
            "padded-key-0123456789"), MARKER)
        self.assertEqual(known_keys({}, extra=["extra-key-0123456789", None]).redact("extra-key-0123456789"), MARKER)
        self.assertNotIn("value-of", repr(keys))

    def test_server_text_is_one_bounded_line_without_keys_or_credential_shapes(self):
        key = "Zr4mQ8vT1wXy6pLk3nBd7sHf"
        github = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
        text = safe_server_text(f"token {key}\nlacks   scope; also {github} " + "x" * 1000, 80, extra=[key])
        self.assertEqual(text[:40], f"token {MARKER} lacks scope; also [reda")
        self.assertLessEqual(len(text), 80)
        self.assertNotIn(github, text)


class HostileInputTests(unittest.TestCase):
    def test_linear_on_inputs_where_a_per_piece_or_per_place_search_takes_minutes(self):
        # Every position of the near miss is a candidate and none is a piece; the key's 100
        # identical blocks made the first version of this module take over 7 minutes on it.
        code = textwrap.dedent("""
            from qmem.clients.knownkeys import KnownKeys
            keys = KnownKeys(["a" * 600, "ab" * 40, "short"])
            near = ("a" * 11 + "b") * 200_000
            assert keys.redact(near) == near
            assert keys.redact("a" * 2_000_000) == "[redacted]"
            assert keys.redact("ab" * 1_000_000) == "[redacted]"
            print("done")
        """)
        proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                              timeout=240)  # a few seconds when loaded; the watchdog is for a blow-up
        self.assertEqual((proc.returncode, proc.stdout.strip()), (0, "done"), proc.stderr[-2000:])


class GatewayErrorTests(unittest.TestCase):
    def test_the_error_types_clean_what_they_are_given(self):
        # Whichever path builds them: the server's words are cleaned inside the constructor.
        github = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
        refused = gateway_mod.GatewayRefused(f"refused: {github}", status=422, code=f"bad {github}",
                                             detail="line one\nline two " + github)
        for text in (refused.message, refused.code, refused.detail, refused.reason):
            self.assertNotIn(github, text)
            self.assertNotIn("\n", text)
        duplicate = gateway_mod.GatewayDuplicate(github)
        self.assertNotIn(github, duplicate.matched_id + duplicate.message)


# --- end to end ------------------------------------------------------------------------------------

class EchoingServersTests(TempHomeTestCase):
    """Every service echoes the sentinel keys; none reaches an output or a file."""

    def setUp(self):
        super().setUp()
        rng = random.Random()  # a fresh secret each run: nothing in the source can match it
        alphabet = string.ascii_letters + string.digits
        self.keys = {name: "".join(rng.choice(alphabet) for _ in range(rng.choice((20, 28, 36))))
                     for names in CREDENTIAL_VARIABLES.values() for name in names}
        self.keys["PI_QDRANT_MEMORY_SOURCE_QDRANT_API_KEY"] = "".join(rng.choice(alphabet) for _ in range(9))
        self.values = list(self.keys.values())
        self.env.update(self.keys)
        self.env["QMEM_HOST"] = "pi"
        self.gateway = FakeGateway(api_key=self.keys["QMEM_GATEWAY_API_KEY"]).start()
        self.addCleanup(self.gateway.stop)
        self.qdrant = FakeQdrant(keys={self.keys["QMEM_QDRANT_API_KEY"]: "r",
                                       self.keys["QMEM_ADMIN_QDRANT_API_KEY"]: "rw"}).start()
        self.addCleanup(self.qdrant.stop)
        self.qdrant.create_collection("qmem_memories", size=DIM, distance="Cosine")
        self.embeddings = FakeEmbeddings(api_key=self.keys["QMEM_EMBEDDING_API_KEY"], models={"bge-m3": DIM}).start()
        self.addCleanup(self.embeddings.stop)
        write_config(self.env, {"url": self.gateway.url, "connectTimeoutMs": 3000, "timeoutMs": 3000,
                                "breakerTripAfter": 1000,
                                "recall": {"qdrantUrl": self.qdrant.url, "embeddingsUrl": self.embeddings.base_url,
                                           "dimension": DIM, "timeoutMs": 5000}})
        self.outputs: list[tuple[str, str]] = []

    # -- what the services say

    def echo(self, key: str) -> dict:
        """An error body echoing ``key`` bare, in JSON values and keys, in an id, and a piece of every key."""
        return {"error": f"bad_{key}", "id": key, key: key,
                "detail": [{"loc": ["body", key], "msg": f"token {key} lacks scope"},
                           {"msg": " ".join(value[1:PIECE + 2] for value in self.values)}]}

    def record(self, key: str, index: int) -> dict:
        return {"id": key, "score": 0.9 - index / 100, "text": f"{key} is what the service said", "kind": "fact",
                "project_id": f"p{key}", "scope": "project", "agent_id": key, "created_at": "2026-01-01T00:00:00Z",
                "superseded_by": key}

    # -- running things

    def run_cli(self, label: str, module: str, *args: str, code: int | None = None, stdin: str = "") -> str:
        proc = subprocess.run([sys.executable, "-m", module, *args], input=stdin, capture_output=True, text=True,
                              env=self.env, cwd=self.home, timeout=120)
        self.outputs.append((label, proc.stdout + proc.stderr))
        self.assertNotIn("Traceback", proc.stderr, label)
        if code is not None:
            self.assertEqual(proc.returncode, code, f"{label}: {proc.stderr[-2000:]}")
        return proc.stdout

    def mcp(self, label: str, *calls: tuple[str, dict]) -> list[dict]:
        messages = [{"jsonrpc": "2.0", "id": 0, "method": "initialize",
                     "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "test", "version": "1"}}}]
        messages += [{"jsonrpc": "2.0", "id": number, "method": "tools/call",
                      "params": {"name": name, "arguments": arguments}}
                     for number, (name, arguments) in enumerate(calls, 1)]
        stdout = self.run_cli(label, "qmem.mcp", stdin="".join(json.dumps(m) + "\n" for m in messages), code=0)
        answers = {answer["id"]: answer for answer in map(json.loads, stdout.splitlines())}
        return [answers[number]["result"] for number in range(1, len(calls) + 1)]

    # -- the test

    def test_no_key_and_no_piece_of_one_in_any_output_or_file(self):
        keys, values = self.keys, self.values
        store = ("store", "--json", "--project", "shop", "--kind", "fact")

        # 422 echoing a key: refused, on stderr and in --json.
        self.gateway.inject(Fault.status(422, self.echo(keys["QMEM_GATEWAY_API_KEY"]), path="/v1/memories"))
        refused = json.loads(self.run_cli("store refused", "qmem.local", *store, "--text", "refused one", code=1))

        # 409 whose id is a key.
        self.gateway.inject(Fault.status(409, {"error": "duplicate", "id": keys["QMEM_QDRANT_API_KEY"],
                                               "detail": f"same as {keys['QMEM_EMBEDDING_API_KEY']}"},
                                         path="/v1/memories"))
        self.run_cli("store duplicate", "qmem.local", *store, "--text", "a duplicate", code=0)

        # Queued while the gateway refuses the key (401 echo), then refused at flush (422 echo):
        # the outbox reason written to qmem.sqlite is the server's words.
        self.gateway.inject(Fault.status(401, self.echo(keys["QMEM_ADMIN_QDRANT_API_KEY"]), path="/v1/memories"))
        queued = json.loads(self.run_cli("store queued", "qmem.local", *store, "--text", "queued then refused", code=0))
        self.assertTrue(queued["queued"])
        self.gateway.inject(Fault.status(422, self.echo(keys["QMEM_SOURCE_QDRANT_API_KEY"]), path="/v1/memories"))
        self.run_cli("flush", "qmem.local", "flush", "--json")
        queue = json.loads(self.run_cli("queue", "qmem.local", "queue", "--json", code=0))

        # Records whose ids, texts and fields are keys: search, get, meta, and a pull into the index.
        # Only long keys: a short one is left whole in data (ShortKeysTests), redacted in error text.
        data_values = [value for value in values if len(value) >= PIECE]
        records = [self.record(value, index) for index, value in enumerate(data_values)]
        self.gateway.inject(
            *[Fault.status(422, self.echo(value), path="/v1/memories", method="POST") for value in values],
            Fault.status(200, {"results": records}, path="/v1/memories:search"),
            Fault.status(200, {**records[0], "id": "rec-1", "supersede_reason": data_values[1]}, path="/v1/memories/rec-1"),
            Fault.status(200, {"counts": {"project": {"fact": 1}}, "projects": data_values, "agents": data_values,
                               "superseded": 0, "total": 1}, path="/v1/meta"))
        self.embeddings.inject(Fault.status(401, {"error": {"message": f"Incorrect API key provided: "
                                                                       f"{keys['QMEM_EMBEDDING_API_KEY']}"}}))
        payload = {"host": "pi", "status": "active", "secret_scan": "passed", "project": "proj",
                   "source_type": "hermes", "source_collection": "hermes_memories", "source_id": "1",
                   "import_run_id": "ab" * 32, "transform_version": "hermes-v1", "created_at": "2026-01-01T00:00:00Z"}
        points = [{"id": index + 1, "score": 0.9, "payload": {**payload, "text": f"recalled {value} text",
                                                              "source_id": value, "tags": [value]}}
                  for index, value in enumerate(data_values)]
        self.qdrant.inject(Fault.status(200, {"result": points, "status": "ok", "time": 0.0},
                                        path="/collections/qmem_memories/points/search", times=None))
        results = self.mcp("mcp", *[("qmem_store", {"text": f"stored number {n}", "project_id": "shop"}) for n in range(len(values))],
                           ("qmem_search", {"query": "service"}), ("qmem_get", {"id": "rec-1"}),
                           ("qmem_meta", {}), ("memory_search", {"query": "deploys"}),
                           ("memory_search", {"query": "deploys"}))

        self.gateway.inject(Fault.status(200, {"items": [{**record, "id": f"r{n}-{record['id']}"}
                                                         for n, record in enumerate(records)],
                                               "next_cursor": data_values[0], "has_more": False},
                                         path="/v1/memories:export"))
        self.run_cli("pull", "qmem.local", "pull", "--json")
        self.run_cli("find", "qmem.local", "find", "--json", "service")

        # doctor and the admin CLI, with every service refusing and echoing.
        self.gateway.inject(Fault.status(401, self.echo(keys["QMEM_GATEWAY_API_KEY"]), path="/v1/status"))
        self.qdrant.inject(Fault.status(403, {"status": {"error": f"Forbidden for {keys['QMEM_QDRANT_API_KEY']}"}},
                                        path="/collections", times=None),
                           Fault.status(401, f"Invalid API key {keys['QMEM_ADMIN_QDRANT_API_KEY']}",
                                        path="/healthz", times=None))
        self.embeddings.inject(Fault.status(401, {"error": {"message": keys["PI_QDRANT_MEMORY_EMBEDDING_API_KEY"]}}))
        self.run_cli("doctor", "qmem.local", "doctor", "--json", code=1)
        self.run_cli("doctor text", "qmem.local", "doctor", code=1)
        self.run_cli("admin status", "qmem.admin", "status", "--json", code=1)
        self.run_cli("local status", "qmem.local", "status", "--json", code=0)

        for label, output in self.outputs:
            with self.subTest(output=label):
                self.assertEqual(leaks(output, keys), [])
        files = [path for path in self.home.rglob("*") if path.is_file()]
        self.assertTrue(any(path.name == "qmem.sqlite" for path in files))
        for path in files:
            with self.subTest(file=str(path.relative_to(self.home))):
                self.assertEqual(leaks(path.read_bytes(), keys), [])
        # The echoes did arrive, redacted: in the refusal, the outbox reason, the MCP results.
        self.assertIn(MARKER, refused["error"]["message"])
        self.assertTrue([row for row in json.dumps(queue).split("reason")[1:] if MARKER in row])
        self.assertTrue(all(result["isError"] and MARKER in result["content"][0]["text"]
                            for result in results[:len(values)]))
        self.assertGreaterEqual(results[len(values)]["content"][0]["text"].count(MARKER), len(data_values))
        self.assertIn(MARKER, results[-1]["content"][0]["text"])  # the recalled payload


if __name__ == "__main__":
    unittest.main()


class ShortKeysTests(TempHomeTestCase):
    """A short key (``test``, Ollama's ``ollama``) is redacted in a server's error text only: the
    records qmem stores and finds, and their ids, are never rewritten."""

    def test_records_and_ids_keep_words_that_equal_a_short_key(self):
        self.env.update(QMEM_GATEWAY_API_KEY="test", QMEM_EMBEDDING_API_KEY="ollama")
        gateway = FakeGateway(api_key="test").start()
        self.addCleanup(gateway.stop)
        write_config(self.env, {"url": gateway.url})

        def cli(*args, code=0):
            proc = subprocess.run([sys.executable, "-m", "qmem.local", *args, "--json"], capture_output=True,
                                  text=True, env=self.env, cwd=self.home, timeout=120)
            self.assertEqual(proc.returncode, code, proc.stderr[-2000:])
            return json.loads(proc.stdout) if proc.stdout.strip() else None

        text = "Run the test suite with pytest and embed with ollama before each release"
        stored = cli("store", "--project", "shop", "--text", text)
        self.assertTrue(stored["shared"])
        record_id = stored["record"]["id"]
        self.assertEqual(gateway.count_by_text(), {text: 1})
        self.assertNotIn(MARKER, json.dumps(stored))
        cli("pull")
        found = cli("find", "pytest")
        self.assertEqual([(r["id"], r["text"]) for r in found["results"]], [(record_id, text)])

        # The same words in an error the gateway sends are its free text: redacted there.
        gateway.inject(Fault.status(422, {"error": "invalid", "detail": "token test refused"}, path="/v1/memories"))
        refused = cli("store", "--project", "shop", "--text", "another note", code=1)
        self.assertIn(f"token {MARKER} refused", refused["error"]["message"])


class AdminAnswersTests(TempHomeTestCase):
    """The admin CLI parses Qdrant's answers itself: they are redacted all the same."""

    def test_collection_info_naming_the_key_is_shown_redacted(self):
        key = "Adm1nKey" + "".join(random.Random().choice(string.ascii_letters) for _ in range(24))
        self.env["QMEM_ADMIN_QDRANT_API_KEY"] = key
        qdrant = FakeQdrant(keys={key: "rw"}).start()
        self.addCleanup(qdrant.stop)
        write_config(self.env, {"recall": {"qdrantUrl": qdrant.url, "embeddingsUrl": "http://127.0.0.1:9/v1",
                                           "dimension": DIM}})
        info = {"config": {"params": {"vectors": {key: {"size": DIM, "distance": "Cosine"}}}},
                "points_count": 1, "payload_schema": {key: {"data_type": "keyword"}}}
        qdrant.inject(Fault.status(200, {"result": info, "status": "ok", "time": 0.0},
                                   path="/collections/qmem_memories", times=None))
        proc = subprocess.run([sys.executable, "-m", "qmem.admin", "status", "--json"], capture_output=True,
                              text=True, env=self.env, cwd=self.home, timeout=120)
        self.assertNotIn("Traceback", proc.stderr)
        self.assertIn(MARKER, proc.stdout)  # the answer was read and shown: its key is redacted
        self.assertEqual(leaks(proc.stdout + proc.stderr, {"QMEM_ADMIN_QDRANT_API_KEY": key}), [])
