"""qmem's own keys in every form a server can echo them, and a record's own text left as written.

* A gateway error that echoes the gateway key raw, URL-encoded (``quote``, ``quote_plus``, lower-case
  escapes), as hexadecimal (both cases), inside base64 and base64url of a longer text at each of the
  three byte alignments, and cut in two, reaches no output of ``qmem.local`` (stderr, ``--json``), no
  MCP answer, no bridge answer and no byte under HOME (the outbox reason in ``qmem.sqlite``
  included) — while the marker shows the echo did arrive.
* With a gateway key (``test-gateway-key``) whose pieces occur in a record's text, the text the
  gateway keeps, the local copy written through after ``store``, ``enrich --all`` and ``pull``, and
  what ``find`` and MCP ``qmem_search`` answer are one and the same; a record holding the whole
  key has the key redacted in its local copy.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
import subprocess
import sys
import threading
import unittest
from urllib.parse import quote, quote_plus

from qmem.clients.knownkeys import MARKER, KnownKeys

from .fakes import FakeGateway, Fault
from .support import TempHomeTestCase, write_config

PIECE = 12


def lower_escapes(key: str) -> str:
    """``quote(key)`` with its escapes in lower case (``%2f``), as some servers write them."""
    return re.sub("%[0-9A-F]{2}", lambda match: match.group().lower(), quote(key, safe=""))


def independent_forms(key: str) -> list[str]:
    """The forms the test looks for, computed apart from qmem: the base64 ones as the inner part
    of a real encoding of the key between other bytes (the outer groups mix in those bytes)."""
    data = key.encode()
    forms = [key, quote(key, safe=""), quote_plus(key, safe=""), lower_escapes(key), data.hex(),
             data.hex().upper()]
    for before in (b"", b"x", b"xy"):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(b"\x00\x00\x00" + before + data + b"\x00\x00\x00").decode()
            forms.append(encoded[4 + 4 * (len(before) > 0): -8])
    return forms


def leaked(blob: str | bytes, key: str) -> list[str]:
    """The forms of ``key`` of which a PIECE-character piece is in ``blob``."""
    data = blob if isinstance(blob, bytes) else blob.encode("utf-8", "surrogatepass")
    return [form for form in independent_forms(key)
            if any(form[at:at + PIECE].encode() in data for at in range(len(form) - PIECE + 1))]


def echo(key: str) -> str:
    """A server's error text quoting ``key`` in every form."""
    data = key.encode()
    parts = [f"raw {key}", f"url {quote(key, safe='')}", f"plus {quote_plus(key, safe='')}",
             f"lower {lower_escapes(key)}", f"hex {data.hex()}", f"HEX {data.hex().upper()}",
             f"split {key[:14]} / {key[14:]}"]
    for before in ("", "a", "ab"):
        message = f"{before}token {key} lacks scope".encode()
        parts.append(f"b64 {base64.b64encode(message).decode()}")
        parts.append(f"b64url {base64.urlsafe_b64encode(message).decode()}")
    return "; ".join(parts)


class FormsTests(unittest.TestCase):
    KEY = "Zr4m/Q8vT+1wXy=6pLk&3nBd7sHf"  # characters URL encoding changes

    def test_every_form_at_every_alignment_is_redacted(self):
        keys = KnownKeys([self.KEY])
        out = keys.redact(echo(self.KEY))
        self.assertEqual(leaked(out, self.KEY), [])
        self.assertGreaterEqual(out.count(MARKER), 14)
        self.assertNotIn(MARKER, keys.redact(echo("AnotherValueThatIsNotTheKey1")))

    def test_a_short_key_is_redacted_in_its_forms_in_free_text_only(self):
        keys = KnownKeys(["gw-key"])
        self.assertEqual(keys.redact("Z3cta2V5 and 67772d6b6579 and gw-key"), f"{MARKER} and {MARKER} and {MARKER}")
        self.assertEqual(keys.redact("gw-key Z3cta2V5", short=False), "gw-key Z3cta2V5")

    def test_authored_text_keeps_pieces_and_loses_whole_keys(self):
        keys = KnownKeys(["test-gateway-key"])
        text = "Our staging test-gateway host; gateway-key rotation"
        self.assertEqual(keys.redact_whole(text), text)
        self.assertEqual(keys.redact(text), f"Our staging {MARKER} host; gateway-key rotation")
        self.assertEqual(keys.redact_whole("the test-gateway-key leaked"), f"the {MARKER} leaked")
        hexed = "test-gateway-key".encode().hex()
        self.assertEqual(keys.redact_whole(f"as hex {hexed}."), f"as hex {MARKER}.")
        document = {"id": "test-gateway-x", "text": text, "supersede_reason": "test-gateway moved",
                    "nested": [{"text": text, "project_id": "test-gateway-p"}]}
        self.assertEqual(keys.redact_document(document), {
            "id": f"{MARKER}x", "text": text, "supersede_reason": "test-gateway moved",
            "nested": [{"text": text, "project_id": f"{MARKER}p"}]})

    def test_whole_forms_are_found_in_linear_time(self):
        code = ("from qmem.clients.knownkeys import KnownKeys\n"
                "keys = KnownKeys(['a' * 600, 'ab' * 40])\n"
                "assert keys.redact_whole('a' * 2_000_000).startswith('[redacted]')\n"
                "near = ('a' * 599 + 'b') * 3000\n"
                "assert keys.redact_whole(near) == near\n"
                "print('done')\n")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
        self.assertEqual((proc.returncode, proc.stdout.strip()), (0, "done"), proc.stderr[-2000:])


class EchoedFormsTests(TempHomeTestCase):
    """A gateway echoing its key in every form: no output, answer or file keeps any of them."""

    def setUp(self):
        super().setUp()
        rng = random.Random()
        alphabet = string.ascii_letters + string.digits + "/+=&"
        self.key = "".join(rng.choice(alphabet) for _ in range(32))
        self.env["QMEM_GATEWAY_API_KEY"] = self.key
        self.env["QMEM_HOST"] = "pi"
        self.gateway = FakeGateway(api_key=self.key).start()
        self.addCleanup(self.gateway.stop)
        write_config(self.env, {"url": self.gateway.url, "connectTimeoutMs": 3000, "timeoutMs": 3000,
                                "breakerTripAfter": 1000})
        self.outputs: list[tuple[str, str]] = []

    def refusal(self, status: int = 422) -> Fault:
        return Fault.status(status, {"error": f"bad {self.key}", "detail": echo(self.key)}, path="/v1/memories",
                            method="POST")

    def cli(self, label: str, *args: str, stdin: str = "", module: str = "qmem.local") -> str:
        proc = subprocess.run([sys.executable, "-m", module, *args], input=stdin, capture_output=True, text=True,
                              env=self.env, cwd=self.home, timeout=120)
        self.outputs.append((label, proc.stdout + proc.stderr))
        self.assertNotIn("Traceback", proc.stderr, label)
        return proc.stdout

    def test_no_form_of_the_key_in_any_output_answer_or_file(self):
        store = ("store", "--project", "shop", "--kind", "fact")
        self.gateway.inject(self.refusal())
        self.cli("store refused", *store, "--text", "refused one")
        self.gateway.inject(self.refusal())
        refused = json.loads(self.cli("store refused --json", *store, "--json", "--text", "refused two"))
        self.assertIn(MARKER, refused["error"]["message"])

        # Queued while the gateway is unreachable in effect (503s), then refused at flush: the outbox reason.
        self.gateway.inject(Fault.status(503, {"detail": echo(self.key)}, path="/v1/memories", times=None))
        queued = json.loads(self.cli("store queued", *store, "--json", "--text", "queued then refused"))
        self.assertTrue(queued.get("queued"), queued)
        self.gateway.clear_faults()
        self.gateway.inject(self.refusal())
        self.cli("breaker reset", "breaker", "reset")
        self.cli("flush", "flush", "--json")
        queue = self.cli("queue", "queue", "--json")
        self.assertIn(MARKER, queue)

        # MCP: the answer to a refused qmem_store.
        self.gateway.inject(self.refusal())
        messages = [{"jsonrpc": "2.0", "id": 0, "method": "initialize",
                     "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "test", "version": "1"}}},
                    {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                     "params": {"name": "qmem_store", "arguments": {"text": "over mcp", "project_id": "shop"}}}]
        stdout = self.cli("mcp", stdin="".join(json.dumps(m) + "\n" for m in messages), module="qmem.mcp")
        answer = [m for m in map(json.loads, stdout.splitlines()) if m.get("id") == 1][0]["result"]
        self.assertTrue(answer["isError"])
        self.assertIn(MARKER, answer["content"][0]["text"])

        # The bridge: the answer to a refused qmem_store.
        self.gateway.inject(self.refusal())
        lines = [{"id": 0, "method": "session_start", "params": {"cwd": str(self.home), "loaded": None}},
                 {"id": 1, "method": "tool", "params": {"name": "qmem_store",
                                                        "args": {"text": "over the bridge", "project_id": "shop"}}}]
        stdout = self.bridge(lines)
        answer = [m for m in map(json.loads, stdout.splitlines()) if m.get("id") == 1][0]
        self.assertIn(MARKER, json.dumps(answer))

        # doctor, text and --json, with the gateway refusing its status probe in every form.
        self.gateway.inject(Fault.status(400, {"error": f"bad {self.key}", "detail": echo(self.key)},
                                         path="/v1/status", times=None))
        doctor = json.loads(self.cli("doctor --json", "doctor", "--json"))
        self.assertIn(f"hex {MARKER}", doctor["gateway"]["error"])
        self.cli("doctor", "doctor")

        for label, output in self.outputs:
            with self.subTest(output=label):
                self.assertEqual(leaked(output, self.key), [])
        files = [path for path in self.home.rglob("*") if path.is_file()]
        self.assertTrue(any(path.name == "qmem.sqlite" for path in files))
        for path in files:
            with self.subTest(file=str(path.relative_to(self.home))):
                self.assertEqual(leaked(path.read_bytes(), self.key), [])

    def bridge(self, lines: list[dict]) -> str:
        """One request at a time (each answered before the next is sent), then stdin ends."""
        proc = subprocess.Popen([sys.executable, "-m", "qmem.bridge"], cwd=self.home, env=self.env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out = []
        watchdog = threading.Timer(120, proc.kill)  # a bridge that stops answering fails the test, never hangs it
        watchdog.start()
        try:
            for line in lines:
                proc.stdin.write(json.dumps(line) + "\n")
                proc.stdin.flush()
                while True:
                    got = proc.stdout.readline()
                    if not got:
                        self.fail("the bridge closed stdout")
                    out.append(got)
                    if json.loads(got).get("id") == line["id"]:
                        break
            proc.stdin.close()
            rest, err = proc.stdout.read(), proc.stderr.read()
            proc.wait(timeout=120)
        finally:
            watchdog.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        text = "".join(out) + rest
        self.outputs.append(("bridge", text + err))
        return text


class AuthoredTextTests(TempHomeTestCase):
    """A key whose pieces occur in a record: the local copy is what was stored, everywhere."""

    KEY = "test-gateway-key"
    TEXT = "Our staging test-gateway host answers on 8443; the gateway-key rotation is monthly"

    def setUp(self):
        super().setUp()
        self.env["QMEM_GATEWAY_API_KEY"] = self.KEY
        self.gateway = FakeGateway(api_key=self.KEY).start()
        self.addCleanup(self.gateway.stop)
        write_config(self.env, {"url": self.gateway.url})

    def cli(self, *args: str, stdin: str = "", module: str = "qmem.local") -> dict:
        proc = subprocess.run([sys.executable, "-m", module, *args], input=stdin, capture_output=True, text=True,
                              env=self.env, cwd=self.home, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
        return json.loads(proc.stdout) if module == "qmem.local" else proc.stdout

    def found(self, words: str) -> list[str]:
        return [result["text"] for result in self.cli("find", "--json", words)["results"]]

    def test_the_local_copy_equals_what_was_stored(self):
        stored = self.cli("store", "--json", "--project", "shop", "--text", self.TEXT)
        self.assertTrue(stored["shared"])
        self.assertEqual(stored["record"]["text"], self.TEXT)
        self.assertEqual(self.gateway.count_by_text(), {self.TEXT: 1})
        self.assertEqual(self.found("test-gateway"), [self.TEXT])
        self.cli("enrich", "--all", "--json")
        self.assertEqual(self.found("staging"), [self.TEXT])
        self.cli("pull", "--json")
        self.assertEqual(self.found("staging"), [self.TEXT])

        messages = [{"jsonrpc": "2.0", "id": 0, "method": "initialize",
                     "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "test", "version": "1"}}},
                    {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                     "params": {"name": "qmem_search", "arguments": {"query": "staging host", "project_id": "shop"}}}]
        stdout = self.cli(stdin="".join(json.dumps(m) + "\n" for m in messages), module="qmem.mcp")
        answer = [m for m in map(json.loads, stdout.splitlines()) if m.get("id") == 1][0]["result"]
        self.assertIn(self.TEXT, answer["content"][0]["text"])

    def test_a_record_holding_the_whole_key_is_refused_before_it_is_shared_or_queued(self):
        for form in (self.KEY, self.KEY.encode().hex()):
            for extra in ((), ("--queue-only",)):
                with self.subTest(form=form, extra=extra):
                    proc = subprocess.run([sys.executable, "-m", "qmem.local", "store", "--json", "--project", "shop",
                                           *extra, "--text", f"the gateway key is {form} for staging"],
                                          capture_output=True, text=True, env=self.env, cwd=self.home, timeout=120)
                    self.assertEqual(proc.returncode, 1, proc.stdout)
                    message = json.loads(proc.stdout)["error"]["message"]
                    self.assertIn("a configured qmem key", message)
                    self.assertNotIn(form, message)
        self.assertEqual(self.gateway.count_by_text(), {})
        self.assertEqual(self.cli("queue", "--json")["counts"]["pending"], 0)

if __name__ == "__main__":
    unittest.main()
