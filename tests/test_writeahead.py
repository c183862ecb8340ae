"""A store is written ahead: queued, held by its process, before its request leaves.

A process killed mid-request leaves the record pending for the next flush, which sends it
under the key the first attempt carried (the gateway keeps one record); a flush in another
process does not send a record a live store holds; once settled, the index holds exactly
what a queued store leaves once a flush sent it (accepted: a synced outbox record, counted
as synced by ``queue``, ``status`` and doctor alike), or nothing (refused, duplicate, not to
be queued).
"""

import json
import signal
import sqlite3
import subprocess
import sys
import threading

from qmem.localdb.record import observation_from_record
from qmem.store import ToolError, qmem_correct, qmem_store

from .fakes import Fault, refused_url
from .smalldisk import run_on_small_disk, small_disk_unavailable
from .support import REPO, GatewayTestCase

TEXT = "Deploys are frozen on Fridays after noon"
LONG_TIMEOUTS = {"connectTimeoutMs": 600_000, "timeoutMs": 600_000}


def rows(path, where="1 = 1", *args):
    """Every column of the index's rows, as stored."""
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in conn.execute(f"SELECT * FROM records WHERE {where} ORDER BY rowid", args)]
    finally:
        conn.close()


class WriteAheadTestCase(GatewayTestCase):
    def index_path(self):
        rt = self.runtime()
        path = str(rt.index.path)
        rt.close()
        return path

    def start_store(self, text=TEXT):
        proc = subprocess.Popen([sys.executable, "-m", "qmem.local", "store", "--project", "p", "--text", text],
                                cwd=REPO, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: proc.poll() is None and (proc.kill(), proc.communicate(timeout=60)))
        return proc

    def posts(self):
        return self.gateway.requests_to("/v1/memories", "POST")

    def queue(self):
        result = self.run_module("qmem.local", "queue", "--json")
        self.assertEqual(result.code, 0, result.stderr)
        return json.loads(result.stdout)


class KilledMidRequestTests(WriteAheadTestCase):
    def kill_mid_request(self, fault):
        """A real ``store`` process, killed while the gateway holds its create; its key."""
        self.configure(**LONG_TIMEOUTS)
        self.gateway.inject(fault)
        proc = self.start_store()
        self.assertTrue(self.gateway.wait_for_requests(1, timeout=60))  # the request has arrived
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        return self.posts()[0].header("idempotency-key")

    def assert_flush_sends_it_once(self, key):
        queued = self.queue()
        self.assertEqual(queued["counts"]["pending"], 1)
        self.assertEqual([(r["id"], r["state"], r["text"]) for r in queued["records"]], [(key, "pending", TEXT)])
        self.configure()
        flushed = self.run_module("qmem.local", "flush", "--json")
        self.assertEqual(flushed.code, 0, flushed.stderr)
        self.assertEqual(json.loads(flushed.stdout)["synced"], 1)
        self.assertEqual([p.header("idempotency-key") for p in self.posts()], [key, key])  # the same key
        self.assertEqual(len(self.gateway.live_records()), 1)
        stored = rows(self.index_path(), "text = ?", TEXT)
        self.assertEqual(len(stored), 1)
        self.assertEqual((stored[0]["state"], stored[0]["local_id"], stored[0]["id"]),
                         ("synced", key, self.gateway.live_records()[0]["id"]))

    def test_killed_before_the_gateway_took_it(self):
        never = threading.Event()  # the gateway never gets past reading the request
        key = self.kill_mid_request(Fault.delay_headers(never, path="/v1/memories", method="POST"))
        self.assertEqual(self.gateway.live_records(), [])
        self.assert_flush_sends_it_once(key)
        self.assertEqual(self.gateway.replays, 0)

    def test_killed_after_the_gateway_took_it(self):
        key = self.kill_mid_request(Fault.hang(when="after", path="/v1/memories", method="POST"))
        self.assertEqual(len(self.gateway.live_records()), 1)  # stored; its answer never came
        self.assert_flush_sends_it_once(key)
        self.assertEqual(self.gateway.replays, 1)  # the flush got the record it already had


class HeldWhileInFlightTests(WriteAheadTestCase):
    def test_a_flush_in_another_process_leaves_a_record_a_live_store_is_sending(self):
        self.configure(**LONG_TIMEOUTS)
        release = threading.Event()
        self.addCleanup(release.set)
        self.gateway.inject(Fault.delay_headers(release, path="/v1/memories", method="POST"))
        proc = self.start_store()
        self.assertTrue(self.gateway.wait_for_requests(1, timeout=60))
        flushed = self.run_module("qmem.local", "flush", "--json")
        self.assertEqual(flushed.code, 0, flushed.stderr)
        report = json.loads(flushed.stdout)
        self.assertEqual((report["synced"], report["elsewhere"]), (0, 1))
        self.assertEqual(len(self.posts()), 1)  # the flush sent nothing
        release.set()
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0, err)
        record_id = self.gateway.live_records()[0]["id"]
        self.assertEqual(out, f"Stored: {record_id} (shared through the Memory Gateway).\n")
        self.assertEqual(self.queue()["counts"], {"pending": 0, "synced": 1, "duplicate": 0, "failed": 0})
        self.assertEqual([(r["id"], r["state"]) for r in rows(self.index_path())], [(record_id, "synced")])


class SettledTests(WriteAheadTestCase):
    """What each answer leaves in the index: accepted, the row a queued store leaves once flushed."""

    def flushed_path(self, arguments):
        """The row the same store leaves queued and then flushed, in an index and a gateway of their own."""
        from .fakes import FakeGateway

        other = FakeGateway(api_key=self.API_KEY).start()
        self.addCleanup(other.stop)
        self.env["QMEM_SQLITE"] = str(self.home / "flushed.sqlite")
        self.configure(other.url)
        try:
            rt = self.runtime()
            qmem_store(rt, arguments, queue_only=True)
            from qmem.sync import flush

            self.assertEqual(flush(rt).synced, 1)
            path = str(rt.index.path)
            rt.close()
        finally:
            del self.env["QMEM_SQLITE"]
            self.configure()
        return rows(path)

    def assertSameRows(self, mine, flushed):
        # Which ids, and when: the values that differ between two gateways and two runs.
        ignore = ("rowid", "id", "local_id", "created_at", "learned_at")
        self.assertEqual([{k: v for k, v in row.items() if k not in ignore} for row in mine],
                         [{k: v for k, v in row.items() if k not in ignore} for row in flushed])

    def test_an_accepted_store_leaves_the_row_a_flushed_store_leaves(self):
        rt = self.runtime()
        arguments = {"text": TEXT, "project_id": "p", "kind": "decision", "scope": "team", "source": "review",
                     "expires_at": "2999-01-01T00:00:00Z"}
        result = qmem_store(rt, arguments)
        record_id = result.details["record"]["id"]
        mine = rows(self.index_path())
        self.assertEqual(len(mine), 1)
        key = self.posts()[0].header("idempotency-key")
        self.assertEqual((mine[0]["id"], mine[0]["local_id"]), (record_id, key))  # a synced outbox row
        self.assertEqual((mine[0]["state"], mine[0]["coverage"], mine[0]["tool"]), ("synced", "full", "qmem_store"))
        self.assertEqual((mine[0]["claim_token"], mine[0]["claim_until"]), (None, None))
        self.assertSameRows(mine, self.flushed_path(arguments))
        self.assertEqual(record_id, self.gateway.live_records()[0]["id"])
        self.assertEqual(self.queue()["counts"]["synced"], 1)

    def test_an_accepted_correction_marks_its_target(self):
        target = self.gateway.add_record("Deploys are frozen on Thursdays", "decision", "p")["id"]
        rt = self.runtime()
        rt.index.learn([observation_from_record(self.gateway.get(target), coverage="full", state="synced",
                                                tool="qmem_get")])
        result = qmem_correct(rt, {"text": TEXT, "project_id": "p", "supersedes_id": target,
                                   "supersede_reason": "moved to Friday"})
        self.assertTrue(result.text.startswith("Corrected: "))
        record_id = result.details["record"]["id"]
        path = self.index_path()
        mine = rows(path, "id = ?", record_id) + rows(path, "id = ?", target)
        self.assertEqual((mine[1]["superseded_by"], mine[1]["supersede_reason"]), (record_id, "moved to Friday"))
        self.assertEqual((mine[0]["state"], mine[0]["supersedes_id"], mine[0]["supersede_reason"]),
                         ("synced", target, "moved to Friday"))
        self.assertEqual(len(rows(path)), 2)
        self.assertEqual([r.id for r in rt.index.find("Friday").records], [record_id])

    def test_a_correction_queued_while_its_target_was_in_flight_keeps_it_hidden(self):
        # The store is held at the gateway; meanwhile a correction of its local id is queued.
        release = threading.Event()
        self.addCleanup(release.set)
        self.gateway.inject(Fault.delay_headers(release, path="/v1/memories", method="POST"))
        rt = self.runtime()
        stored = {}
        worker = threading.Thread(target=lambda: stored.update(
            result=qmem_store(rt, {"text": "Deploys are frozen on Thursdays", "project_id": "p"})))
        worker.start()
        self.assertTrue(self.gateway.wait_for_requests(1, timeout=60))
        [held] = self.queue()["records"]
        correction = qmem_correct(self.runtime(), {"text": TEXT, "project_id": "p", "supersedes_id": held["id"],
                                                   "supersede_reason": "moved to Friday"}, queue_only=True)
        release.set()
        worker.join(timeout=60)
        record_id = stored["result"].details["record"]["id"]
        [target] = rows(self.index_path(), "id = ?", record_id)
        self.assertEqual(target["superseded_by"], correction.details["record"]["id"])  # as any queued mark
        self.assertEqual([r.id for r in rt.index.find("Deploys").records], [correction.details["record"]["id"]])

    def test_refused_duplicate_and_unqueueable_stores_leave_no_row(self):
        path = self.index_path()
        self.gateway.reject_texts.add("refused by the gateway")
        self.gateway.add_record("Already known to the gateway", "fact", "p")
        rt = self.runtime()
        with self.assertRaises(ToolError) as refused:
            qmem_store(rt, {"text": "refused by the gateway", "project_id": "p"})
        self.assertTrue(refused.exception.message.startswith("not stored: "), refused.exception.message)
        duplicate = qmem_store(rt, {"text": "Already known to the gateway", "project_id": "p"})
        self.assertTrue(duplicate.text.startswith("Not stored: the gateway already holds a similar record ("))
        self.configure(refused_url(), offlineQueue=False)
        offline = self.runtime()
        with self.assertRaises(ToolError) as unqueued:
            qmem_store(offline, {"text": "nowhere to go", "project_id": "p"})
        self.assertTrue(unqueued.exception.message.endswith(" and offlineQueue is off"), unqueued.exception.message)
        self.assertEqual(rows(path), [])
        self.assertEqual(len(self.posts()), 2)  # both were sent; neither is kept

    def test_a_refused_correction_leaves_its_target_current(self):
        target = self.gateway.add_record("Deploys are frozen on Thursdays", "decision", "p")["id"]
        rt = self.runtime()
        rt.index.learn([observation_from_record(self.gateway.get(target), coverage="full", state="synced",
                                                tool="qmem_get")])
        path = self.index_path()
        before = rows(path)
        self.gateway.reject_texts.add(TEXT)
        with self.assertRaises(ToolError):
            qmem_correct(rt, {"text": TEXT, "project_id": "p", "supersedes_id": target})
        self.assertEqual(rows(path), before)  # the target is current, and nothing else is there
        self.assertEqual([r.id for r in rt.index.find("Thursdays").records], [target])

    def test_an_unreachable_gateway_leaves_the_record_pending_and_free_for_a_flush(self):
        self.configure(refused_url())
        rt = self.runtime()
        result = qmem_store(rt, {"text": TEXT, "project_id": "p"})
        self.assertTrue(result.text.startswith(f"Queued locally as {result.details['record']['id']}, NOT yet shared: "))
        [row] = rows(self.index_path())
        self.assertEqual((row["id"], row["state"], row["claim_token"], row["claim_until"], row["attempts"]),
                         (result.details["record"]["id"], "pending", None, None, 0))


class FullDiskTests(WriteAheadTestCase):
    def test_a_store_the_index_cannot_write_ahead_is_still_shared(self):
        reason = small_disk_unavailable()
        if reason:
            self.skipTest(reason)
        disk = self.home / "disk"
        disk.mkdir()
        self.env["QMEM_SQLITE"] = str(disk / "qmem.sqlite")
        answers = run_on_small_disk(disk, 1024, [
            {"qmem": ["store", "--queue-only", "--project", "p", "--text", "made the index"]},
            {"leave_free": 0},
            {"qmem": ["store", "--project", "p", "--text", TEXT]},
            {"leave_free": 256 * 1024},
            {"qmem": ["queue", "--json"]},
        ], self.env)
        self.assertEqual(answers[0]["code"], 0, answers[0]["stderr"])
        store = answers[2]
        self.assertEqual(store["code"], 0, store["stderr"])
        [record] = self.gateway.live_records()
        self.assertEqual(store["stdout"], f"Stored: {record['id']} (shared through the Memory Gateway).\n")
        self.assertEqual(store["stderr"], "qmem: the local index is unavailable; offline search and queued writes "
                                          "are off.\n")  # as before the store was written ahead
        self.assertEqual(json.loads(answers[4]["stdout"])["counts"]["pending"], 1)  # only the first one
