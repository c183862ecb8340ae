"""Issue 31, item 4: a claim names its process exactly, so a dead flusher's records are taken
over at the next flush even when its PID now belongs to another process; a claim is renewed
while its holder works, so its lease can be short.
"""

import os
import signal
import subprocess
import sys

from qmem.localdb.outbox import Outbox
from qmem.records import NewRecord

from .support import REPO, GatewayTestCase

NS_LAST_PID = "/proc/sys/kernel/ns_last_pid"
HOLD = ("import sys\nfrom qmem.runtime import Runtime\nrt = Runtime()\n"
        "print(len(rt.outbox.claim_batch(2, lease_seconds=3600)), flush=True)\nsys.stdin.read()")


def spawn_with_pid(pid: int, attempts: int = 50) -> subprocess.Popen | None:
    """A sleeping process that has PID ``pid`` (a PID reused), or None if other processes
    kept taking it first.  Needs a writable ``ns_last_pid`` (root in its PID namespace)."""
    for _ in range(attempts):
        with open(NS_LAST_PID, "w") as last:
            last.write(str(pid - 1))
        proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
        if proc.pid == pid:
            return proc
        proc.stdin.close()
        proc.wait()
    return None


class ReusedPidTests(GatewayTestCase):
    def test_a_dead_holders_reused_pid_does_not_hold_its_records(self):
        if not os.access(NS_LAST_PID, os.W_OK):
            self.skipTest("reusing a PID on purpose needs a writable /proc/sys/kernel/ns_last_pid (root)")
        rt = self.runtime()
        for n in range(3):
            rt.outbox.enqueue(NewRecord(text=f"held by a dead flusher {n}", project_id="p"))
        holder = subprocess.Popen([sys.executable, "-c", HOLD], cwd=REPO, env=self.env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.addCleanup(holder.stdout.close)
        self.assertEqual(holder.stdout.readline().strip(), "2")  # it holds two for an hour
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        holder.stdin.close()
        reused = spawn_with_pid(holder.pid)
        if reused is None:
            self.skipTest("other processes kept taking the PID")
        self.addCleanup(reused.wait)
        self.addCleanup(reused.stdin.close)
        result = self.run_module("qmem.local", "flush")
        self.assertEqual(result.code, 0, result.stderr)
        self.assertEqual(result.stdout.splitlines()[0], "sent 3: synced 3, duplicate 0, failed 0; still pending 0")
        self.assertEqual(sorted(self.gateway.count_by_text()), [f"held by a dead flusher {n}" for n in range(3)])

    def test_a_live_holder_still_holds(self):
        rt = self.runtime()
        for n in range(3):
            rt.outbox.enqueue(NewRecord(text=f"held by a live flusher {n}", project_id="p"))
        holder = subprocess.Popen([sys.executable, "-c", HOLD], cwd=REPO, env=self.env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.addCleanup(holder.wait, 60)
        self.addCleanup(holder.stdin.close)
        self.addCleanup(holder.stdout.close)
        self.assertEqual(holder.stdout.readline().strip(), "2")
        result = self.run_module("qmem.local", "flush")
        self.assertEqual(result.code, 0, result.stderr)
        self.assertEqual(result.stdout.splitlines()[0], "sent 1: synced 1, duplicate 0, failed 0; still pending 0; "
                                                        "2 being sent by another qmem process")


class RenewTests(GatewayTestCase):
    def test_a_renewed_claim_is_not_taken(self):
        rt = self.runtime()
        rt.outbox.enqueue(NewRecord(text="renewed", project_id="p"))
        claim = rt.outbox.claim(5, lease_seconds=-1)  # a lease already run out…
        self.assertEqual(len(claim.records), 1)
        other = Outbox(rt.index)
        rt.outbox.renew(claim, lease_seconds=600)  # …renewed by its live holder
        self.assertEqual(other.claim_batch(5, lease_seconds=60), [])
        rt.outbox.release_claims(r.local_id for r in claim.records)
        self.assertEqual(len(other.claim_batch(5, lease_seconds=60)), 1)
