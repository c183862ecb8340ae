"""Issue 31, item 7: three machines converge through one gateway, as seed 001 promises.

Three HOMEs (three machines, each its own index and outbox) and one fake gateway.  Each step
redraws which machines reach the gateway (a partitioned machine's gateway URL refuses
connections) and runs one operation, chosen at random: a store, a correction of a record the
machine knows (its own, queued or shared, or one it pulled), a soft delete at the gateway (a
tombstone in the export from then on), a flush, or a pull.  The real qmem functions run
in-process, each machine with its own HOME-based configuration.  Then the partitions heal:
every machine flushes, then every machine pulls, and

* every machine's current records (not superseded, not deleted) are the gateway's live ones,
  with the same texts;
* no tombstoned record is current anywhere (a pulled tombstone is never undone);
* no correction is undone: a record the gateway says is superseded is superseded everywhere;
* nothing is doubled: each text is stored once at the gateway and held once per machine;
* nothing is left queued, and what failed is what the gateway refused (a correction of a
  record deleted meanwhile), kept locally with its reason.

Seeded: a failing seed is printed (``seed=…`` in the subtest), with the last operations.
"""

from __future__ import annotations

import random
import shutil
import sqlite3
import tempfile
import unittest
from collections import Counter
from dataclasses import replace
from pathlib import Path

from qmem.diagnostics import Warnings
from qmem.runtime import Runtime
from qmem.store import ToolError, qmem_correct, qmem_store
from qmem.sync import flush, pull

from .fakes import FakeGateway, refused_url
from .support import clean_env, write_config

#: A memory file system when there is one: three indexes' fsyncs per step are most of the time.
SCRATCH = "/dev/shm" if Path("/dev/shm").is_dir() else None
SEEDS = range(20)
OPERATIONS = 100
API_KEY = "convergence-key"
MACHINES = ("alpha", "beta", "gamma")
#: (operation, weight) for each step.
WEIGHTS = (("store", 30), ("correct", 20), ("delete", 10), ("flush", 20), ("pull", 20))


class Machine:
    """One HOME: a runtime that reaches the gateway and one whose gateway URL refuses."""

    def __init__(self, root: Path, name: str, gateway_url: str) -> None:
        self.name = name
        home = root / name
        home.mkdir()
        env = clean_env(home, QMEM_GATEWAY_API_KEY=API_KEY)
        write_config(env, {"url": gateway_url, "connectTimeoutMs": 2000, "timeoutMs": 2000})
        self.warned: list[str] = []
        self.up = Runtime(env, warnings=Warnings(self.warned.append))
        self.down = Runtime(env, warnings=Warnings(self.warned.append),
                            config=replace(self.up.config, url=refused_url()))
        self.database = self.up.paths.database

    def runtime(self, reachable: bool) -> Runtime:
        return self.up if reachable else self.down

    def close(self) -> None:
        self.up.close()
        self.down.close()

    def rows(self) -> list[sqlite3.Row]:
        """Every row of this machine's index, oldest first, read as any SQLite reader would."""
        if not self.database.exists():
            return []  # nothing has opened the index yet
        conn = sqlite3.connect(f"file:{self.database}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return conn.execute("SELECT id, local_id, text, state, reason, supersedes_id, superseded_by, deleted_at "
                                "FROM records ORDER BY rowid").fetchall()
        finally:
            conn.close()


def is_current(row: sqlite3.Row) -> bool:
    return row["superseded_by"] is None and row["deleted_at"] is None and row["state"] in ("synced", "observed",
                                                                                          "pending")


class Run:
    """One seeded run: the operations, and the log a failure prints."""

    def __init__(self, seed: int, root: Path) -> None:
        self.seed = seed
        self.random = random.Random(seed)
        self.gateway = FakeGateway(api_key=API_KEY).start()
        self.machines = [Machine(root, name, self.gateway.url) for name in MACHINES]
        self.log: list[str] = []
        self.stores = 0

    def close(self) -> None:
        for machine in self.machines:
            machine.close()
        self.gateway.stop()

    def step(self, number: int) -> None:
        reachable = {machine.name: self.random.random() < 0.6 for machine in self.machines}
        operation = self.random.choices([name for name, _ in WEIGHTS], [weight for _, weight in WEIGHTS])[0]
        machine = self.random.choice(self.machines)
        rt = machine.runtime(reachable[machine.name])
        where = f"{number}: {operation} on {machine.name} ({'up' if reachable[machine.name] else 'down'})"
        if operation == "store":
            self.stores += 1
            text = f"seed {self.seed} note {self.stores} written on {machine.name}"
            self.log.append(f"{where}: {self._write(qmem_store, rt, {'text': text, 'project_id': 'p'})}")
        elif operation == "correct":
            targets = [row["id"] for row in machine.rows() if is_current(row)]
            if not targets:
                self.log.append(f"{where}: nothing to correct")
                return
            target = self.random.choice(targets)
            self.stores += 1
            text = f"seed {self.seed} correction {self.stores} on {machine.name}"
            arguments = {"text": text, "project_id": "p", "supersedes_id": target, "supersede_reason": "newer"}
            self.log.append(f"{where} of {target}: {self._write(qmem_correct, rt, arguments)}")
        elif operation == "delete":
            live = [record["id"] for record in self.gateway.live_records()]
            if live:
                self.gateway.soft_delete(self.random.choice(live))
            self.log.append(f"{where}: {len(live)} live before")
        elif operation == "flush":
            report = flush(rt)
            self.log.append(f"{where}: synced {report.synced} failed {report.failed} left {report.remaining}")
        else:
            report = pull(rt)
            self.log.append(f"{where}: {report.items} items, {report.tombstones} tombstones")

    @staticmethod
    def _write(tool, rt: Runtime, arguments: dict) -> str:
        try:
            return tool(rt, arguments).text.split(":")[0]
        except ToolError as refused:  # e.g. a correction of a record deleted meanwhile: 404
            return f"refused ({refused.message[:60]})"

    def heal(self) -> None:
        """Every machine reaches the gateway again: each flushes, then each pulls."""
        for machine in self.machines:
            report = flush(machine.up)
            assert report.remaining == 0 and report.left_pending == 0, (machine.name, report)
        for machine in self.machines:
            report = pull(machine.up)
            assert report.stopped is None, (machine.name, report.stopped)


class ConvergenceTests(unittest.TestCase):
    def test_three_machines_converge_under_random_partitions(self):
        for seed in SEEDS:
            with self.subTest(seed=seed):
                root = Path(tempfile.mkdtemp(prefix=f"qmem-converge-{seed}-", dir=SCRATCH))
                run = Run(seed, root)
                try:
                    for number in range(OPERATIONS):
                        run.step(number)
                    run.heal()
                    self.check(run)
                except AssertionError as failure:
                    raise AssertionError(f"seed {seed} does not converge: {failure}\nlast operations:\n"
                                         + "\n".join(run.log[-15:])) from None
                finally:
                    run.close()
                    shutil.rmtree(root, True)

    def check(self, run: Run) -> None:
        everything = run.gateway.records
        live = {record["id"]: record["text"] for record in run.gateway.live_records()}
        deleted = {rid for rid, record in everything.items() if record["deleted_at"] is not None}
        superseded = {rid for rid, record in everything.items()
                      if record["superseded_by"] is not None and record["deleted_at"] is None}
        self.assertEqual(Counter(r["text"] for r in everything.values()).most_common(1)[0][1], 1,
                         "a text stored twice at the gateway")
        for machine in run.machines:
            rows = machine.rows()
            by_id = {row["id"]: row for row in rows}
            current = {row["id"]: row["text"] for row in rows if is_current(row)}
            self.assertEqual(current, live, f"{machine.name}'s current records are not the gateway's")
            self.assertEqual([row["id"] for row in rows if row["state"] == "pending"], [],
                             f"{machine.name} still has queued records")
            back = [rid for rid in deleted if rid in by_id and by_id[rid]["deleted_at"] is None]
            self.assertEqual(back, [], f"{machine.name} shows tombstoned records as not deleted")
            undone = [rid for rid in superseded if by_id[rid]["superseded_by"] is None]
            self.assertEqual(undone, [], f"{machine.name} undid corrections")
            texts = Counter(row["text"] for row in rows if row["text"])  # a tombstone pulled alone has none
            self.assertEqual([text for text, n in texts.items() if n > 1], [], f"{machine.name} doubled a text")
            gateway_texts = {record["text"] for record in everything.values()}
            failed = {row["id"] for row in rows if row["state"] == "failed"}
            for row in rows:
                if row["state"] == "failed":  # refused by the gateway, kept here with the reason, never sent
                    self.assertTrue(row["reason"], dict(row))
                    self.assertNotIn(row["text"], gateway_texts)
                    # The one refusal this run can earn: a correction of a record deleted meanwhile
                    # (or of a correction that failed so).
                    self.assertIn(row["supersedes_id"], deleted | failed, dict(row))
            self.assertEqual(machine.warned, [], f"{machine.name} warned")


if __name__ == "__main__":
    unittest.main()
