"""Issue 19: every queued record either leaves or says why, on every path.

A record that cannot be sent is marked failed and never blocks the rest; there is one store
path; concurrent flushers report what another process is sending as that, not as a failure;
failed records can be retried; ``queue`` says when its list is cut.
"""

import _thread
import json
import queue
import signal
import subprocess
import sys
import threading

from qmem.diagnostics import SENTENCES, Warnings
from qmem.hosts.session import PluginSession
from qmem.localdb.outbox import UNKNOWN_LOCAL_TARGET
from qmem.localdb.record import Outcome
from qmem.records import NewRecord
from qmem.store import ToolError, qmem_correct, qmem_store
from qmem.sync import flush

from .fakes import FakeGateway, refused_url
from .sessionfiles import SessionFile
from .support import REPO, GatewayTestCase

UNKNOWN = "local-" + "f" * 32  # a local id no outbox here ever queued
POISON_ID = "local-" + "e" * 32


class GatedGateway(FakeGateway):
    """A gateway that holds every create at a gate until the test opens it, counting those
    waiting there: the test opens it once each flusher has a request inside (overlap by design)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.gate = threading.Event()
        self.arrived = threading.Condition()
        self.waiting = 0

    def _store(self, req):
        with self.arrived:
            self.waiting += 1
            self.arrived.notify_all()
        self.gate.wait()
        return super()._store(req)

    def wait_for_waiting(self, n, timeout=120):
        with self.arrived:
            return self.arrived.wait_for(lambda: self.waiting >= n, timeout)


class InterruptingGateway(FakeGateway):
    """A gateway whose third create interrupts the test's main thread (as Ctrl-C would) while
    the flush that sent it is in the middle of its batch."""

    creates = 0

    def _store(self, req):
        self.creates += 1
        if self.creates == 3:
            _thread.interrupt_main()
        return super()._store(req)


class PoisonedCorrectionTests(GatewayTestCase):
    """Item 1: one record that cannot be sent fails alone, naming the cause; the rest goes."""

    def cli(self, *args, **kw):
        return self.run_module("qmem.local", *args, **kw)

    def queue_with_poison(self, before, after):
        """``before`` records, a correction of a local id this outbox never knew (restored by
        import from a session file, one of the issue's two ways in), then ``after`` records."""
        rt = self.runtime()
        for n in range(before):
            rt.outbox.enqueue(NewRecord(text=f"queued before {n}", project_id="p"))
        session = SessionFile(self.home / ".pi" / "agent" / "sessions" / "--work--" / "s.jsonl")
        session.call("qmem_correct", {"text": "poisoned correction", "project_id": "p", "supersedes_id": UNKNOWN},
                     details={"qmem": 1, "queued": True, "record": {"id": POISON_ID}})
        self.assertEqual(json.loads(self.cli("import", "--json").stdout)["queued_restored"], 1)
        for n in range(after):
            rt.outbox.enqueue(NewRecord(text=f"queued after {n}", project_id="p"))
        rt.close()

    def test_one_poisoned_correction_among_100_fails_alone_and_blocks_nothing(self):
        self.queue_with_poison(49, 50)
        result = self.cli("flush", "--json")
        self.assertEqual(result.code, 1, result.stderr)
        self.assertNoTraceback(result)
        document = json.loads(result.stdout)
        self.assertEqual((document["synced"], document["failed"], document["remaining"]), (99, 1, 0))
        self.assertEqual(result.stderr.strip().splitlines(), [result.stderr.strip()])
        self.assertIn("1 record failed", result.stderr)
        self.assertEqual(len(self.gateway.live_records()), 99)
        poisoned = self.runtime().index.get(POISON_ID)
        self.assertEqual((poisoned.state, poisoned.text), ("failed", "poisoned correction"))
        self.assertIn(UNKNOWN_LOCAL_TARGET, poisoned.reason)
        queue_text = self.cli("queue").stdout
        self.assertIn(UNKNOWN_LOCAL_TARGET, queue_text)
        self.assertIn(f"python3 -m qmem.local queue retry {POISON_ID}", queue_text)
        # The next store's flush is not blocked by it.
        for n in range(3):
            self.assertEqual(self.cli("store", "--queue-only", "--project", "p", "--text", f"later {n}").code, 0)
        stored = self.cli("store", "--project", "p", "--text", "shared at once", "--json")
        self.assertEqual(stored.code, 0, stored.stderr)
        self.assertEqual(json.loads(stored.stdout)["backlog"], {"sent": 3, "still_queued": 0})
        self.assertEqual(len(self.gateway.live_records()), 103)

    def test_a_failed_record_says_not_sent_once(self):
        self.queue_with_poison(0, 0)
        rt = self.runtime()
        token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # built here so no scanner flags the file
        leaked = rt.outbox.enqueue(NewRecord(text=f"the deploy token is {token}", project_id="p"))
        rt.close()
        self.assertEqual(self.cli("flush").code, 1)
        lines = {line.split()[1]: line for line in self.cli("queue").stdout.splitlines() if line.startswith("✗ ")}
        self.assertIn(f"(not sent: {UNKNOWN_LOCAL_TARGET}; supersedes {UNKNOWN})", lines[POISON_ID])
        self.assertIn("(not sent: it looks like it contains a credential (github-token); remove it and store a "
                      "reference instead)", lines[leaked.id])
        self.assertNotIn("not sent: not sent", "".join(lines.values()))
        reasons = {r["id"]: r["reason"] for r in json.loads(self.cli("queue", "--json").stdout)["records"]}
        self.assertEqual(reasons[POISON_ID], UNKNOWN_LOCAL_TARGET)  # the cause alone: "failed" says it was not sent
        self.assertTrue(reasons[leaked.id].startswith("it looks like it contains a credential"), reasons[leaked.id])

    def test_inside_a_bridge_session_it_is_one_warning(self):
        self.queue_with_poison(20, 20)
        rt = self.runtime()
        rt.outbox.enqueue(NewRecord(text="a second poison", project_id="p", supersedes_id="local-" + "d" * 32))
        rt.close()
        bridge = subprocess.Popen([sys.executable, "-m", "qmem.bridge"], cwd=REPO, env=self.env, text=True,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(json.loads(line)) for line in bridge.stdout], daemon=True).start()
        self.assertEqual(lines.get(timeout=60)["event"], "ready")
        bridge.stdin.write(json.dumps({"id": 1, "method": "session_start", "params": {"cwd": str(self.home)}}) + "\n")
        bridge.stdin.flush()
        seen = []
        while not any(m.get("event") == "warning" for m in seen):
            seen.append(lines.get(timeout=60))  # the background flush ends with the warning
        bridge.stdin.write(json.dumps({"id": 2, "method": "shutdown"}) + "\n")
        bridge.stdin.close()
        self.assertEqual(bridge.wait(timeout=60), 0)
        bridge.stdout.close()
        self.assertNotIn("Traceback", bridge.stderr.read())
        bridge.stderr.close()
        while not lines.empty():
            seen.append(lines.get())
        warnings = [m["message"] for m in seen if m.get("event") == "warning"]
        self.assertEqual(warnings, [SENTENCES["queue_failed"]])
        self.assertEqual(len(self.gateway.live_records()), 40)
        self.assertEqual(self.runtime().outbox.report().counts["failed"], 2)

    def test_the_plugin_session_flush_warns_once(self):
        self.queue_with_poison(2, 2)
        said = []
        session = PluginSession(host=None, cwd=self.home, env=dict(self.env), warnings=Warnings(said.append))
        self.addCleanup(session.close)
        session.session_start()
        session.wait_for_flush(timeout=60)
        self.assertEqual(said, [SENTENCES["queue_failed"]])
        self.assertEqual(len(self.gateway.live_records()), 4)

    def test_every_store_path_refuses_a_correction_of_an_unknown_local_record(self):
        rt = self.runtime()
        correction = {"text": "corrects nothing known", "project_id": "p", "supersedes_id": UNKNOWN}
        for tool in (qmem_store, qmem_correct):
            with self.subTest(tool=tool.__name__), self.assertRaises(ToolError) as caught:
                tool(rt, correction)
            self.assertEqual(caught.exception.message, UNKNOWN_LOCAL_TARGET)
        with self.assertRaises(ToolError) as caught:
            qmem_store(rt, correction, queue_only=True)
        self.assertEqual(caught.exception.message, UNKNOWN_LOCAL_TARGET)
        for extra in ([], ["--queue-only"]):
            with self.subTest(cli=extra):
                result = self.cli("store", *extra, "--project", "p", "--text", "x", "--supersedes", UNKNOWN)
                self.assertEqual((result.code, result.stderr), (1, f"qmem-local: {UNKNOWN_LOCAL_TARGET}\n"))
        self.configure(url=None)
        result = self.cli("store", "--project", "p", "--text", "x", "--supersedes", UNKNOWN)
        self.assertEqual((result.code, result.stderr), (1, f"qmem-local: {UNKNOWN_LOCAL_TARGET}\n"))
        self.assertEqual(self.gateway.requests_to("/v1/memories", "POST"), [])
        self.assertEqual(self.runtime().index.status().records, 0)

    def test_a_batch_interrupted_midway_holds_no_claim(self):
        # Ctrl-C as a terminal delivers it, even where the suite was started with SIGINT ignored
        # (a background job): interrupt_main() only simulates the signal, which an ignored handler drops.
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        self.addCleanup(signal.signal, signal.SIGINT, previous)
        gateway = InterruptingGateway(api_key=self.API_KEY).start()
        self.addCleanup(gateway.stop)
        self.configure(gateway.url)
        rt = self.runtime()
        for n in range(10):
            rt.outbox.enqueue(NewRecord(text=f"interrupted {n}", project_id="p"))
        with self.assertRaises(KeyboardInterrupt):
            flush(rt)
        # Claims of this very process count as held: none may be left once flush has returned.
        pending = rt.outbox.pending_by_holder()
        self.assertEqual(pending.elsewhere, 0)
        self.assertEqual(pending.free, rt.outbox.pending_count())
        self.assertEqual(flush(rt).remaining, 0)
        self.assertEqual(len(gateway.live_records()), 10)
        self.assertTrue(all(n == 1 for n in gateway.count_by_text().values()))


class OneStorePathTests(GatewayTestCase):
    """Item 2: ``store --queue-only`` is the tools' store, without contacting the gateway."""

    def test_queue_only_answers_as_the_tool_does_and_never_calls_the_gateway(self):
        target = self.run_module("qmem.local", "store", "--project", "p", "--text", "on the gateway", "--json")
        target_id = json.loads(target.stdout)["record"]["id"]
        result = self.run_module("qmem.local", "store", "--queue-only", "--project", "p", "--text", "corrected",
                                 "--supersedes", "gw-not-known-here", "--json")
        self.assertEqual(result.code, 0, result.stderr)
        document = json.loads(result.stdout)
        self.assertEqual((document["queued"], document["shared"], document["target_known_locally"]),
                         (True, False, False))
        text = self.run_module("qmem.local", "store", "--queue-only", "--project", "p", "--text", "again",
                               "--supersedes", "gw-not-known-here").stdout
        self.assertRegex(text, r"^Queued locally as local-[0-9a-f]{32}, NOT yet shared: the gateway was not "
                               r"contacted \(queue only\)\.")
        self.assertIn("gw-not-known-here is not in the local index; the gateway will decide", text)
        known = self.run_module("qmem.local", "store", "--queue-only", "--project", "p", "--text", "fixes it",
                                "--supersedes", target_id).stdout
        self.assertIn(f"{target_id} is hidden from search as superseded from now on", known)
        self.assertEqual(len(self.gateway.requests_to("/v1/memories", "POST")), 1)  # only the first store
        # The same validation and scan as the tools.
        expired = self.run_module("qmem.local", "store", "--queue-only", "--project", "p", "--text", "x",
                                  "--expires-at", "2001-01-01T00:00:00Z")
        self.assertEqual((expired.code, expired.stderr), (1, "qmem-local: expires_at must be in the future\n"))


class ConcurrentFlushTests(GatewayTestCase):
    """Item 5: three flushers at once all exit 0; each record is sent once."""

    def test_three_flushers_of_300_records(self):
        gateway = GatedGateway(api_key=self.API_KEY).start()
        self.addCleanup(gateway.stop)
        self.addCleanup(gateway.gate.set)
        self.configure(gateway.url, connectTimeoutMs=600_000, timeoutMs=600_000)
        rt = self.runtime()
        for n in range(300):
            rt.outbox.enqueue(NewRecord(text=f"concurrent record {n}", project_id="p"))
        rt.close()
        procs = [subprocess.Popen([sys.executable, "-m", "qmem.local", "flush", "--json"], cwd=REPO, env=self.env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
        # Each flusher sends one create at a time: three held at the gate are one from each.
        self.assertTrue(gateway.wait_for_waiting(3))
        gateway.gate.set()
        outputs = [p.communicate(timeout=300) for p in procs]
        for proc, (stdout, stderr) in zip(procs, outputs):
            self.assertEqual(proc.returncode, 0, stderr)
            self.assertEqual(json.loads(stdout)["remaining"], 0)
        self.assertEqual(sum(json.loads(stdout)["synced"] for stdout, _ in outputs), 300)
        posts = gateway.requests_to("/v1/memories", "POST")
        self.assertEqual(len(posts), 300)
        self.assertEqual(len({p.header("idempotency-key") for p in posts}), 300)
        self.assertEqual(len(gateway.live_records()), 300)

    def test_records_held_by_another_live_process_are_counted_apart(self):
        rt = self.runtime()
        for n in range(3):
            rt.outbox.enqueue(NewRecord(text=f"held elsewhere {n}", project_id="p"))
        holder = subprocess.Popen(
            [sys.executable, "-c", "import sys\nfrom qmem.runtime import Runtime\nrt = Runtime()\n"
             "print(len(rt.outbox.claim_batch(2, lease_seconds=600)), flush=True)\nsys.stdin.read()"],
            cwd=REPO, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(holder.stdout.close)
        self.addCleanup(holder.wait, 60)
        self.addCleanup(holder.stdin.close)
        self.assertEqual(holder.stdout.readline().strip(), "2")  # it holds two, and lives on
        result = self.run_module("qmem.local", "flush")
        self.assertEqual(result.code, 0, result.stderr)
        self.assertEqual(result.stdout.splitlines()[0], "sent 1: synced 1, duplicate 0, failed 0; still pending 0; "
                                                        "2 being sent by another qmem process")
        document = json.loads(self.run_module("qmem.local", "flush", "--json").stdout)
        self.assertEqual((document["elsewhere"], document["remaining"], document["complete"]), (2, 0, True))
        # A correction of a record that process holds waits, and the flush says why it is left.
        held = [r for r in rt.outbox.report().records if r.state == "pending"]
        rt.outbox.enqueue(NewRecord(text="corrects a held one", project_id="p", supersedes_id=held[0].id))
        waiting = self.run_module("qmem.local", "flush")
        self.assertEqual(waiting.code, 1)
        self.assertEqual(waiting.stderr, "qmem-local: flush stopped with 1 record still queued: what is left "
                                         "corrects records that are not sent yet; the next flush sends it\n")


class RetryTests(GatewayTestCase):
    """Item 8: ``queue retry`` moves failed records back to pending; the scan still runs."""

    def cli(self, *args, **kw):
        return self.run_module("qmem.local", *args, **kw)

    def test_retry_after_the_cause_is_fixed(self):
        self.gateway.reject_texts.update({"refused for now", "refused as well"})
        for text in ("refused for now", "refused as well", "accepted"):
            self.assertEqual(self.cli("store", "--queue-only", "--project", "p", "--text", text).code, 0)
        self.assertEqual(self.cli("flush").code, 1)
        failed = {r["text"]: r["id"] for r in json.loads(self.cli("queue", "--json").stdout)["records"]
                  if r["state"] == "failed"}
        self.assertEqual(set(failed), {"refused for now", "refused as well"})
        listing = self.cli("queue").stdout
        for record_id in failed.values():
            self.assertIn(f"python3 -m qmem.local queue retry {record_id}", listing)
        # Not failed, or unknown: nothing moves.
        synced_id = [r["id"] for r in json.loads(self.cli("queue", "--json").stdout)["records"]
                     if r["state"] == "synced"][0]
        for bad in (synced_id, UNKNOWN):
            result = self.cli("queue", "retry", failed["refused for now"], bad)
            self.assertEqual(result.code, 1, result.stderr)
            self.assertIn(bad, result.stderr)
        self.assertEqual(json.loads(self.cli("queue", "--json").stdout)["counts"]["failed"], 2)
        for usage in (["queue", "retry"], ["queue", "retry", "--all", failed["refused for now"]],
                      ["queue", failed["refused for now"]]):
            self.assertEqual(self.cli(*usage).code, 2, usage)
        self.gateway.reject_texts.clear()  # the user fixed the cause
        retried = self.cli("queue", "retry", failed["refused for now"], "--json")
        self.assertEqual(json.loads(retried.stdout), {"retried": [failed["refused for now"]], "count": 1})
        self.assertEqual(self.cli("flush").code, 0)
        session = PluginSession(host="pi", cwd=self.home, env=dict(self.env))  # the host command, same parser
        self.addCleanup(session.close)
        self.assertIn("1 failed record back to pending", session.command("qmem:local", "queue retry --all"))
        self.assertEqual(self.cli("flush").code, 0)
        self.assertEqual(self.gateway.count_by_text(), {"refused for now": 1, "refused as well": 1, "accepted": 1})
        self.assertEqual(self.cli("queue", "retry", "--all").stdout, "no failed records to retry\n")

    def test_a_retried_record_is_scanned_again_and_never_sent(self):
        token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
        session = SessionFile(self.home / ".pi" / "agent" / "sessions" / "--work--" / "s.jsonl")
        local_id = "local-" + "c" * 32
        session.call("qmem_store", {"text": f"deploy with {token}", "project_id": "p"},
                     details={"qmem": 1, "queued": True, "record": {"id": local_id}})
        self.assertEqual(json.loads(self.cli("import", "--json").stdout)["queued_refused"], 1)
        self.assertEqual(json.loads(self.cli("queue", "retry", "--all", "--json").stdout)["count"], 1)
        result = self.cli("flush", "--json")
        self.assertEqual((result.code, json.loads(result.stdout)["failed"]), (1, 1))
        self.assertEqual(self.gateway.requests_to("/v1/memories", "POST"), [])
        record = self.runtime().index.get(local_id)
        self.assertEqual(record.state, "failed")
        self.assertIn("github", record.reason)
        self.assertNotIn(token, record.reason)

    def test_a_retried_correction_hides_its_target_again(self):
        self.configure(refused_url())
        old = json.loads(self.cli("store", "--project", "p", "--text", "old fact", "--json").stdout)["record"]["id"]
        new = json.loads(self.cli("store", "--project", "p", "--text", "new fact", "--supersedes", old,
                                  "--json").stdout)["record"]["id"]
        rt = self.runtime()
        self.assertNotIn(old, [r.id for r in rt.index.find("fact").records])
        rt.outbox.record_outcomes([Outcome.failed(new, "422 refused")])  # a refused flush leaves it so: the target is current again
        self.assertIn(old, [r.id for r in rt.index.find("fact").records])
        self.assertEqual(self.cli("queue", "retry", new).code, 0)
        self.assertNotIn(old, [r.id for r in rt.index.find("fact").records])


class QueueListingTests(GatewayTestCase):
    """Issue 22, item 3: ``queue --json`` says when its list is cut."""

    def test_limit_all_and_the_default_cut(self):
        rt = self.runtime()
        for n in range(201):
            rt.outbox.enqueue(NewRecord(text=f"listed {n}", project_id="p"))
        rt.close()
        cli = lambda *a: self.run_module("qmem.local", "queue", *a)  # noqa: E731
        default = json.loads(cli("--json").stdout)
        self.assertEqual((default["limit"], default["more"], len(default["records"])), (200, True, 200))
        self.assertIn("more records in the outbox: only the first 200 are shown (raise --limit, or --all)",
                      cli().stdout)
        capped = json.loads(cli("--limit", "5", "--json").stdout)
        self.assertEqual((capped["limit"], capped["more"], len(capped["records"])), (5, True, 5))
        everything = json.loads(cli("--all", "--json").stdout)
        self.assertEqual((everything["limit"], everything["more"], len(everything["records"])), (None, False, 201))
        self.assertNotIn("more records", cli("--all").stdout)
        self.assertEqual(everything["counts"]["pending"], 201)
        for bad in (["--limit", "0"], ["--limit", "5", "--all"]):
            self.assertEqual(cli(*bad).code, 2, bad)
