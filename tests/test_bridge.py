"""``python -m qmem.bridge`` as the JavaScript shim drives it: JSON lines over real pipes."""

import json
import queue
import signal
import subprocess
import sys
import threading
import unittest

from qmem.recall import RECALL_CUSTOM_TYPE

from .fakes import Fault, refused_url
from .support import REPO, GatewayTestCase


class BridgeProcess:
    """A running bridge with a reader thread; every stdout line must be JSON."""

    def __init__(self, env, cwd):
        self.proc = subprocess.Popen([sys.executable, "-m", "qmem.bridge"], cwd=cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue = queue.Queue()
        self.raw: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.raw.append(line)
            self.lines.put(json.loads(line))  # a non-JSON line fails the reader, and so the test
        self.lines.put(None)

    def send(self, message):
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def next(self, timeout=30):
        return self.lines.get(timeout=timeout)

    def answer(self, request_id, timeout=30):
        """The answer to ``request_id``; other messages seen meanwhile are kept in ``self.other``."""
        while True:
            message = self.next(timeout)
            if message is None:
                raise AssertionError("the bridge closed stdout")
            if message.get("id") == request_id and "ui" not in message:
                return message
            self.other.append(message)

    other: list

    def close(self):
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        self.proc.wait(timeout=30)
        self.proc.stdout.close()
        self.proc.stderr.close()


class BridgeTests(GatewayTestCase):
    def start(self):
        bridge = BridgeProcess(self.env, str(self.home))
        bridge.other = []
        self.addCleanup(bridge.close)
        self.assertEqual(bridge.next()["event"], "ready")
        bridge.send({"id": 0, "method": "session_start", "params": {
            "cwd": str(self.home), "extensionDir": str(self.home / ".pi" / "agent" / "extensions" / "qmem")}})
        self.assertEqual(bridge.answer(0)["result"], {"host": "pi", "recall": False})
        return bridge

    def test_session_start_says_whether_recall_is_offered(self):
        self.configure(recall={"qdrantUrl": refused_url(), "embeddingsUrl": refused_url("/v1")})
        for directory, expected in ((".pi/agent/extensions/qmem", {"host": "pi", "recall": True}),
                                    ("elsewhere/qmem", {"host": None, "recall": False})):
            with self.subTest(directory=directory):
                bridge = BridgeProcess(self.env, str(self.home))
                bridge.other = []
                self.addCleanup(bridge.close)
                self.assertEqual(bridge.next()["event"], "ready")
                bridge.send({"id": 0, "method": "session_start", "params": {
                    "cwd": str(self.home), "extensionDir": str(self.home / directory)}})
                self.assertEqual(bridge.answer(0)["result"], expected)

    def test_a_request_before_session_start_knows_no_project_and_session_start_replaces_it(self):
        # The bridge runs in qmem's own checkout (index.js starts it there): never the user's project.
        checkout, project = self.home / "qmemclone", self.home / "shopapp"
        for directory in (checkout, project):
            (directory / ".git").mkdir(parents=True)
        bridge = BridgeProcess(self.env, str(checkout))
        bridge.other = []
        self.addCleanup(bridge.close)
        self.assertEqual(bridge.next()["event"], "ready")
        bridge.send({"id": 1, "method": "before_agent_start", "params": {"activeTools": ["qmem_store"]}})
        early = bridge.answer(1)["result"]["append"]
        self.assertIn("qmem rules", early)
        self.assertNotIn("for this repository use", early)
        bridge.send({"id": 2, "method": "session_start", "params": {
            "cwd": str(project), "extensionDir": str(self.home / ".pi" / "agent" / "extensions" / "qmem")}})
        self.assertEqual(bridge.answer(2)["result"]["host"], "pi")
        bridge.send({"id": 3, "method": "before_agent_start", "params": {"activeTools": ["qmem_store"]}})
        self.assertIn('for this repository use "shopapp"', bridge.answer(3)["result"]["append"])

    def test_tools_hooks_and_errors(self):
        bridge = self.start()
        bridge.send({"id": 1, "method": "tool", "params": {"name": "qmem_store",
                                                          "args": {"text": "via the bridge", "project_id": "p"}}})
        self.assertTrue(bridge.answer(1)["result"]["details"]["shared"])
        self.assertEqual(self.gateway.count_by_text(), {"via the bridge": 1})
        bridge.send({"id": 2, "method": "tool", "params": {"name": "qmem_store", "args": {"text": "x"}}})
        self.assertEqual(bridge.answer(2)["error"]["category"], "input")
        bridge.send({"id": 3, "method": "before_agent_start", "params": {"activeTools": ["qmem_store"]}})
        self.assertIn("qmem rules", bridge.answer(3)["result"]["append"])
        bridge.send({"id": 4, "method": "before_agent_start", "params": {"activeTools": ["bash"]}})
        self.assertIsNone(bridge.answer(4)["result"]["append"])
        old = {"role": "custom", "customType": RECALL_CUSTOM_TYPE, "content": "stale block"}
        bridge.send({"id": 5, "method": "context", "params": {"messages": [{"role": "user", "content": "hi"}, old],
                                                             "depthGiven": False}})
        self.assertEqual(bridge.answer(5)["result"], {"drop": [1], "append": None})  # recall is down: no block
        bridge.send({"id": 6, "method": "nonsense"})
        self.assertEqual(bridge.answer(6)["error"]["category"], "bridge")
        bridge.proc.stdin.write("this is not json\n")
        bridge.send({"id": 7, "method": "ping"})
        self.assertEqual(bridge.answer(7)["result"], {"pong": True})
        warnings = [m["message"] for m in bridge.other if m.get("event") == "warning"]
        self.assertIn("could not read", " ".join(warnings))

    def test_requests_run_concurrently(self):
        self.configure(connectTimeoutMs=60_000, timeoutMs=60_000)
        bridge = self.start()
        self.gateway.inject(Fault.hang(path="/v1/memories:search"))
        bridge.send({"id": 1, "method": "tool", "params": {"name": "qmem_search", "args": {"query": "slow"}}})
        self.assertTrue(self.gateway.wait_for_requests(1, timeout=30))
        bridge.send({"id": 2, "method": "ping"})
        self.assertEqual(bridge.answer(2)["result"], {"pong": True})  # not stuck behind the hanging search
        self.gateway.stop()  # releases the hang: the search falls back locally
        self.assertEqual(bridge.answer(1)["result"]["details"]["fallback"], "local_sqlite")

    def test_command_with_ui_round_trip(self):
        bridge = self.start()
        bridge.send({"id": 1, "method": "command", "params": {"name": "qmem:config", "args": "", "hasUI": True}})
        select = bridge.next()
        self.assertEqual((select["method"], select["params"]["options"][0]), ("select", "Set gateway URL"))
        bridge.send({"method": "ui_result", "params": {"id": select["ui"], "value": "Set gateway URL"}})
        ask = bridge.next()
        self.assertEqual(ask["method"], "input")
        bridge.send({"method": "ui_result", "params": {"id": ask["ui"], "value": "https://gw.example"}})
        self.assertIn("saved", bridge.answer(1)["result"]["text"])
        bridge.send({"id": 2, "method": "command", "params": {"name": "qmem:config", "args": "", "hasUI": False}})
        self.assertEqual(bridge.answer(2)["result"]["text"], "cancelled")  # without a UI nothing is asked

    def test_shutdown_and_eof(self):
        bridge = self.start()
        bridge.send({"id": 9, "method": "shutdown"})
        self.assertEqual(bridge.answer(9)["result"], {"ok": True})
        self.assertEqual(bridge.proc.wait(timeout=30), 0)
        other = BridgeProcess(self.env, str(REPO))
        self.addCleanup(other.close)
        self.assertEqual(other.next()["event"], "ready")
        other.proc.stdin.close()
        self.assertEqual(other.proc.wait(timeout=30), 0)
        self.assertEqual(other.proc.stderr.read(), "")


class ShutdownWithWritesTests(GatewayTestCase):
    """The shim kills the bridge 2 s after ``shutdown``: a write in flight was queued before it was
    sent, one not yet started is queued at once (never behind the running ones), nothing is lost
    and every request is answered once, ``shutdown`` last."""

    WORKERS = 8  # the bridge's pool

    def setUp(self):
        super().setUp()
        self.configure(connectTimeoutMs=600_000, timeoutMs=600_000)
        self.release = threading.Event()
        self.addCleanup(self.release.set)
        self.gateway.inject(Fault.delay_headers(self.release, path="/v1/memories", method="POST", times=None))
        self.bridge = BridgeTests.start(self)

    def store(self, request_id, text):
        self.bridge.send({"id": request_id, "method": "tool",
                          "params": {"name": "qmem_store", "args": {"text": text, "project_id": "p"}}})

    def flush_and_count(self, texts):
        flushed = subprocess.run([sys.executable, "-m", "qmem.local", "flush"], cwd=REPO, env=self.env,
                                 capture_output=True, text=True, timeout=120)
        self.assertEqual(flushed.returncode, 0, flushed.stderr)
        self.assertEqual(self.gateway.count_by_text(), dict.fromkeys(texts, 1))
        keys = [p.header("idempotency-key") for p in self.gateway.requests_to("/v1/memories", "POST")]
        self.assertEqual(len(set(keys)), len(texts))  # a re-send used the key its first attempt had

    def one_store_more_than_workers_then_shutdown(self):
        """Every worker busy with a held store, one store more, then ``shutdown``: the texts, and
        the answer to that last store (given while the running ones are still held)."""
        texts = [f"written at shutdown {n}" for n in range(self.WORKERS + 1)]
        for n, text in enumerate(texts, 1):
            if n == len(texts):
                self.assertTrue(self.gateway.wait_for_requests(self.WORKERS, timeout=60))  # every worker is busy
            self.store(n, text)
        self.bridge.send({"id": "bye", "method": "shutdown"})
        return texts, self.bridge.answer(len(texts))

    def test_a_write_not_yet_started_is_queued_at_once_and_the_running_ones_finish(self):
        texts, waiting = self.one_store_more_than_workers_then_shutdown()
        self.assertEqual(waiting["result"]["details"]["gateway"], {"error": "not_contacted"})
        self.assertTrue(waiting["result"]["content"][0]["text"].startswith("Queued locally as local-"))
        self.assertEqual(self.gateway.live_records(), [])
        self.assertEqual(len(self.gateway.requests_to("/v1/memories", "POST")), self.WORKERS)  # it was not sent
        self.release.set()
        messages = list(iter(self.bridge.next, None))
        self.assertEqual(self.bridge.proc.wait(timeout=60), 0)
        answers = [m for m in self.bridge.other + messages if "id" in m]
        self.assertEqual(sorted(str(m["id"]) for m in answers), sorted(["bye", *map(str, range(1, len(texts)))]))
        self.assertEqual(answers[-1], {"id": "bye", "result": {"ok": True}})  # shutdown last
        self.assertTrue(all(m["result"]["details"]["shared"] for m in answers[:-1]))
        self.flush_and_count(texts)

    def test_with_offline_queue_off_a_write_not_yet_started_is_refused_and_nothing_waits(self):
        self.bridge.proc.kill()
        self.bridge.proc.wait(timeout=60)
        self.configure(connectTimeoutMs=600_000, timeoutMs=600_000, offlineQueue=False)
        self.bridge = BridgeTests.start(self)
        texts, refused = self.one_store_more_than_workers_then_shutdown()
        self.assertEqual(refused["error"]["message"], "not stored: the session was ending and offlineQueue is off")
        self.release.set()
        list(iter(self.bridge.next, None))
        self.assertEqual(self.bridge.proc.wait(timeout=60), 0)
        self.assertEqual(self.gateway.count_by_text(), dict.fromkeys(texts[:-1], 1))
        queue = subprocess.run([sys.executable, "-m", "qmem.local", "queue", "--json"], cwd=REPO, env=self.env,
                               capture_output=True, text=True, timeout=120)
        self.assertEqual(queue.returncode, 0, queue.stderr)
        self.assertNotIn(texts[-1], queue.stdout)  # not queued: nothing may wait with offlineQueue off

    def test_killed_after_shutdown_with_a_write_in_flight_loses_nothing(self):
        self.store(1, "in flight when the shim killed the bridge")
        self.assertTrue(self.gateway.wait_for_requests(1, timeout=60))
        self.bridge.send({"id": "bye", "method": "shutdown"})
        self.bridge.proc.send_signal(signal.SIGKILL)  # as the shim does when shutdown takes too long
        self.assertEqual(self.bridge.proc.wait(timeout=60), -signal.SIGKILL)
        self.release.set()
        self.flush_and_count(["in flight when the shim killed the bridge"])
