"""flush / enrich / pull against the fake gateway, including crashes and random fault schedules."""

import json
import random
import signal
import subprocess
import sys

from qmem.localdb.record import Observation
from qmem.records import NewRecord
from qmem.sync import enrich, flush, pull

from .fakes import Fault
from .support import REPO, GatewayTestCase


def queue(rt, count, prefix="note"):
    return [rt.outbox.enqueue(NewRecord(text=f"{prefix} number {i}", project_id="p"), tool="test")
            for i in range(count)]


class FlushTests(GatewayTestCase):
    def test_outcomes(self):
        rt = self.runtime()
        existing = self.gateway.add_record("already on the gateway", "fact", "p")
        ok = rt.outbox.enqueue(NewRecord(text="goes through", project_id="p"))
        dup = rt.outbox.enqueue(NewRecord(text="Already on the gateway", project_id="p"))
        self.gateway.reject_texts.add("refused by validation")
        bad = rt.outbox.enqueue(NewRecord(text="refused by validation", project_id="p"))
        report = flush(rt)
        self.assertEqual((report.synced, report.duplicate, report.failed, report.left_pending), (1, 1, 1, 0))
        synced = rt.index.get(ok.id)
        self.assertEqual(synced.state, "synced")
        self.assertEqual(self.gateway.get(synced.id)["text"], "goes through")
        self.assertEqual(rt.index.get(dup.id).duplicate_of, existing["id"])
        failed = rt.index.get(bad.id)
        self.assertEqual((failed.state, failed.text), ("failed", "refused by validation"))
        self.assertIn("422", failed.reason)
        self.assertEqual(flush(rt).sent, 0)  # nothing left to send

    def test_transient_failure_leaves_records_pending(self):
        rt = self.runtime()
        records = queue(rt, 3)
        self.gateway.inject(Fault.status(503, retry_after="0", times=None))
        report = flush(rt)
        self.assertEqual((report.synced, report.left_pending), (0, 3))
        self.assertIn("503", report.stopped)
        self.assertTrue(all(rt.index.get(r.id).state == "pending" for r in records))
        self.gateway.clear_faults()
        rt.breaker_for(self.gateway.url).reset()
        self.assertEqual(flush(rt).synced, 3)

    def test_unauthorized_stops_without_failing_records(self):
        self.env["QMEM_GATEWAY_API_KEY"] = "wrong"
        rt = self.runtime()
        queue(rt, 2)
        report = flush(rt)
        self.assertEqual((report.failed, report.left_pending), (0, 2))
        self.assertIn("API key", report.stopped)

    def test_two_processes_flushing_at_once_never_send_twice(self):
        rt = self.runtime()
        queue(rt, 40)
        rt.close()
        procs = [subprocess.Popen([sys.executable, "-m", "qmem.local", "flush", "--json"], cwd=REPO, env=self.env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        reports = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
        self.assertEqual(sum(r["synced"] for r in reports), 40)
        posts = self.gateway.requests_to("/v1/memories", "POST")
        self.assertEqual(len(posts), 40)
        self.assertEqual(len({p.header("idempotency-key") for p in posts}), 40)
        self.assertEqual(self.gateway.replays, 0)
        self.assertTrue(all(n == 1 for n in self.gateway.count_by_text().values()))

    def test_killed_mid_flush_loses_and_duplicates_nothing(self):
        rt = self.runtime()
        records = queue(rt, 5)
        rt.close()
        self.configure(connectTimeoutMs=600_000, timeoutMs=600_000)
        # The first POST is stored by the gateway, whose answer then never comes.
        self.gateway.inject(Fault.hang(when="after", path="/v1/memories", method="POST"))
        proc = subprocess.Popen([sys.executable, "-m", "qmem.local", "flush"], cwd=REPO, env=self.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.assertTrue(self.gateway.wait_for_requests(1, timeout=60))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        self.configure()
        report = flush(self.runtime())
        rt = self.runtime()
        self.assertEqual([rt.index.get(r.id).state for r in records], ["synced"] * 5)
        self.assertEqual(report.synced, 5)
        self.assertTrue(all(n == 1 for n in self.gateway.count_by_text().values()))
        self.assertEqual(len(self.gateway.live_records()), 5)

    def test_random_fault_schedules_lose_and_double_nothing(self):
        kinds = ["503", "429", "cut_after", "cut_before", "close_after", "close_before", "stall_after", "hang"]
        for seed in range(12):
            with self.subTest(seed=seed):
                self._one_schedule(random.Random(seed), kinds, seed)

    def _one_schedule(self, rng, kinds, seed):
        self.gateway.clear_faults()
        self.configure(connectTimeoutMs=150, timeoutMs=150)
        self.env["QMEM_SQLITE"] = str(self.home / f"schedule-{seed}.sqlite")
        rt = self.runtime()
        existing = self.gateway.add_record(f"existing {seed}", "fact", "p")
        self.gateway.reject_texts.add(f"invalid {seed}")
        texts = [f"schedule {seed} record {i}" for i in range(12)] + [f"Existing {seed}", f"invalid {seed}"]
        rng.shuffle(texts)
        queued = [rt.outbox.enqueue(NewRecord(text=t, project_id="p")) for t in texts]
        faults = []
        for _ in range(rng.randint(3, 10)):
            kind = rng.choice(kinds)
            faults.append({
                "503": lambda: Fault.status(503, retry_after="0", path="/v1/memories"),
                "429": lambda: Fault.status(429, retry_after="0", path="/v1/memories"),
                "cut_after": lambda: Fault.disconnect_mid_body(when="after", path="/v1/memories"),
                "cut_before": lambda: Fault.disconnect_mid_body(path="/v1/memories"),
                "close_after": lambda: Fault.close_without_response(when="after", path="/v1/memories"),
                "close_before": lambda: Fault.close_without_response(path="/v1/memories"),
                "stall_after": lambda: Fault.stall_body(when="after", path="/v1/memories"),
                "hang": lambda: Fault.hang(path="/v1/memories"),
            }[kind]())
        self.gateway.inject(*faults)
        for _ in range(30):  # each run may stop early; time passes, the breaker lets us back in
            rt.breaker_for(self.gateway.url).reset()
            flush(rt)
            if rt.outbox.pending_count() == 0:
                break
        counts = self.gateway.count_by_text()
        for record in queued:
            local = rt.index.get(record.id)
            if record.text == f"invalid {seed}":
                self.assertEqual(local.state, "failed")
                self.assertTrue(local.reason)
                self.assertEqual(local.text, record.text)
            elif record.text == f"Existing {seed}":
                self.assertEqual((local.state, local.duplicate_of), ("duplicate", existing["id"]))
            else:
                self.assertEqual(local.state, "synced", record.text)
                self.assertEqual(counts.get(record.text), 1, record.text)
                self.assertEqual(self.gateway.get(local.id)["text"], record.text)
        rt.close()


class EnrichPullTests(GatewayTestCase):
    def test_enrich_completes_partial_records(self):
        full = self.gateway.add_record("The whole text of the record, which is long", "fact", "p")
        rt = self.runtime()
        rt.index.learn([Observation(id=full["id"], text="The whole text", coverage="partial"),
                        Observation(id="gone-from-gateway", text="kept anyway", coverage="partial")])
        report = enrich(rt)
        self.assertEqual((report.checked, report.updated, report.missing), (2, 1, 1))
        record = rt.index.get(full["id"])
        self.assertEqual((record.text, record.coverage, record.state), (full["text"], "full", "synced"))
        self.assertEqual(rt.index.get("gone-from-gateway").text, "kept anyway")
        self.assertEqual(enrich(rt).checked, 1)  # only what is still partial
        self.assertEqual(enrich(rt, everything=True).checked, 2)

    def test_pull_is_incremental_with_tombstones(self):
        rt = self.runtime()
        records = [self.gateway.add_record(f"pulled record {i}", "fact", "p") for i in range(5)]
        first = pull(rt, page_size=2)
        self.assertEqual((first.items, first.added), (5, 5))
        self.assertGreaterEqual(first.pages, 3)
        self.assertEqual(pull(rt).items, 0)  # cursor persisted: nothing new
        self.gateway.soft_delete(records[0]["id"])
        new = self.gateway.add_record("arrived later", "fact", "p")
        second = pull(rt)
        self.assertEqual((second.items, second.tombstones), (2, 1))
        self.assertIsNotNone(rt.index.get(new["id"]))
        self.assertEqual(rt.index.get(records[0]["id"]).text, "pulled record 0")  # kept, marked deleted
        self.assertNotIn(records[0]["id"], [r.id for r in rt.index.find("pulled record").records])
        self.assertIn(records[0]["id"], [r.id for r in rt.index.find("pulled record", deleted=True).records])

    def test_interrupted_pull_resumes_without_gap(self):
        rt = self.runtime()
        for i in range(6):
            self.gateway.add_record(f"page record {i}", "fact", "p")
        self.assertEqual(pull(rt, page_size=2, max_pages=1).items, 2)
        self.gateway.inject(Fault.disconnect_mid_body(path="/v1/memories:export", times=3))
        report = pull(rt, page_size=2)  # the second page is cut off, retries too
        self.assertEqual((report.items, bool(report.stopped)), (0, True))
        rt.breaker_for(self.gateway.url).reset()
        report = pull(rt, page_size=2)
        self.assertEqual(report.items, 4)
        self.assertEqual(rt.index.status().records, 6)


class CliGatewayTests(GatewayTestCase):
    def test_flush_pull_breaker_commands(self):
        cli = lambda *a: self.run_module("qmem.local", *a)  # noqa: E731
        self.assertEqual(cli("store", "--queue-only", "--project", "p", "--text", "queued by cli").code, 0)
        result = cli("flush", "--json")
        self.assertEqual(json.loads(result.stdout)["synced"], 1, result.stderr)
        self.assertIn("synced 1", cli("queue").stdout)
        stored = cli("store", "--project", "p", "--text", "straight to the gateway", "--json")
        self.assertTrue(json.loads(stored.stdout)["shared"])
        self.assertEqual(json.loads(cli("pull", "--json").stdout)["items"], 2)
        self.assertIn("closed", cli("breaker").stdout)
        self.gateway.stop()
        down = cli("store", "--project", "p", "--text", "while it is down", "--json")
        self.assertTrue(json.loads(down.stdout)["queued"])
        self.assertIn("open", cli("breaker").stdout)
        self.assertIn("reset", cli("breaker", "reset").stdout)
        self.assertIn("closed", cli("breaker", "--json").stdout)
        for args in (["flush"], ["pull"], ["enrich"]):
            result = cli(*args)
            self.assertNoTraceback(result)
            self.assertNotIn(str(self.gateway.port), result.stdout + result.stderr)
