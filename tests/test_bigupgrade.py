"""Issue 31, item 5: the v3 → v4 upgrade of a big index runs in bounded memory, and another
process that opens the index meanwhile is told it is being upgraded instead of waiting.

A real v3 index of 300,000 records whose times are not in the one form (every row is
rewritten); the upgrade runs in a child process whose peak resident memory (``VmHWM``) is
measured against its resident memory when the upgrade began.
"""

import json
import os
import sqlite3
import subprocess
import sys

from qmem.localindex import LocalIndex

from .support import REPO, TempHomeTestCase

ROWS = 300_000
UPGRADE = """
import json, sys
from qmem.localindex import LocalIndex

def kib(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field))

def gate(done, total, seen=[]):
    if not seen:  # the upgrade has the index: hold it there until the test has looked
        seen.append(total)
        print("upgrading", flush=True)
        sys.stdin.readline()

start = kib("VmRSS:")
with LocalIndex(sys.argv[1], progress=gate) as index:
    version = index.status().schema_version
print(json.dumps({"start_kib": start, "peak_kib": kib("VmHWM:"), "version": version}))
"""


def build_v3(path, rows: int) -> None:
    """A v3 index (v4's tables, an older ``user_version``) of ``rows`` records with times in
    forms an older qmem kept; filled without its triggers and indexes, then given them back."""
    LocalIndex(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("BEGIN")
        triggers = [row[0] for row in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")]
        indexes = [row[0] for row in conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")]
        saved = {name: sql for name, sql in conn.execute("SELECT name, sql FROM sqlite_master "
                                                         "WHERE type IN ('trigger', 'index') AND sql IS NOT NULL")}
        for name in triggers:
            conn.execute(f"DROP TRIGGER {name}")
        for name in indexes:
            conn.execute(f"DROP INDEX {name}")
        conn.executemany(
            "INSERT INTO records (id, text, state, coverage, content_hash, learned_at, created_at, expires_at) "
            "VALUES (?, ?, 'observed', 'full', ?, '2026-01-01T00:00:00.000000Z', '2026-01-01t00:00:00z', "
            "'2999-01-31T00:00:00+00:00')",
            ((f"r{i}", f"upgraded note {i}", f"h{i}") for i in range(rows)))
        for name in indexes + triggers:
            conn.execute(saved[name])
        conn.execute("INSERT INTO records_fts (records_fts) VALUES ('rebuild')")
        conn.execute("PRAGMA user_version = 3")
        conn.execute("COMMIT")
    finally:
        conn.close()


class BigUpgradeTests(TempHomeTestCase):
    def test_300k_rows_upgrade_in_bounded_memory_and_others_are_told(self):
        if not os.path.exists("/proc/self/status"):
            self.skipTest("needs /proc to read a process's peak memory")
        path = self.home / "big.sqlite"
        build_v3(path, ROWS)
        self.env["QMEM_SQLITE"] = str(path)
        child = subprocess.Popen([sys.executable, "-c", UPGRADE, str(path)], cwd=REPO, env=self.env,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: child.poll() is None and (child.kill(), child.communicate(timeout=60)))
        self.assertEqual(child.stdout.readline(), "upgrading\n")
        meanwhile = self.run_module("qmem.local", "find", "note")
        self.assertEqual(meanwhile.code, 1)
        self.assertEqual(meanwhile.stderr, "qmem-local: the local index big.sqlite is being upgraded by another "
                                           "qmem process (to schema v4); try again in a moment\n")
        out, err = child.communicate("go\n", timeout=600)
        self.assertEqual(child.returncode, 0, err)
        measured = json.loads(out)
        self.assertEqual(measured["version"], 4)
        above_mb = (measured["peak_kib"] - measured["start_kib"]) / 1024
        self.assertLess(above_mb, 40, f"the upgrade of {ROWS} rows peaked {above_mb:.0f} MB above its start")
        with LocalIndex(path) as index:
            record = index.get(f"r{ROWS - 1}")
            self.assertEqual((record.created_at, record.expires_at),
                             ("2026-01-01T00:00:00.000000Z", "2999-01-31T00:00:00.000000Z"))
            self.assertEqual(index.find("upgraded note").records[0].text.split()[:2], ["upgraded", "note"])
