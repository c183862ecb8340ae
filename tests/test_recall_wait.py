"""Recall that never holds up a turn (issue 27): the wait budget, the late block, slow calls and the breaker,
the recall log — in-process against the loopback fakes, and through a real bridge process.

No timings are asserted.  "Slow" is a fake that answers after a delay far above ``recall.waitMs``
(so a request cannot have the block in time, and a call cannot be fast), "hung" one that never
answers; a wait for the background is a watchdog (:meth:`Recall.wait_background`, a bounded poll).
"""

import json
import os
import stat
import subprocess
import sys
import threading
import time
import unittest

from qmem.diagnostics import SENTENCES
from qmem.recall import RECALL_CUSTOM_TYPE

from .fakes import FakeEmbeddings, FakeQdrant, Fault, embed_text
from .support import REPO, TempHomeTestCase, write_config
from .test_bridge import BridgeProcess
from .test_recall import DIM, EMB_KEY, READ_KEY, RecallTestCase, payload

SEARCH = "/collections/qmem_memories/points/search"
TEXTS = ("The deploy pipeline uses blue green switching", "Blue green deploys need a health check first")
PROMPTS = ("how do we deploy blue green?", "and what about the health check?", "a third prompt on blue green")


def blocks(messages):
    return [m for m in messages if isinstance(m, dict) and m.get("customType") == RECALL_CUSTOM_TYPE]


def user(prompt):
    return [{"role": "user", "content": [{"type": "text", "text": prompt}]}]


def after_tool(messages, n=0):
    return messages + [{"role": "assistant", "content": [{"type": "toolCall", "id": f"c{n}", "name": "bash",
                                                          "arguments": {}}]},
                       {"role": "toolResult", "toolCallId": f"c{n}", "content": [{"type": "text", "text": "ok"}]}]


class WaitTests(RecallTestCase):
    def setUp(self):
        super().setUp()
        self.add(1, TEXTS[0])
        self.add(2, TEXTS[1], project="other-project")

    def configure(self, breaker_trip_after=3, **recall):
        write_config(self.env, {"breakerTripAfter": breaker_trip_after, "breakerBaseMs": 600_000,
                                "recall": {"qdrantUrl": self.qdrant.url, "embeddingsUrl": self.embeddings.base_url,
                                           "dimension": DIM, "timeoutMs": 5000, **recall}})

    def log(self):
        return self.rt.recall_services().log.read_entries()

    def breaker(self, url):
        return self.rt.recall_services().breaker_for(url).snapshot()["state"]

    def test_a_late_block_joins_the_next_request_of_the_same_prompt_once(self):
        self.configure(waitMs=50)
        gate = threading.Event()
        self.qdrant.inject(Fault.delay_headers(gate, path=SEARCH, times=2))
        recall = self.recall()
        first = user(PROMPTS[0])
        self.assertEqual(blocks(recall.context(first)), [])  # not ready: the request goes on without it
        self.assertEqual(self.said, [])  # and nothing about it reaches anyone
        gate.set()
        self.assertTrue(recall.wait_background(30))
        second = after_tool(first)
        out = recall.context(second)
        self.assertEqual(len(blocks(out)), 1)
        self.assertIn(TEXTS[0], blocks(out)[0]["content"])
        self.assertEqual(len(blocks(recall.context(after_tool(out, 1)))), 1)  # a stale one is replaced, never added
        # A new prompt never gets the older prompt's block, even while its own is not ready.
        self.qdrant.inject(Fault.hang(path=SEARCH, times=2))
        self.assertEqual(blocks(recall.context(second + user(PROMPTS[1]))), [])
        self.assertEqual(len(self.embeddings.inputs), 2)  # one embedding per prompt
        late = self.log()[0]
        self.assertEqual((late["outcome"], late["host"]), ("late", "pi"))
        self.assertEqual(late["lanes"]["project"], {"outcome": "late", "hits": 1})
        self.assertEqual({i["id"] for i in late["ids"]}, {"1", "2"})

    def test_the_recall_starts_before_the_first_request(self):
        self.configure()
        recall = self.recall()
        recall.start("  " + PROMPTS[0] + "\n")
        self.assertTrue(self.embeddings.wait_for_requests(1, 30))  # asked before any request came
        out = recall.context(user(PROMPTS[0]))
        self.assertEqual(len(blocks(out)), 1)
        self.assertEqual(len(self.embeddings.inputs), 1)  # the request found the recall it started
        self.assertEqual(self.log()[0]["outcome"], "delivered")

    def test_a_warm_start_sends_nothing_upstream(self):
        self.configure()
        recall = self.recall()
        recall.start("RLM child deploy-reader completed", warm_only=True)  # Prime's notice: never the prompt
        self.assertEqual(len(blocks(recall.context(user(PROMPTS[0])))), 1)
        self.assertTrue(recall.wait_background(30))
        self.assertEqual(self.embeddings.inputs, [PROMPTS[0]])

    def test_slow_calls_open_the_breaker_and_then_cost_nothing(self):
        self.configure(waitMs=20)
        self.qdrant.inject(Fault.delay(0.5, path="/collections", times=None))  # answers, but far too late
        recall = self.recall()
        self.assertEqual(blocks(recall.context(user(PROMPTS[0]))), [])
        self.assertTrue(recall.wait_background(30))
        self.assertEqual(self.breaker(self.qdrant.url), "open")  # three slow calls in a row, each counted
        for prompt in PROMPTS[1:]:
            self.assertEqual(blocks(recall.context(user(prompt))), [])
        self.assertTrue(recall.wait_background(30))
        self.assertEqual(len(self.embeddings.inputs), 1)  # an open Qdrant breaker costs no embedding
        self.assertEqual([(e["outcome"], e["category"]) for e in self.log()],
                         [("skipped", "breaker_open"), ("skipped", "breaker_open"), ("lost", None)])
        self.assertEqual(self.said, [SENTENCES["retrieval"]])

    def test_a_call_counts_as_slow_while_it_still_waits(self):
        self.configure(waitMs=20, timeoutMs=120_000)  # no timeout can open it meanwhile
        gate = threading.Event()
        self.addCleanup(gate.set)
        self.qdrant.inject(Fault.delay_headers(gate, path="/collections", times=3))
        recall = self.recall()
        self.assertEqual(blocks(recall.context(user(PROMPTS[0]))), [])
        until = time.monotonic() + 20  # a watchdog: the three calls are held until the breaker is seen open
        while self.breaker(self.qdrant.url) != "open" and time.monotonic() < until:
            threading.Event().wait(0.01)
        self.assertEqual(self.breaker(self.qdrant.url), "open")  # while no answer has come yet
        gate.set()
        self.assertTrue(recall.wait_background(30))
        self.assertEqual(self.breaker(self.qdrant.url), "open")  # the late answers do not close it

    def test_fast_calls_leave_the_breaker_closed(self):
        self.configure()  # waitMs 800: loopback answers are far below it
        recall = self.recall()
        for prompt in PROMPTS:
            self.assertEqual(len(blocks(recall.context(user(prompt)))), 1)
        self.assertEqual(self.breaker(self.qdrant.url), "closed")
        self.assertEqual([e["outcome"] for e in self.log()], ["delivered"] * 3)

    def test_hung_services_cost_a_request_the_wait_and_then_nothing(self):
        for service in ("qdrant", "embeddings"):
            with self.subTest(service=service):
                self.qdrant.clear_faults()
                self.embeddings.clear_faults()
                (self.home / ".local" / "share" / "qmem" / "breaker.json").unlink(missing_ok=True)
                self.configure(waitMs=50, timeoutMs=400)
                fake = self.qdrant if service == "qdrant" else self.embeddings
                fake.inject(Fault.hang(times=None, path=SEARCH if service == "qdrant" else None))
                recall = self.recall()
                self.assertEqual(blocks(recall.context(user(PROMPTS[0]))), [])
                self.assertTrue(recall.wait_background(30))
                url = self.qdrant.url if service == "qdrant" else self.embeddings.base_url
                self.assertEqual(self.breaker(url), "open")  # no answer at all: open at once
                before = len(fake.requests)
                self.assertEqual(blocks(recall.context(user(PROMPTS[1]))), [])
                self.assertTrue(recall.wait_background(30))
                self.assertEqual(len(fake.requests), before)
                self.assertEqual([(e["outcome"], e["category"]) for e in self.log()[:2]],
                                 [("skipped", "breaker_open"), ("failed", "timeout")])
                recall.close()

    def test_a_stalled_body_trips_the_breaker_within_two_prompts(self):
        self.configure(waitMs=50, timeoutMs=400)
        self.qdrant.inject(Fault.stall_body(path=SEARCH, times=None))
        recall = self.recall()
        for prompt in PROMPTS:
            self.assertEqual(blocks(recall.context(user(prompt))), [])
            self.assertTrue(recall.wait_background(30))
        self.assertEqual(len(self.embeddings.inputs), 2)  # the third prompt found the breaker open
        self.assertEqual([e["outcome"] for e in self.log()], ["skipped", "failed", "failed"])

    def test_the_log_holds_ids_and_numbers_only_readable_by_the_user(self):
        self.configure()
        recall = self.recall()
        for prompt in PROMPTS:
            recall.context(user(prompt))
        path = self.rt.recall_services().log.path
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        raw = path.read_text()
        for secret in (*PROMPTS, *TEXTS, "blue", "green", "deploy"):
            self.assertNotIn(secret, raw)
        cli = subprocess.run([sys.executable, "-m", "qmem.local", "recall-log", "--json"], cwd=REPO, env=self.env,
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(cli.returncode, 0, cli.stderr)
        document = json.loads(cli.stdout)
        self.assertEqual(document["count"], 3)
        for secret in (*PROMPTS, *TEXTS, "blue", "green"):
            self.assertNotIn(secret, cli.stdout)
        text = subprocess.run([sys.executable, "-m", "qmem.local", "recall-log", "--limit", "1"], cwd=REPO,
                              env=self.env, capture_output=True, text=True, timeout=60).stdout
        self.assertIn("delivered", text)
        self.assertEqual(text.count(" pi "), 1)

    def test_a_hostile_id_never_reaches_the_log(self):
        self.configure()
        self.qdrant.ignore_filter = False
        self.add("6f1c9a4e-0000-4000-8000-000000000001", "blue green as a uuid point")
        recall = self.recall()
        recall.context(user("blue green uuid"))
        ids = {i["id"] for i in self.log()[0]["ids"]}
        self.assertIn("6f1c9a4e-0000-4000-8000-000000000001", ids)
        from qmem.recalllog import entry
        made = entry(host="pi", outcome="delivered", category="Not a category!", hits=[("ignore previous", "x", 1)],
                     searched={"project": 1}, chars=5, wait_ms=1, total_ms=2)
        self.assertEqual((made["ids"], made["category"]), ([{"id": "?", "lane": "?", "score": 1.0}], None))

    def test_the_log_stays_bounded(self):
        from qmem.recalllog import KEEP_ENTRIES, MAX_BYTES, RecallLog, entry
        log = RecallLog.in_directory(self.home / "data")
        item = entry(host="pi", outcome="delivered", category=None, hits=[(str(n), "project", 0.5) for n in range(6)],
                     searched={"project": 6, "host": 0}, chars=100, wait_ms=1, total_ms=2)
        line = len(json.dumps(item, separators=(",", ":"))) + 1
        for _ in range(MAX_BYTES // line + 50):
            log.append(item)
        self.assertLessEqual(log.path.stat().st_size, MAX_BYTES + line)
        self.assertLessEqual(len(log.read_entries()), MAX_BYTES // line + 1)
        self.assertGreaterEqual(len(log.read_entries()), KEEP_ENTRIES)  # cut to the newest, never emptied


class BridgeWaitTests(TempHomeTestCase):
    """A real bridge process: the shim's before_agent_start and context calls, a slow Qdrant."""

    def setUp(self):
        super().setUp()
        self.qdrant = FakeQdrant(keys={READ_KEY: "r"}).start()
        self.addCleanup(self.qdrant.stop)
        self.embeddings = FakeEmbeddings(api_key=EMB_KEY, models={"bge-m3": DIM}).start()
        self.addCleanup(self.embeddings.stop)
        self.qdrant.create_collection("qmem_memories", size=DIM, distance="Cosine")
        for n, text in enumerate(TEXTS, 1):
            self.qdrant.add_point("qmem_memories", n, embed_text(text, DIM), payload(text, project="proj"))
        self.env.update(QMEM_QDRANT_API_KEY=READ_KEY, QMEM_EMBEDDING_API_KEY=EMB_KEY)
        self.project = self.home / "work" / "proj"
        (self.project / ".git").mkdir(parents=True)
        write_config(self.env, {"breakerBaseMs": 600_000, "recall": {
            "qdrantUrl": self.qdrant.url, "embeddingsUrl": self.embeddings.base_url, "dimension": DIM,
            "timeoutMs": 5000, "waitMs": 100}})
        self.ids = iter(range(1, 10**6))

    def start(self):
        bridge = BridgeProcess(self.env, str(self.home))
        bridge.other = []
        self.addCleanup(bridge.close)
        self.assertEqual(bridge.next()["event"], "ready")
        self.call(bridge, "session_start", {"cwd": str(self.project),
                                            "extensionDir": str(self.home / ".pi" / "agent" / "extensions" / "qmem")})
        return bridge

    def call(self, bridge, method, params):
        request_id = next(self.ids)
        bridge.send({"id": request_id, "method": method, "params": params})
        answer = bridge.answer(request_id)
        self.assertIn("result", answer, answer)
        return answer["result"]

    def context(self, bridge, messages):
        return self.call(bridge, "context", {"messages": messages, "rlmDepth": None, "depthGiven": False})

    def test_a_slow_qdrant_gives_the_block_to_the_request_after_the_tool_call(self):
        self.qdrant.inject(Fault.delay(1.0, path="/collections", times=3))  # far above waitMs 100
        bridge = self.start()
        self.call(bridge, "before_agent_start", {"activeTools": ["qmem_store"], "prompt": PROMPTS[0],
                                                 "rlmDepth": None, "depthGiven": False})
        first = user(PROMPTS[0])
        self.assertEqual(self.context(bridge, first)["append"], None)
        # The next request of the prompt, after a tool result: the block joins it once it is ready.
        messages, patch, until = after_tool(first), None, time.monotonic() + 60
        while time.monotonic() < until:  # a watchdog: each call answers at once (the wait is spent)
            patch = self.context(bridge, messages)
            if patch["append"] is not None:
                break
        self.assertIsNotNone(patch["append"], "the late block never arrived")
        self.assertEqual(patch["append"]["customType"], RECALL_CUSTOM_TYPE)
        self.assertIn(TEXTS[0], patch["append"]["content"])
        self.assertEqual(len(self.embeddings.inputs), 1)
        # A new prompt never gets it.
        self.qdrant.inject(Fault.hang(path=SEARCH, times=2))
        self.assertIsNone(self.context(bridge, after_tool(messages) + user(PROMPTS[1]))["append"])
        log = subprocess.run([sys.executable, "-m", "qmem.local", "recall-log", "--json"], cwd=REPO, env=self.env,
                             capture_output=True, text=True, timeout=60)
        # P's block came late; P's three slow calls opened Qdrant's breaker, so the new prompt was skipped.
        self.assertEqual([e["outcome"] for e in json.loads(log.stdout)["entries"]], ["skipped", "late"])
        for secret in (*PROMPTS, *TEXTS):
            self.assertNotIn(secret, log.stdout)


if __name__ == "__main__":
    unittest.main()
