import subprocess
import sys
import textwrap

from qmem.localdb.outbox import Outbox
from qmem.localdb.record import Observation, Outcome
from qmem.localindex import LocalIndex
from qmem.records import NewRecord, is_local_id

from .support import REPO, TempHomeTestCase


class OutboxTests(TempHomeTestCase):
    def setUp(self):
        super().setUp()
        self.path = self.home / "qmem.sqlite"
        self.index = LocalIndex(self.path)
        self.addCleanup(self.index.close)
        self.outbox = Outbox(self.index)

    def queue(self, text, **kw):
        return self.outbox.enqueue(NewRecord(text=text, project_id="p", **kw), tool="test")

    def test_enqueue_gives_a_fresh_local_id_findable_at_once(self):
        a, b = self.queue("first queued note"), self.queue("second queued note")
        self.assertTrue(is_local_id(a.id) and is_local_id(b.id))
        self.assertNotEqual(a.id, b.id)
        self.assertEqual((a.state, a.local_id), ("pending", a.id))
        found = self.index.find("first queued")
        self.assertEqual([r.id for r in found.records][:found.complete], [a.id])  # the one with every word
        self.assertEqual(self.outbox.report().counts["pending"], 2)

    def test_claims_are_exclusive_between_connections(self):
        ids = {self.queue(f"note {i}").id for i in range(10)}
        with LocalIndex(self.path) as other:
            first = self.outbox.claim_batch(6, lease_seconds=60)
            second = Outbox(other).claim_batch(6, lease_seconds=60)
        self.assertEqual(len(first), 6)
        self.assertEqual(len(second), 4)
        self.assertEqual({r.id for r in first} | {r.id for r in second}, ids)
        self.assertFalse({r.id for r in first} & {r.id for r in second})
        self.assertEqual(self.outbox.claim_batch(10, lease_seconds=60), [])

    def test_expired_lease_can_be_claimed_again(self):
        rec = self.queue("lease")
        self.assertEqual(len(self.outbox.claim_batch(1, lease_seconds=-1)), 1)
        self.assertEqual([r.id for r in self.outbox.claim_batch(1, lease_seconds=60)], [rec.id])

    def test_claim_of_a_killed_process_is_taken_over(self):
        rec = self.queue("claimed by a process that dies")
        script = textwrap.dedent(f"""
            import os
            from qmem.localindex import LocalIndex
            from qmem.localdb.outbox import Outbox, Outcome
            index = LocalIndex({str(self.path)!r})
            assert len(Outbox(index).claim_batch(5, lease_seconds=3600)) == 1
            os._exit(0)  # dies holding a one-hour claim
        """)
        subprocess.run([sys.executable, "-c", script], check=True, cwd=REPO, timeout=60)
        self.assertEqual([r.id for r in self.outbox.claim_batch(5, lease_seconds=60)], [rec.id])

    def test_synced_adopts_the_gateway_id_everywhere(self):
        target = self.queue("the original claim")
        correction = self.queue("the corrected claim", supersedes_id=target.id, supersede_reason="was wrong")
        self.outbox.record_outcomes([Outcome.synced(target.local_id, {"id": "g-100", "text": "the original claim",
                                                                      "created_at": "2026-11-01T00:00:00Z"})])
        synced = self.index.get("g-100")
        self.assertEqual((synced.id, synced.local_id, synced.state), ("g-100", target.local_id, "synced"))
        self.assertIsNone(self.index.get("nonexistent"))
        self.assertEqual(self.index.get(target.local_id).id, "g-100")  # still reachable by local id
        # FTS follows; the queued correction hides its target at once, so ask for superseded records too.
        self.assertIn("g-100", [r.id for r in self.index.find("original claim", superseded=True).records])
        self.assertEqual(self.index.get("g-100").superseded_by, correction.local_id)
        self.assertEqual(self.index.get(correction.id).supersedes_id, "g-100")  # reference remapped
        self.assertEqual(self.outbox.gateway_id(target.local_id), ("synced", "g-100"))
        # The correction syncing marks its target superseded, so find hides it.
        self.outbox.record_outcomes([Outcome.synced(correction.local_id, {"id": "g-101"})])
        self.assertEqual(self.index.get("g-100").superseded_by, "g-101")
        self.assertEqual([r.id for r in self.index.find("claim").records], ["g-101"])

    def test_synced_merges_with_a_row_learned_meanwhile(self):
        rec = self.queue("learned twice")
        self.index.learn([Observation(id="g-7", text="learned twice", coverage="partial", superseded_by="g-8")])
        self.outbox.record_outcomes([Outcome.synced(rec.local_id, {"id": "g-7", "text": "learned twice"})])
        self.assertEqual(self.index.status().records, 1)
        row = self.index.get("g-7")
        self.assertEqual((row.local_id, row.state, row.coverage, row.superseded_by),
                         (rec.local_id, "synced", "full", "g-8"))

    def test_two_keys_answered_with_one_record_in_one_batch_make_one_row(self):
        first, second = self.queue("said once"), self.queue("said twice")
        self.outbox.record_outcomes([Outcome.synced(first.local_id, {"id": "g-9", "text": "said once"}),
                                     Outcome.synced(second.local_id, {"id": "g-9", "text": "said once"})])
        self.assertEqual(self.index.status().records, 1)
        self.assertEqual(self.index.get("g-9").state, "synced")

    def test_failed_and_duplicate_keep_the_text(self):
        a, b, c = self.queue("refused text"), self.queue("similar text"), self.queue("transient")
        self.outbox.record_outcomes([Outcome.failed(a.local_id, "422 kind invalid\n" + "x" * 1000),
                                     Outcome.duplicate(b.local_id, "g-55"), Outcome.transient(c.local_id, "503")])
        failed, dup, pending = (self.index.get(x.id) for x in (a, b, c))
        self.assertEqual((failed.state, failed.text), ("failed", "refused text"))
        self.assertLessEqual(len(failed.reason), 300)
        self.assertNotIn("\n", failed.reason)
        self.assertEqual((dup.state, dup.duplicate_of, dup.text), ("duplicate", "g-55", "similar text"))
        self.assertEqual((pending.state, pending.attempts), ("pending", 1))
        self.assertEqual(self.outbox.report().counts, {"pending": 1, "synced": 0, "duplicate": 1, "failed": 1})
        self.assertEqual([r.id for r in self.outbox.retry()], [a.id])
        self.assertEqual(self.index.get(a.id).state, "pending")
