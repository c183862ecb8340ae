"""``python3 -m qmem.local forget ID… [--dry-run]`` and ``/qmem:local forget``, as real processes.

* A record still queued: ``--dry-run`` changes nothing; ``forget`` removes it from the index and the
  outbox, no byte of its text is left in the index's files, and the next flush sends nothing — the
  fake gateway's request log has no write at all.
* A record the gateway holds: its local copy goes, the gateway keeps it, and the answer says plainly
  that the shared copy remains and needs a gateway administrator.
* Exit codes as elsewhere: an unknown id is one line and exit 1 (nothing changes), no id is usage (2).
* The same command through a bridge's ``/qmem:local``; a refused store says how to report a false positive.
"""

from __future__ import annotations

import json
import subprocess
import sys

from .fakes import FakeGateway
from .linepeer import LivePeer
from .support import TempHomeTestCase, write_config

KEY = "forget-test-gateway-key"


class ForgetTests(TempHomeTestCase):
    def setUp(self):
        super().setUp()
        self.env["QMEM_GATEWAY_API_KEY"] = KEY
        self.gateway = FakeGateway(api_key=KEY).start()
        self.addCleanup(self.gateway.stop)
        write_config(self.env, {"url": self.gateway.url})

    def cli(self, *args: str, code: int = 0) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-m", "qmem.local", *args], capture_output=True, text=True,
                              env=self.env, cwd=self.home, timeout=120)
        self.assertNotIn("Traceback", proc.stderr)
        self.assertEqual(proc.returncode, code, proc.stderr[-2000:] + proc.stdout[-2000:])
        return proc

    def doc(self, *args: str, code: int = 0) -> dict:
        return json.loads(self.cli(*args, "--json", code=code).stdout)

    def found(self, words: str) -> list[str]:
        return [result["id"] for result in self.doc("find", words)["results"]]

    def index_bytes(self) -> bytes:
        return b"".join(path.read_bytes() for path in (self.home / ".local" / "share" / "qmem").glob("qmem.sqlite*"))

    def writes(self) -> list:
        return [request for request in self.gateway.requests if request.method == "POST"
                and request.path == "/v1/memories"]

    def test_a_queued_record_is_removed_and_never_sent(self):
        secret = "Zebra-quokka staging runs the Wombatxylophonist build"
        queued = self.doc("store", "--project", "shop", "--queue-only", "--text", secret)
        local_id = queued["record"]["id"]
        kept = self.doc("store", "--project", "shop", "--queue-only", "--text", "Zebra-quokka deploys on Fridays")
        self.assertEqual(len(self.found("zebra quokka")), 2)

        dry = self.doc("forget", local_id, "--dry-run")
        self.assertEqual((dry["dry_run"], dry["forgotten"], [e["id"] for e in dry["would_forget"]]),
                         (True, [], [local_id]))
        self.assertIs(dry["would_forget"][0]["shared_copy_remains"], False)
        self.assertEqual(len(self.found("zebra quokka")), 2)  # nothing changed
        self.assertIn("dry run: nothing was changed", self.cli("forget", local_id, "--dry-run").stdout)

        done = self.doc("forget", local_id)
        self.assertEqual([e["id"] for e in done["forgotten"]], [local_id])
        self.assertIn("no flush will send it", done["forgotten"][0]["what"])
        self.assertEqual(self.found("zebra quokka"), [kept["record"]["id"]])
        queue = self.doc("queue")
        self.assertEqual([r["id"] for r in queue["records"]], [kept["record"]["id"]])
        self.cli("status")  # the index is whole
        stored = self.index_bytes()
        for word in (b"Wombatxylophonist", b"wombatxylophonist", b"xylophonist"):  # the text, its full-text term
            self.assertFalse(word in stored, f"{word!r} is still in the index's files")  # no page, segment or frame

        self.doc("flush")
        self.assertEqual(self.gateway.count_by_text(), {"Zebra-quokka deploys on Fridays": 1})
        self.assertEqual([json.dumps(r.json) for r in self.writes() if "Wombat" in json.dumps(r.json)], [])
        self.assertEqual(len(self.writes()), 1)

        # Gone is gone: a second forget of it is an error, and nothing else moves.
        refused = self.cli("forget", local_id, code=1)
        self.assertEqual(len(refused.stderr.strip().splitlines()), 1)
        self.assertIn("is not in the local index", refused.stderr)

    def test_a_synced_record_loses_its_local_copy_and_the_answer_says_the_shared_copy_remains(self):
        stored = self.doc("store", "--project", "shop", "--text", "Walrus builds run on the big runner")
        self.assertTrue(stored["shared"])
        record_id = stored["record"]["id"]
        self.assertEqual(self.found("walrus"), [record_id])
        text = self.cli("forget", record_id).stdout
        self.assertIn("the Memory Gateway keeps the shared copy", text)
        self.assertIn("only a gateway administrator can delete it", text)
        self.assertIn("ask its administrator", text)
        self.assertEqual(self.found("walrus"), [])
        self.assertEqual(self.gateway.count_by_text(), {"Walrus builds run on the big runner": 1})
        again = self.doc("store", "--project", "shop", "--queue-only", "--text", "Walrus two")
        document = self.doc("forget", again["record"]["id"])
        self.assertIs(document["forgotten"][0]["shared_copy_remains"], False)

    def test_exit_codes_and_all_or_nothing(self):
        queued = self.doc("store", "--project", "shop", "--queue-only", "--text", "Narwhal note")["record"]["id"]
        error = self.doc("forget", queued, "no-such-record", code=1)
        self.assertEqual(error["error"]["category"], "input")
        self.assertEqual(self.found("narwhal"), [queued])  # the known one stays too
        usage = self.cli("forget", code=2)
        self.assertIn("required: id", usage.stderr.lower())

    def test_through_the_bridge_and_a_refused_store_says_how_to_report_a_false_positive(self):
        queued = self.doc("store", "--project", "shop", "--queue-only", "--text", "Ocelot note")["record"]["id"]
        # No session_start: it starts a background flush, which would race this forget for the row
        # (both outcomes are correct; forget then says to try again). Requests before session_start
        # are answered by a provisional session, which starts no flush.
        lines = [{"id": 1, "method": "command", "params": {"name": "qmem:local", "args": f"forget {queued}"}},
                 {"id": 2, "method": "tool", "params": {"name": "qmem_store", "args": {
                     "project_id": "shop", "text": "token ghp_" + "Q7vR2mX9kL4pT8wZ3nB6yH1cF5dJ0sA2eU7i"}}},
                 {"id": 3, "method": "shutdown"}]
        peer = LivePeer("qmem.bridge", self.env, str(self.home))
        self.addCleanup(peer.kill)
        answers = {line["id"]: peer.ask(line) for line in lines}
        peer.close()
        self.assertIn(f"forgot {queued}", answers[1]["result"]["text"])
        self.assertEqual(self.found("ocelot"), [])
        refusal = json.dumps(answers[2])
        self.assertIn("not stored", refusal)
        self.assertIn("Report the false positive", refusal)
        self.assertEqual(self.writes(), [])
