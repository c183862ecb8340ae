"""Issue 31, item 6: one truth for each count.  ``queue``, ``status`` and doctor count the
records this machine wrote alike, whether a store was accepted on its own send or by a flush.
"""

import json

from .support import GatewayTestCase


class CountsTests(GatewayTestCase):
    def cli(self, *args):
        result = self.run_module("qmem.local", *args)
        self.assertNotIn("Traceback", result.stderr)
        return result

    def test_queue_status_and_doctor_agree(self):
        for n in range(3):  # accepted on their own send
            self.assertEqual(self.cli("store", "--project", "p", "--text", f"shared at once {n}").code, 0)
        self.gateway.reject_texts.add("refused at flush")
        for text in ("queued then flushed 0", "queued then flushed 1", "refused at flush"):
            self.assertEqual(self.cli("store", "--queue-only", "--project", "p", "--text", text).code, 0)
        self.assertEqual(self.cli("flush").code, 1)  # one failed
        self.assertEqual(self.cli("store", "--queue-only", "--project", "p", "--text", "still queued").code, 0)
        expected = {"pending": 1, "synced": 5, "duplicate": 0, "failed": 1}
        self.assertEqual(len(self.gateway.live_records()), expected["synced"])
        self.assertEqual(json.loads(self.cli("queue", "--json").stdout)["counts"], expected)
        status = json.loads(self.cli("status", "--json").stdout)
        self.assertEqual(status["queue"], expected)
        self.assertEqual(status["records"], sum(expected.values()))
        doctor = json.loads(self.cli("doctor", "--json").stdout)
        self.assertEqual({k: doctor["index"]["queue"][k] for k in expected}, expected)
        self.assertIn("synced 5", self.cli("status").stdout)
        self.assertTrue(self.cli("queue").stdout.startswith("pending 1 · synced 5 · duplicate 0 · failed 1\n"))
