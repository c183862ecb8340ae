"""Issue 31, item 1: a write a session file says was "queued locally" never vanishes on import.

One that today's checks refuse (a text too long, a NUL, no ``project_id``) is restored as a
failed outbox record with the cause, counted in the import report, listed by ``queue``, and
never sent.
"""

import json

from qmem.records import MAX_TEXT_CHARS

from .sessionfiles import SessionFile
from .support import GatewayTestCase

WRITES = {
    "local-" + "1" * 32: ({"text": "x" * (MAX_TEXT_CHARS + 1), "project_id": "p"}, "text"),
    "local-" + "2" * 32: ({"text": "a NUL \x00 inside", "project_id": "p"}, "text"),
    "local-" + "3" * 32: ({"text": "no project named"}, "project_id"),
}
VALID = "local-" + "4" * 32


class RestoredInvalidTests(GatewayTestCase):
    def cli(self, *args):
        return self.run_module("qmem.local", *args)

    def test_invalid_queued_writes_are_kept_as_failed_with_their_cause(self):
        session = SessionFile(self.home / ".pi" / "agent" / "sessions" / "--work--" / "s.jsonl")
        for local_id, (arguments, _) in WRITES.items():
            session.call("qmem_store", arguments, details={"qmem": 1, "queued": True, "record": {"id": local_id}})
        session.call("qmem_store", {"text": "a valid queued write", "project_id": "p"},
                     details={"qmem": 1, "queued": True, "record": {"id": VALID}})
        result = self.cli("import", "--json")
        self.assertEqual(result.code, 0, result.stderr)
        report = json.loads(result.stdout)
        self.assertEqual((report["queued_restored"], report["queued_refused"], report["queued_invalid"]), (4, 3, 3))
        queue = json.loads(self.cli("queue", "--json").stdout)
        self.assertEqual(queue["counts"]["failed"], 3)
        failed = {r["id"]: r for r in queue["records"] if r["state"] == "failed"}
        self.assertEqual(set(failed), set(WRITES))
        for local_id, (arguments, field) in WRITES.items():
            with self.subTest(local_id=local_id):
                self.assertIn("not valid now", failed[local_id]["reason"])
                self.assertIn(field, failed[local_id]["reason"])
                self.assertEqual(failed[local_id]["text"], arguments["text"])  # kept as written
        listing = self.cli("queue")
        self.assertEqual(listing.code, 0, listing.stderr)
        self.assertIn("not valid now", listing.stdout)
        # Flush sends the valid one only; the invalid ones stay failed, never sent.
        self.cli("flush")
        self.assertEqual(self.gateway.count_by_text(), {"a valid queued write": 1})
        again = json.loads(self.cli("import", "--json").stdout)  # nothing new: nothing counted twice
        self.assertEqual((again["queued_restored"], again["queued_invalid"]), (0, 0))

    def test_the_text_report_says_so(self):
        session = SessionFile(self.home / ".pi" / "agent" / "sessions" / "--work--" / "s.jsonl")
        session.call("qmem_store", {"text": "no project named"},
                     details={"qmem": 1, "queued": True, "record": {"id": "local-" + "5" * 32}})
        result = self.cli("import")
        self.assertEqual(result.code, 0, result.stderr)
        self.assertIn("queued writes restored 1 (1 kept as failed, never sent: `python3 -m qmem.local queue` says why)",
                      result.stdout)
