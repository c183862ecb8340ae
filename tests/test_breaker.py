import json
import subprocess
import sys
import textwrap

from qmem.breaker import Breaker, BreakerPolicy, endpoint_key
from qmem.clients.transport import MAX_RETRY_AFTER_S
from qmem.diagnostics import Warnings

from .fakes import Fault
from .support import REPO, GatewayTestCase, TempHomeTestCase

URL = "https://gateway.example:8443/base"


class Clock:
    def __init__(self, now=1_000_000.0):
        self.now = now

    def __call__(self):
        return self.now


class BreakerTests(TempHomeTestCase):
    def setUp(self):
        super().setUp()
        self.path = self.home / "state" / "breaker.json"
        self.clock = Clock()
        self.said = []
        self.warnings = Warnings(self.said.append)

    def breaker(self, url=URL, **policy):
        policy = {"base_ms": 1000, "max_ms": 5000, "trip_after": 3, "probe_lease_ms": 500, **policy}
        return Breaker(self.path, url, BreakerPolicy(**policy), warnings=self.warnings, clock=self.clock)

    def test_closed_by_default_and_success_writes_nothing(self):
        b = self.breaker()
        self.assertTrue(b.check().allowed)
        b.success()
        self.assertFalse(self.path.exists())

    def test_definitive_failure_opens_at_once_and_doubles_to_the_cap(self):
        b = self.breaker()
        windows = []
        for _ in range(5):
            windows.append(b.definitive_failure())
            decision = b.check()
            self.assertFalse(decision.allowed)
            self.assertEqual(decision.retry_in_ms, windows[-1])
            self.clock.now += windows[-1] / 1000
            self.assertTrue(b.check().probe)  # each re-open is a failed probe
        self.assertEqual(windows, [1000, 2000, 4000, 5000, 5000])

    def test_a_failure_reported_while_open_changes_nothing(self):
        """Calls let through before the breaker opened (a recall's lanes, searched at once; another process)
        report after it: the window neither restarts nor doubles."""
        b, other = self.breaker(), self.breaker()
        self.assertEqual(b.definitive_failure(), 1000)
        self.clock.now += 0.4
        self.assertEqual((other.definitive_failure(), other.ambiguous_failure()), (0, 0))
        self.assertEqual(b.check().retry_in_ms, 600)
        self.assertEqual(b.snapshot()["consecutive_opens"], 1)
        self.clock.now += 0.6
        self.assertTrue(b.check().probe)
        self.assertEqual(b.ambiguous_failure(), 2000)  # the failed probe doubles it

    def test_ambiguous_failures_trip_after_n_in_a_row(self):
        b = self.breaker()
        self.assertEqual([b.ambiguous_failure() for _ in range(2)], [0, 0])
        self.assertTrue(b.check().allowed)
        b.success()  # a success in between resets the count
        self.assertEqual([b.ambiguous_failure() for _ in range(3)], [0, 0, 1000])
        self.assertFalse(b.check().allowed)

    def test_one_probe_after_the_window_then_close_or_reopen(self):
        b, other = self.breaker(), self.breaker()  # two processes' views of one file
        b.definitive_failure()
        self.clock.now += 1.0
        first, second = b.check(), other.check()
        self.assertEqual((first.allowed, first.probe), (True, True))
        self.assertFalse(second.allowed)  # only one probe at a time
        b.ambiguous_failure()  # the probe failed: re-open, doubled
        self.assertEqual(other.check().retry_in_ms, 2000)
        self.clock.now += 2.0
        self.assertTrue(other.check().probe)
        other.success()
        self.assertEqual(b.snapshot()["state"], "closed")
        self.assertEqual(b.definitive_failure(), 1000)  # the doubling starts over after a success

    def test_probe_lease_expires_if_the_prober_dies(self):
        b = self.breaker()
        b.definitive_failure()
        self.clock.now += 1.0
        self.assertTrue(b.check().probe)
        self.assertFalse(b.check().allowed)
        self.clock.now += 0.6
        self.assertTrue(b.check().probe)

    def test_keyed_by_endpoint_without_urls_in_the_file(self):
        self.breaker().definitive_failure()
        self.assertTrue(self.breaker(URL + "/").check().allowed is False)  # same endpoint
        self.assertTrue(self.breaker("https://other.example").check().allowed)  # a changed url starts closed
        text = self.path.read_text()
        self.assertNotIn("gateway.example", text)
        self.assertIn(endpoint_key(URL), text)
        self.assertEqual(self.path.stat().st_mode & 0o777, 0o600)

    def test_corrupt_file_counts_as_closed_is_rewritten_and_warns_once(self):
        self.path.parent.mkdir(parents=True)
        for garbage in (b"{not json", b"[]", b'{"version": 99, "endpoints": {}}', b"\xff\xfe"):
            self.path.write_bytes(garbage)
            self.assertTrue(self.breaker().check().allowed)
            self.assertEqual(json.loads(self.path.read_text()), {"version": 1, "endpoints": {}})
        self.assertEqual(len(self.said), 1)
        self.assertIn("reset", self.said[0])

    def test_a_fifo_or_a_deep_nesting_as_the_file_counts_as_corrupt_and_never_hangs(self):
        # In a child under a watchdog: a read that blocks on the FIFO would hang the test otherwise.
        self.path.parent.mkdir(parents=True)
        script = textwrap.dedent(f"""
            import json, os, sys
            from pathlib import Path
            from qmem.breaker import Breaker, BreakerPolicy
            from qmem.diagnostics import Warnings
            path, said = Path({str(self.path)!r}), []
            for kind in ("fifo", "deep"):
                if kind == "fifo":
                    os.mkfifo(path)
                else:
                    path.write_text("[" * 200_000 + "]" * 200_000)
                breaker = Breaker(path, {URL!r}, BreakerPolicy(), warnings=Warnings(said.append))
                assert breaker.check().allowed
                breaker.definitive_failure()
                assert not breaker.check().allowed, kind
                assert path.is_file() and json.loads(path.read_text())["version"] == 1, kind
                path.unlink()
            print(len(said))
        """)
        done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
        self.assertEqual((done.returncode, done.stderr), (0, ""))
        self.assertEqual(done.stdout.strip(), "2")  # each fresh session warned once that it reset the file

    def test_reset_and_snapshot(self):
        b = self.breaker()
        b.definitive_failure()
        self.assertEqual(b.snapshot()["state"], "open")
        b.reset()
        self.assertEqual(b.snapshot()["state"], "closed")

    def test_unwritable_state_fails_open(self):
        self.path.parent.mkdir(parents=True)
        self.path.mkdir()  # a directory where the file should be: nothing can be written
        b = self.breaker()
        b.definitive_failure()
        self.assertTrue(b.check().allowed)
        self.assertTrue(any("cannot be saved" in s for s in self.said))

    def test_processes_never_clobber_each_other(self):
        script = textwrap.dedent(f"""
            from qmem.breaker import Breaker, BreakerPolicy
            b = Breaker({str(self.path)!r}, {URL!r}, BreakerPolicy(trip_after=10**9))
            for _ in range(150):
                b.ambiguous_failure()
        """)
        procs = [subprocess.Popen([sys.executable, "-c", script], cwd=REPO) for _ in range(4)]
        for proc in procs:
            self.assertEqual(proc.wait(timeout=60), 0)
        entry = json.loads(self.path.read_text())["endpoints"][endpoint_key(URL)]
        self.assertEqual(entry["failures"], 600)  # every increment survived: no lost update


class GatewayAnswersTests(GatewayTestCase):
    """What the gateway answers, as the breaker hears it, through ``python3 -m qmem.local``."""

    def local(self, *args):
        result = self.run_module("qmem.local", *args)
        self.assertNoTraceback(result)
        return result

    def breaker_state(self):
        return json.loads(self.local("breaker", "--json").stdout)

    def test_a_200_that_is_not_the_contract_counts_toward_the_breaker(self):
        answers = [Fault.status(200, "<html>maintenance</html>", content_type="text/html", path="/v1/memories"),
                   Fault.status(200, {"ok": True}, path="/v1/memories"),  # JSON, but no id
                   Fault.status(200, [], path="/v1/memories")]
        for strike, answer in enumerate(answers, 1):
            self.gateway.inject(answer)
            result = self.local("store", "--text", f"note number {strike}", "--project", "alpha", "--json")
            self.assertEqual(result.code, 0, result.stderr)
            self.assertTrue(json.loads(result.stdout)["queued"])  # never taken as stored: kept here
            state = self.breaker_state()
            self.assertEqual(state["state"], "open" if strike == 3 else "closed")
            self.assertEqual(state["consecutive_failures"], 0 if strike == 3 else strike)
        sent = len(self.gateway.requests)
        self.assertTrue(json.loads(self.local("store", "--text", "fourth", "--project", "alpha", "--json").stdout)["queued"])
        self.assertEqual(len(self.gateway.requests), sent)  # open: nothing went out

    def test_a_good_answer_after_a_bad_one_starts_the_count_again(self):
        self.gateway.inject(Fault.status(200, {"items": "not a list"}, path="/v1/memories:export"))
        self.assertEqual(self.local("pull").code, 1)
        self.assertEqual(self.breaker_state()["consecutive_failures"], 1)
        self.assertEqual(self.local("pull").code, 0)
        self.assertEqual(self.breaker_state()["consecutive_failures"], 0)

    def test_a_retry_after_of_an_hour_holds_the_breaker_for_the_stated_cap(self):
        cap_ms = int(MAX_RETRY_AFTER_S * 1000)
        self.gateway.inject(Fault.status(503, retry_after="3600", path="/v1/memories"))
        self.local("store", "--text", "note", "--project", "alpha")
        state = self.breaker_state()
        self.assertEqual(state["state"], "open")
        self.assertLessEqual(state["retry_in_ms"], cap_ms)
        self.assertGreater(state["retry_in_ms"], cap_ms - 60_000)  # the cap, not the 60 s base window
        readme = " ".join((REPO / "README.md").read_text().split())
        self.assertIn(f"Retry-After` asks for more than {int(MAX_RETRY_AFTER_S // 60)} minutes", readme)
