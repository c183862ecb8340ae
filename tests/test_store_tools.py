"""The qmem_* tool logic against the fake Memory Gateway (real sockets, real SQLite)."""

from qmem.errors import InputError
from qmem.records import is_local_id
from qmem.store import ToolError, qmem_correct, qmem_get, qmem_meta, qmem_search, qmem_store, score_label
from qmem.sync import flush

from .fakes import Fault, refused_url
from .support import GatewayTestCase

ARGS = {"text": "Releases go out on Tuesdays after the canary passes", "project_id": "alpha", "kind": "decision"}
FAKE_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # built here so no scanner flags the file


class StoreTests(GatewayTestCase):
    def test_store_shares_and_writes_through(self):
        rt = self.runtime()
        result = qmem_store(rt, ARGS)
        record = result.details["record"]
        self.assertEqual((result.details["qmem"], result.details["shared"]), (1, True))
        self.assertIn("shared", result.text)
        self.assertEqual(self.gateway.get(record["id"])["text"], ARGS["text"])
        local = rt.index.get(record["id"])
        self.assertEqual((local.state, local.coverage, local.kind), ("synced", "full", "decision"))
        key = self.gateway.requests_to("/v1/memories", "POST")[0].header("idempotency-key")
        self.assertTrue(is_local_id(key))
        self.assertEqual(self.gateway.requests[0].header("authorization"), f"Bearer {self.API_KEY}")

    def test_validation_and_secret_guard_happen_before_any_io(self):
        rt = self.runtime()
        for bad, fragment in [
            ({**ARGS, "project_id": None}, "project_id is required"),
            ({**ARGS, "kind": "opinion"}, "kind must be one of"),
            ({**ARGS, "text": "  "}, "text"),
            ({**ARGS, "text": "x" * 20_001}, "too long"),
            ({**ARGS, "expires_at": "2001-01-01T00:00:00Z"}, "future"),
            ({**ARGS, "expires_at": "next week"}, "RFC 3339"),
            ({**ARGS, "supersedes_id": "bad id with spaces"}, "supersedes_id"),
        ]:
            with self.subTest(fragment=fragment), self.assertRaises(InputError) as caught:
                qmem_store(rt, bad)
            self.assertIn(fragment, str(caught.exception))
        with self.assertRaises(ToolError) as caught:
            qmem_store(rt, {**ARGS, "text": f"the deploy token is {FAKE_TOKEN}"})
        self.assertIn("github-token", str(caught.exception))
        self.assertNotIn(FAKE_TOKEN, str(caught.exception))
        self.assertEqual(self.gateway.requests, [])
        self.assertEqual(rt.index.status().records, 0)

    def test_unreachable_gateway_queues_and_says_so(self):
        self.configure(refused_url())
        rt = self.runtime()
        result = qmem_store(rt, ARGS)
        self.assertTrue(result.details["queued"])
        self.assertFalse(result.details["shared"])
        self.assertIn("NOT yet shared", result.text)
        self.assertEqual(result.details["gateway"]["error"], "gateway_unreachable")
        self.assertEqual([r.id for r in rt.index.find("canary").records], [result.details["record"]["id"]])
        # The breaker is open now: the next store is queued without touching the network.
        second = qmem_store(rt, {**ARGS, "text": "Another note"})
        self.assertEqual(second.details["gateway"]["reason"], "breaker_open")  # refused before any request
        self.assertTrue(second.details["gateway"]["breaker_open"])
        self.assertGreater(second.details["gateway"]["retry_in_ms"], 0)

    def test_cut_off_answer_is_retried_with_the_same_key(self):
        rt = self.runtime()
        self.gateway.inject(Fault.disconnect_mid_body(when="after", path="/v1/memories"))
        result = qmem_store(rt, ARGS)  # stored, answer cut off, retried: the gateway replays it
        self.assertTrue(result.details["shared"])
        keys = {r.header("idempotency-key") for r in self.gateway.requests_to("/v1/memories", "POST")}
        self.assertEqual(len(keys), 1)
        self.assertEqual((self.gateway.count_by_text()[ARGS["text"]], self.gateway.replays), (1, 1))

    def test_ambiguous_failure_after_send_queues_under_the_same_key(self):
        rt = self.runtime()
        self.gateway.inject(Fault.disconnect_mid_body(when="after", path="/v1/memories", times=3))
        result = qmem_store(rt, ARGS)  # stored on the first try; every answer lost: one failed call
        self.assertTrue(result.details["queued"])
        self.assertIn("NOT yet shared", result.text)
        sent_key = self.gateway.requests_to("/v1/memories", "POST")[0].header("idempotency-key")
        self.assertEqual(result.details["record"]["id"], sent_key)
        self.assertEqual(self.gateway.count_by_text()[ARGS["text"]], 1)
        rt.breaker_for(self.gateway.url).reset()
        report = flush(rt)
        self.assertEqual(report.synced, 1)
        self.assertEqual(self.gateway.count_by_text()[ARGS["text"]], 1)  # replayed, not doubled
        self.assertEqual(rt.index.get(sent_key).state, "synced")
        self.assertEqual(rt.index.status().records, 1)

    def test_offline_queue_off_is_a_clear_failure(self):
        self.configure(refused_url(), offlineQueue=False)
        rt = self.runtime()
        with self.assertRaises(ToolError) as caught:
            qmem_store(rt, ARGS)
        self.assertIn("offlineQueue is off", str(caught.exception))
        self.assertEqual(rt.index.status().records, 0)

    def test_no_gateway_configured_queues_locally(self):
        self.configure(None)
        rt = self.runtime()
        result = qmem_store(rt, ARGS)
        self.assertTrue(result.details["queued"])
        self.assertIn("no Memory Gateway is configured", result.text)
        found = qmem_search(rt, {"query": "canary"})
        self.assertTrue(found.text.startswith("No Memory Gateway is configured"))  # not "memory gateway"

    def test_duplicate_validation_and_auth_answers(self):
        rt = self.runtime()
        first = qmem_store(rt, ARGS).details["record"]["id"]
        dup = qmem_store(rt, {**ARGS, "text": ARGS["text"].upper()})
        self.assertEqual((dup.details["duplicate_of"], dup.details["shared"]), (first, False))
        self.gateway.reject_texts.add("refuse me")
        with self.assertRaises(ToolError) as caught:
            qmem_store(rt, {**ARGS, "text": "refuse me"})
        self.assertIn("422", str(caught.exception))
        # A refused key is the user's to fix, not the record's: it is kept, as a flush would keep it.
        self.env["QMEM_GATEWAY_API_KEY"] = "wrong"
        refused = qmem_store(self.runtime(), {**ARGS, "text": "other"})
        self.assertTrue(refused.details["queued"])
        self.assertIn("QMEM_GATEWAY_API_KEY", refused.text)
        self.assertNotIn("wrong", refused.text)

    def test_retry_after_is_honoured_then_breaker_trips(self):
        rt = self.runtime()
        self.gateway.inject(Fault.status(503, retry_after="0", path="/v1/memories"))
        self.assertTrue(qmem_store(rt, ARGS).details["shared"])  # one retry, then 201
        self.assertEqual(len(self.gateway.requests_to("/v1/memories", "POST")), 2)
        self.gateway.inject(Fault.status(503, retry_after="0", times=None))
        for strike in range(3):  # breakerTripAfter counts failed calls, each with its own retries
            result = qmem_store(rt, {**ARGS, "text": f"strike {strike}"})
            self.assertTrue(result.details["queued"])
            self.assertEqual(result.details["gateway"]["breaker_open"], strike == 2)
        self.assertEqual(len(self.gateway.requests_to("/v1/memories", "POST")), 2 + 3 * 3)

    def test_correct_supersedes_and_remaps_a_queued_target(self):
        rt = self.runtime()
        original = qmem_store(rt, ARGS).details["record"]["id"]
        corrected = qmem_correct(rt, {**ARGS, "text": "Releases go out on Thursdays", "supersedes_id": original,
                                      "supersede_reason": "moved"})
        new_id = corrected.details["record"]["id"]
        self.assertEqual(self.gateway.get(original)["superseded_by"], new_id)
        self.assertEqual(rt.index.get(original).superseded_by, new_id)
        with self.assertRaises(InputError):
            qmem_correct(rt, ARGS)  # supersedes_id is required
        # A correction of a record that is itself still queued waits for it, then is remapped.
        self.configure(refused_url())
        offline = self.runtime()
        target = qmem_store(offline, {**ARGS, "text": "Queued original"}).details["record"]["id"]
        fix = qmem_correct(offline, {**ARGS, "text": "Queued fix", "supersedes_id": target})
        self.assertIn("NOT yet shared", fix.text)
        self.configure()  # back online: the real gateway's breaker was never opened
        report = flush(self.runtime())
        self.assertEqual(report.synced, 2)
        target_gid = self.runtime().index.get(target).id
        fix_record = self.runtime().index.get(fix.details["record"]["id"])
        self.assertEqual(self.gateway.get(fix_record.id)["supersedes_id"], target_gid)


class ReadTests(GatewayTestCase):
    def setUp(self):
        super().setUp()
        self.first = self.gateway.add_record("Canary releases gate every deploy", "decision", "alpha")
        self.second = self.gateway.add_record("The gateway listens on port 8443", "fact", "beta")

    def test_search_from_gateway_is_written_through(self):
        rt = self.runtime()
        result = qmem_search(rt, {"query": "canary releases deploy", "top_k": 5})
        self.assertEqual(result.details["results"][0]["id"], self.first["id"])
        self.assertNotIn("fallback", result.details)
        local = rt.index.get(self.first["id"])
        self.assertEqual((local.state, local.coverage), ("synced", "partial"))
        sent = self.gateway.requests_to("/v1/memories:search")[0].json
        self.assertEqual(sent, {"query": "canary releases deploy", "top_k": 5, "include_superseded": False})

    def test_search_falls_back_to_the_local_index_labelled(self):
        rt = self.runtime()
        qmem_search(rt, {"query": "canary"})  # learn it while the gateway is up
        for fault in (Fault.status(503, retry_after="0", times=3), Fault.status(429, retry_after="0", times=3)):
            with self.subTest(status=fault.status_code):
                self.runtime().breaker_for(self.gateway.url).reset()
                self.gateway.inject(fault)
                result = qmem_search(self.runtime(), {"query": "canary"})
                self.assertEqual(result.details["fallback"], "local_sqlite")
                self.assertIsNone(result.details["results"][0]["score"])
                self.assertIn("no semantic scores", result.text)
        self.configure(refused_url())
        result = qmem_search(self.runtime(), {"query": "canary", "project_id": "alpha"})
        self.assertEqual([r["id"] for r in result.details["results"]], [self.first["id"]])

    def test_search_without_fallback_and_bad_arguments(self):
        self.configure(refused_url(), localFallback=False)
        with self.assertRaises(ToolError):
            qmem_search(self.runtime(), {"query": "canary"})
        for bad in ({}, {"query": ""}, {"query": "x", "top_k": 0}, {"query": "x", "top_k": "5"},
                    {"query": "x", "kind": "nope"}, {"query": "x", "min_score": 2}):
            with self.subTest(args=bad), self.assertRaises(InputError):
                qmem_search(self.runtime(), bad)

    def test_top_k_is_clamped(self):
        qmem_search(self.runtime(), {"query": "canary", "top_k": 10**9})
        self.assertEqual(self.gateway.requests_to("/v1/memories:search")[0].json["top_k"], 50)

    def test_get_gateway_then_local(self):
        rt = self.runtime()
        result = qmem_get(rt, {"id": self.second["id"]})
        self.assertEqual(result.details["record"]["text"], self.second["text"])
        self.assertEqual(rt.index.get(self.second["id"]).coverage, "full")
        with self.assertRaises(ToolError):
            qmem_get(rt, {"id": "no-such-record"})
        self.configure(refused_url())
        offline = qmem_get(self.runtime(), {"id": self.second["id"]})
        self.assertEqual(offline.details["fallback"], "local_sqlite")
        with self.assertRaises(InputError):
            qmem_get(self.runtime(), {"id": "../../etc/passwd"})

    def test_meta_gateway_then_local(self):
        rt = self.runtime()
        meta = qmem_meta(rt, {}).details["meta"]
        self.assertIn("alpha", meta["projects"])
        qmem_search(rt, {"query": "canary gateway"})
        self.configure(refused_url())
        local = qmem_meta(self.runtime(), {})
        self.assertEqual(local.details["fallback"], "local_sqlite")
        self.assertIn("alpha", local.details["meta"]["projects"])
        self.assertEqual(local.details["last_gateway_meta"]["meta"], meta)


class ScoreLabelTests(GatewayTestCase):
    def test_thresholds(self):
        self.assertEqual([score_label(s) for s in (0.61, 0.60, 0.5, 0.45, 0.44, None)],
                         ["strong", "strong", "weak", "weak", "noise", "lexical"])
