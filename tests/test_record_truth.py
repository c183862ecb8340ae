"""Issue 10: the record model is exact, online and offline.

Each class is one item of the issue: a queued correction supersedes at once, ``qmem_get`` says
everything about a record, filters mean the same offline, a write sent once is keyed once, the
breaker counts calls, flush and pull report the truth, and a rewritten session file is read again.
"""

import json
import os
import subprocess
import sys

from qmem.breaker import Breaker, BreakerPolicy
from qmem.clients.gateway import GatewayClient, GatewayUnavailable
from qmem.records import NewRecord
from qmem.store import qmem_correct, qmem_get, qmem_meta, qmem_search, qmem_store
from qmem.sync import flush, pull

from .fakes import FakeGateway, Fault, refused_url
from .fakes.proxy import CommitThenRefuseProxy
from .sessionfiles import SessionFile
from .support import REPO, GatewayTestCase

OLD = {"text": "The database is Postgres 16", "project_id": "shop", "kind": "fact", "scope": "team"}
NEW = {"text": "The database is Postgres 17", "project_id": "shop", "kind": "fact", "scope": "team"}


def ids(result):
    return [item["id"] for item in result.details["results"]]


class QueuedCorrectionTests(GatewayTestCase):
    """Item 1: a correction queued while the gateway is away hides its target at once."""

    def setUp(self):
        super().setUp()
        self.old = qmem_store(self.runtime(), OLD).details["record"]["id"]  # shared while online
        self.configure(refused_url())  # then the gateway goes away

    def correct(self, rt, **extra):
        return qmem_correct(rt, {**NEW, "supersedes_id": self.old, "supersede_reason": "upgraded in May", **extra})

    def test_default_search_meta_and_status_hide_the_target_at_once(self):
        rt = self.runtime()
        fix = self.correct(rt)
        local_id = fix.details["record"]["id"]
        self.assertIn("NOT yet shared", fix.text)
        self.assertIn(f"{self.old} is hidden from search as superseded", fix.text)
        self.assertEqual([r.id for r in rt.index.find("database Postgres").records], [local_id])
        self.assertEqual(ids(qmem_search(rt, {"query": "database Postgres"})), [local_id])
        self.assertEqual(rt.index.status().hidden["superseded"], 1)
        self.assertEqual(qmem_meta(rt, {}).details["meta"]["superseded"], 1)
        both = {r.id: r for r in rt.index.find("database Postgres", superseded=True).records}
        self.assertEqual(set(both), {self.old, local_id})
        self.assertEqual(both[self.old].superseded_by, local_id)
        self.assertEqual(both[local_id].supersedes_id, self.old)
        self.assertEqual(ids(qmem_search(rt, {"query": "database Postgres", "include_superseded": True})),
                         [r.id for r in rt.index.find("database Postgres", superseded=True).records])

    def test_online_search_hides_it_too_until_the_correction_is_sent(self):
        local_id = self.correct(self.runtime()).details["record"]["id"]
        self.configure()  # the gateway is back, but the correction is still queued here
        online = qmem_search(self.runtime(), {"query": "database Postgres"})
        self.assertNotIn("fallback", online.details)
        self.assertNotIn(self.old, ids(online))
        self.assertEqual(online.details["hidden_by_queued_corrections"], {self.old: local_id})
        self.assertIn(f"{self.old} by {local_id}", online.text)
        lineage = qmem_search(self.runtime(), {"query": "database Postgres", "include_superseded": True})
        marked = {item["id"]: item for item in lineage.details["results"]}
        self.assertEqual(marked[self.old]["superseded_by"], local_id)

    def test_the_mark_follows_the_correction_to_its_gateway_id(self):
        rt = self.runtime()
        local_id = self.correct(rt).details["record"]["id"]
        self.configure()
        self.assertEqual(flush(self.runtime()).synced, 1)
        gateway_id = self.runtime().index.get(local_id).id
        self.assertNotEqual(gateway_id, local_id)
        self.assertEqual(self.runtime().index.get(self.old).superseded_by, gateway_id)
        self.assertEqual(self.gateway.get(self.old)["superseded_by"], gateway_id)

    def test_a_refused_correction_makes_its_target_current_again(self):
        rt = self.runtime()
        self.correct(rt, text="refused correction")
        self.gateway.reject_texts.add("refused correction")
        self.configure()
        self.assertEqual(flush(self.runtime()).failed, 1)
        self.assertIsNone(self.runtime().index.get(self.old).superseded_by)
        self.assertEqual([r.id for r in self.runtime().index.find("database Postgres").records], [self.old])

    def test_cli_store_supersedes_and_an_unknown_target_gets_a_note(self):
        result = self.run_module("qmem.local", "store", "--project", "shop", "--text", NEW["text"],
                                 "--supersedes", self.old, "--reason", "upgraded", "--json")
        self.assertEqual(result.code, 0, result.stderr)
        found = json.loads(self.run_module("qmem.local", "find", "Postgres", "--json").stdout)
        self.assertEqual([r["text"] for r in found["results"]], [NEW["text"]])
        unknown = qmem_correct(self.runtime(), {**NEW, "text": "Postgres 18 now", "supersedes_id": "not-here-1"})
        self.assertTrue(unknown.details["queued"])
        self.assertFalse(unknown.details["target_known_locally"])
        self.assertIn("not in the local index; the gateway will decide", unknown.text)

    def test_mcp_answers_only_the_correction(self):
        self.correct(self.runtime())
        lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}},
                 {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                  "params": {"name": "qmem_search", "arguments": {"query": "database Postgres"}}}]
        proc = subprocess.run([sys.executable, "-m", "qmem.mcp"], input="".join(json.dumps(m) + "\n" for m in lines),
                              capture_output=True, text=True, env=self.env, cwd=self.home, timeout=60)
        answer = [json.loads(line) for line in proc.stdout.splitlines()][-1]["result"]
        texts = [r["text"] for r in answer["structuredContent"]["results"]]
        self.assertEqual(texts, [NEW["text"]])
        self.assertNotIn("Postgres 16", answer["content"][0]["text"])


class GetSaysEverythingTests(GatewayTestCase):
    """Item 2: qmem_get's text carries id, kind, project, date and current / superseded by X (reason)."""

    def test_gateway_and_local_answers_say_the_same(self):
        rt = self.runtime()
        old = qmem_store(rt, OLD).details["record"]["id"]
        new = qmem_correct(rt, {**NEW, "supersedes_id": old, "supersede_reason": "upgraded in May"})
        new_id = new.details["record"]["id"]
        online = qmem_get(rt, {"id": old})
        self.configure(refused_url())
        offline = qmem_get(self.runtime(), {"id": old})
        for result in (online, offline):
            first = result.text.splitlines()[1]
            for fragment in (old, "fact", "project shop", online.details["record"]["created_at"][:10],
                             f"superseded by {new_id} (upgraded in May)"):
                self.assertIn(fragment, first)
            self.assertIn(OLD["text"], result.text)
            self.assertEqual(result.details["currency"],
                             {"current": False, "superseded_by": new_id, "reason": "upgraded in May",
                              "queued_correction": False})
        self.assertIn("LOCAL index", offline.text)
        current = qmem_get(self.runtime(), {"id": new_id})
        self.assertIn("· current", current.text.splitlines()[1])
        self.assertIn(f"supersedes {old}", current.text.splitlines()[1])
        self.assertTrue(current.details["currency"]["current"])

    def test_a_correction_queued_here_outranks_the_gateways_current(self):
        old = qmem_store(self.runtime(), OLD).details["record"]["id"]
        self.configure(refused_url())
        fix = qmem_correct(self.runtime(), {**NEW, "supersedes_id": old, "supersede_reason": "upgraded"})
        self.configure()  # the gateway is back but has not seen the correction yet
        answer = qmem_get(self.runtime(), {"id": old})
        self.assertIsNone(answer.details["record"]["superseded_by"])  # the gateway's own word, unchanged
        self.assertFalse(answer.details["currency"]["current"])
        self.assertEqual(answer.details["currency"]["superseded_by"], fix.details["record"]["id"])
        self.assertIn("a correction queued on this machine", answer.text)

    def test_mcp_text_and_structured_content_agree(self):
        rt = self.runtime()
        old = qmem_store(rt, OLD).details["record"]["id"]
        qmem_correct(rt, {**NEW, "supersedes_id": old, "supersede_reason": "upgraded"})
        lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}},
                 {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                  "params": {"name": "qmem_get", "arguments": {"id": old}}}]
        proc = subprocess.run([sys.executable, "-m", "qmem.mcp"], input="".join(json.dumps(m) + "\n" for m in lines),
                              capture_output=True, text=True, env=self.env, cwd=self.home, timeout=60)
        answer = [json.loads(line) for line in proc.stdout.splitlines()][-1]["result"]
        currency = answer["structuredContent"]["currency"]
        self.assertFalse(currency["current"])
        self.assertIn(f"superseded by {currency['superseded_by']} ({currency['reason']})", answer["content"][0]["text"])


class OfflineFilterTests(GatewayTestCase):
    """Item 3: every filter of qmem_search means offline what it means at the gateway."""

    def setUp(self):
        super().setUp()
        rt = self.runtime()
        for text, kind, project, scope in (("release train leaves on monday", "decision", "shop", "team"),
                                           ("release train is paused in december", "fact", "shop", None),
                                           ("release train for the blog", "fact", "blog", "team")):
            qmem_store(rt, {"text": text, "kind": kind, "project_id": project, **({"scope": scope} if scope else {})})
        self.online = {name: qmem_search(rt, args).details["results"] for name, args in self.CASES.items()}
        self.configure(refused_url())

    CASES = {
        "scope team": {"query": "release train", "scope": "team"},
        "scope other": {"query": "release train", "scope": "personal"},
        "kind decision": {"query": "release train", "kind": "decision"},
        "kind fact": {"query": "release train", "kind": "fact"},
        "project shop": {"query": "release train", "project_id": "shop"},
        "project none": {"query": "release train", "project_id": "nobody"},
        "everything": {"query": "release train"},
    }

    def test_each_filter_both_ways(self):
        for name, args in self.CASES.items():
            with self.subTest(name):
                offline = qmem_search(self.runtime(), args)
                self.assertEqual(offline.details["fallback"], "local_sqlite")
                self.assertEqual(sorted(r["text"] for r in offline.details["results"]),
                                 sorted(r["text"] for r in self.online[name]))

    def test_unknown_scope_does_not_answer_a_scope_filter(self):
        texts = [r["text"] for r in qmem_search(self.runtime(), {"query": "paused", "scope": "team"}).details["results"]]
        self.assertEqual(texts, [])
        texts = [r["text"] for r in qmem_search(self.runtime(), {"query": "paused"}).details["results"]]
        self.assertEqual(texts, ["release train is paused in december"])

    def test_include_superseded_both_ways(self):
        rt = self.runtime()
        target = rt.index.find("monday").records[0].id
        qmem_correct(rt, {"text": "release train leaves on tuesday", "project_id": "shop", "supersedes_id": target})
        default = [r["id"] for r in qmem_search(rt, {"query": "release train leaves"}).details["results"]]
        lineage = [r["id"] for r in qmem_search(rt, {"query": "release train leaves", "include_superseded": True})
                   .details["results"]]
        self.assertNotIn(target, default)
        self.assertIn(target, lineage)

    def test_min_score_has_no_meaning_offline_and_says_so(self):
        plain = qmem_search(self.runtime(), {"query": "release train"})
        scored = qmem_search(self.runtime(), {"query": "release train", "min_score": 0.99})
        self.assertEqual(ids(plain), ids(scored))
        self.assertNotIn("min_score", plain.text)
        self.assertIn("min_score was not applied", scored.text)
        self.assertFalse(scored.details["min_score_applied"])


class ClientTestCase(GatewayTestCase):
    """A GatewayClient built directly, with a recorded ``sleep`` instead of real waits."""

    def client(self, url=None, sleeps=None):
        url = url or self.gateway.url
        policy = BreakerPolicy(base_ms=60_000, max_ms=600_000, trip_after=3)
        breaker = Breaker(self.home / "breaker.json", url, policy)
        client = GatewayClient(url, self.API_KEY, breaker=breaker, connect_timeout=2, timeout=2,
                               sleep=(sleeps.append if sleeps is not None else lambda _: None))
        self.addCleanup(client.close)
        return client


class KeyedOnceTests(ClientTestCase):
    """Item 4: a store that may have reached the gateway is queued under the key that was sent."""

    def test_committed_then_cut_then_refused(self):
        proxy = CommitThenRefuseProxy(self.gateway.port).start()
        self.addCleanup(proxy.stop)
        self.configure(proxy.url)
        result = qmem_store(self.runtime(), OLD)
        self.assertTrue(proxy.wait_done())
        self.assertTrue(result.details["queued"])
        sent_key = self.gateway.requests_to("/v1/memories", "POST")[0].header("idempotency-key")
        self.assertEqual(result.details["record"]["id"], sent_key)  # the gateway holds it under this key
        self.assertEqual(self.gateway.count_by_text()[OLD["text"]], 1)
        self.configure()  # the gateway itself, reachable again
        self.assertEqual(flush(self.runtime()).synced, 1)
        keys = [r.header("idempotency-key") for r in self.gateway.requests_to("/v1/memories", "POST")]
        self.assertEqual(keys, [sent_key, sent_key])
        self.assertEqual((self.gateway.count_by_text()[OLD["text"]], self.gateway.replays), (1, 1))

    def test_sent_is_sticky_across_retries(self):
        proxy = CommitThenRefuseProxy(self.gateway.port).start()
        self.addCleanup(proxy.stop)
        client = self.client(proxy.url)
        with self.assertRaises(GatewayUnavailable) as caught:
            client.create(NewRecord(**OLD).to_request(), idempotency_key="local-" + "a" * 32)
        self.assertEqual(caught.exception.kind, "connect")  # the last attempt's cause …
        self.assertTrue(caught.exception.sent)  # … but the first one got through


class BreakerCountsCallsTests(ClientTestCase):
    """Item 5: breakerTripAfter counts failed calls; a long Retry-After holds the breaker open."""

    def test_one_call_with_its_retries_is_one_failure(self):
        self.gateway.inject(Fault.status(503, retry_after="0", times=None))
        rt = self.runtime()
        first = qmem_store(rt, OLD)
        self.assertEqual(len(self.gateway.requests_to("/v1/memories", "POST")), 3)  # a call and two retries
        self.assertFalse(first.details["gateway"]["breaker_open"])
        self.assertEqual(rt.breaker_for(self.gateway.url).snapshot()["state"], "closed")
        qmem_store(rt, {**OLD, "text": "second call"})
        third = qmem_store(rt, {**OLD, "text": "third call"})
        self.assertTrue(third.details["gateway"]["breaker_open"])  # the third failed call trips it
        before = len(self.gateway.requests)
        self.assertTrue(qmem_store(rt, {**OLD, "text": "fourth"}).details["gateway"]["breaker_open"])
        self.assertEqual(len(self.gateway.requests), before)

    def test_retry_after_beyond_the_cap_is_not_slept_and_holds_the_breaker(self):
        sleeps = []
        client = self.client(sleeps=sleeps)
        self.gateway.inject(Fault.status(503, retry_after="90"))
        with self.assertRaises(GatewayUnavailable) as caught:
            client.create(NewRecord(**OLD).to_request(), idempotency_key="local-" + "b" * 32)
        self.assertEqual(sleeps, [])
        self.assertTrue(caught.exception.breaker_open)
        self.assertGreater(caught.exception.retry_in_ms, 85_000)  # the gateway's 90 s, not the base 60 s
        self.assertEqual(len(self.gateway.requests), 1)
        with self.assertRaises(GatewayUnavailable) as later:
            client.status()
        self.assertEqual(later.exception.kind, "breaker_open")
        self.assertEqual(len(self.gateway.requests), 1)
        self.assertGreater(client.breaker.snapshot()["retry_in_ms"], 85_000)

    def test_a_short_retry_after_is_slept_and_retried(self):
        sleeps = []
        self.gateway.inject(Fault.status(429, retry_after="2"))
        self.client(sleeps=sleeps).create(NewRecord(**OLD).to_request(), idempotency_key="local-" + "c" * 32)
        self.assertEqual(sleeps, [2.0])


class ReportsTellTheTruthTests(GatewayTestCase):
    """Item 6: flush's sent counts real sends; flush and pull say when work is left."""

    def test_breaker_refusal_is_not_a_send(self):
        rt = self.runtime()
        for i in range(3):
            rt.outbox.enqueue(NewRecord(text=f"waiting record {i}", project_id="p"))
        rt.breaker_for(self.gateway.url).definitive_failure()
        report = flush(rt)
        self.assertEqual((report.sent, report.remaining, report.complete), (0, 3, False))
        self.assertIn("unreachable", report.stopped)
        self.assertEqual(self.gateway.requests, [])
        self.assertTrue(all(r.attempts == 0 for r in rt.outbox.report().records))  # released untouched
        rt.breaker_for(self.gateway.url).reset()
        done = flush(rt)
        self.assertEqual((done.sent, done.synced, done.remaining, done.complete), (3, 3, 0, True))
        self.assertTrue(done.to_json()["complete"])

    def test_budget_stops_before_the_backlog(self):
        rt = self.runtime()
        for i in range(12):
            rt.outbox.enqueue(NewRecord(text=f"backlog record {i}", project_id="p"))
        report = flush(rt, budget_s=0)
        self.assertEqual((report.sent, report.remaining, report.complete), (0, 12, False))
        self.assertEqual(self.gateway.requests, [])
        self.assertEqual(flush(rt).synced, 12)  # nothing was left claimed

    def test_pull_with_null_last_cursor_stays_incremental(self):
        gateway = FakeGateway(api_key=self.API_KEY, null_cursor_when_exhausted=True).start()
        self.addCleanup(gateway.stop)
        self.configure(gateway.url)
        for i in range(30):
            gateway.add_record(f"exported record {i}", "fact", "p")
        first = pull(self.runtime(), page_size=200)
        self.assertEqual((first.added, first.complete), (30, True))
        again = pull(self.runtime(), page_size=200)
        self.assertLessEqual(again.items, 1)  # not all 30 again
        new = gateway.add_record("exported later", "fact", "p")
        later = pull(self.runtime(), page_size=200)
        self.assertEqual(later.added, 1)
        self.assertLessEqual(later.items, 2)
        self.assertIsNotNone(self.runtime().index.get(new["id"]))

    def test_tombstones_with_text_count_as_tombstones(self):
        gateway = FakeGateway(api_key=self.API_KEY, full_tombstones=True).start()
        self.addCleanup(gateway.stop)
        self.configure(gateway.url)
        record = gateway.add_record("soon deleted", "fact", "p")
        gateway.soft_delete(record["id"])
        report = pull(self.runtime())
        self.assertEqual(report.tombstones, 1)
        self.assertIsNotNone(self.runtime().index.get(record["id"]).deleted_at)

    def test_pull_stopped_is_not_complete(self):
        self.runtime().breaker_for(self.gateway.url).definitive_failure()
        report = pull(self.runtime())
        self.assertFalse(report.complete)
        self.assertFalse(report.to_json()["complete"])


class RewrittenSessionTests(GatewayTestCase):
    """Item 8: a session file truncated and grown past the old offset is read again."""

    def test_rewrite_in_place_past_the_old_offset_is_not_skipped(self):
        self.configure(None)
        path = self.home / ".pi" / "agent" / "sessions" / "--work--" / "s.jsonl"
        session = SessionFile(path)
        header = path.read_bytes()
        for i in range(40):
            session.call("qmem_get", {"id": f"old-{i}"}, details={"qmem": 1, "record": {
                "id": f"old-{i}", "text": f"old record {i}", "project_id": "p"}})
        first = self.run_module("qmem.local", "import", "--json")
        self.assertEqual(json.loads(first.stdout)["records_added"], 40, first.stderr)
        size = path.stat().st_size
        inode = path.stat().st_ino
        with open(path, "r+b") as handle:  # truncate in place, keep the header, write more than before
            handle.truncate(len(header))
        for i in range(60):
            session.call("qmem_get", {"id": f"new-{i}"}, details={"qmem": 1, "record": {
                "id": f"new-{i}", "text": f"new record number {i} with a longer text", "project_id": "p"}})
        self.assertEqual(path.stat().st_ino, inode)
        self.assertGreater(path.stat().st_size, size)
        second = json.loads(self.run_module("qmem.local", "import", "--json").stdout)
        self.assertEqual(second["records_added"], 60)
        self.assertEqual(second["reread"], 1)

    def test_appended_file_still_resumes_at_its_offset(self):
        self.configure(None)
        path = self.home / ".pi" / "agent" / "sessions" / "--work--" / "s.jsonl"
        session = SessionFile(path)
        session.call("qmem_get", {"id": "a-1"}, details={"qmem": 1, "record": {"id": "a-1", "text": "one"}})
        self.run_module("qmem.local", "import")
        session.call("qmem_get", {"id": "a-2"}, details={"qmem": 1, "record": {"id": "a-2", "text": "two"}})
        report = json.loads(self.run_module("qmem.local", "import", "--json").stdout)
        self.assertEqual((report["records_added"], report["reread"]), (1, 0))
        self.assertLess(report["bytes"], os.path.getsize(path))
