"""A full disk, for real: a tiny tmpfs (tests/smalldisk.py) holds the index.

Reads answer from the file when there is no room for SQLite's 32 KB shared-memory file;
writes say the disk is full in one line; ``status`` says the index is read-only and why; a
process that opened the index on a full disk writes again once there is room; and an import
the disk stops half-way is redone whole by the next one.
"""

import json
import subprocess
import sys
import textwrap

from .sessionfiles import SessionFile
from .smalldisk import run_on_small_disk, small_disk_unavailable
from .support import TempHomeTestCase

DISK_FULL = "qmem-local: the disk holding the local index qmem.sqlite is full; nothing was written\n"
SIZE_KB = 1024


class FullDiskTestCase(TempHomeTestCase):
    def setUp(self):
        super().setUp()
        reason = small_disk_unavailable()
        if reason:
            self.skipTest(reason)
        self.disk = self.home / "disk"
        self.disk.mkdir()
        self.env["QMEM_SQLITE"] = str(self.disk / "qmem.sqlite")

    def run_steps(self, *steps):
        return run_on_small_disk(self.disk, SIZE_KB, list(steps), self.env)


class ReadsOnAFullDiskTests(FullDiskTestCase):
    def test_find_status_and_queue_answer_and_store_says_the_disk_is_full(self):
        store = {"qmem": ["store", "--queue-only", "--project", "p", "--text", "deploy note"]}
        read_only = {}
        for free_kb in (0, 8, 24):  # each on a fresh disk
            with self.subTest(free_kb=free_kb):
                answers = self.run_steps(
                    store, {"leave_free": free_kb * 1024},
                    {"qmem": ["find", "deploy", "--json"]}, {"qmem": ["status", "--json"]},
                    {"qmem": ["queue", "--json"]}, {"qmem": ["status"]},
                    {"qmem": ["store", "--queue-only", "--project", "p", "--text", "one more"]},
                    {"leave_free": 256 * 1024},
                    {"qmem": ["store", "--queue-only", "--project", "p", "--text", "room again"]},
                    {"qmem": ["status", "--json"]})
                self.assertEqual(answers[0]["code"], 0, answers[0]["stderr"])
                self.assertEqual(answers[1]["free"], free_kb * 1024)
                find, status, queue, text, refused, _, later, recovered = answers[2:]
                for answer in (find, status, queue, text):
                    self.assertEqual((answer["code"], answer["stderr"]), (0, ""), answer)
                self.assertEqual(len(json.loads(find["stdout"])["results"]), 1)
                status = json.loads(status["stdout"])
                read_only[free_kb] = status["read_only"]
                self.assertEqual((status["records"], status["queue"]["pending"]), (1, 1))
                self.assertEqual(json.loads(queue["stdout"])["counts"]["pending"], 1)
                if status["read_only"]:  # no room for the shared-memory file: a snapshot, said so
                    self.assertEqual(status["read_only_reason"],
                                     "the disk holding it is full; reads come from a snapshot of the file")
                    self.assertIn("read-only    the disk holding it is full", text["stdout"])
                else:
                    self.assertGreater(free_kb, 0)  # opened as usual; the write is what fails
                    self.assertNotIn("read-only", text["stdout"])
                self.assertEqual((refused["code"], refused["stdout"], refused["stderr"].count("\n")), (1, "", 1))
                self.assertIn(DISK_FULL[12:-1], refused["stderr"])  # one line that says the disk is full
                self.assertEqual(later["code"], 0, later["stderr"])
                recovered = json.loads(recovered["stdout"])
                self.assertEqual((recovered["read_only"], recovered["records"]), (False, 2))
        # No room for the 32 KB shared-memory file: reads come from the snapshot.
        self.assertEqual((read_only[0], read_only[8]), (True, True), read_only)

    def test_a_log_with_changes_is_not_read_around(self):
        # A process died holding changes in the write-ahead log, then the disk filled: a snapshot
        # of the file alone would be silently stale, so reads stop with a clear line instead.
        keep_log = textwrap.dedent("""
            import os, sys
            from qmem.localdb.record import Observation
            from qmem.localindex import LocalIndex
            index = LocalIndex(os.environ["QMEM_SQLITE"])
            index._conn.execute("PRAGMA wal_autocheckpoint = 0")
            index.learn([Observation(id="g-1", text="deploy note only in the log")])
            os._exit(0)  # no close: the log keeps its changes and the -shm file stays
        """)
        answers = self.run_steps(
            {"qmem": ["store", "--queue-only", "--project", "p", "--text", "deploy note"]},
            {"python": keep_log}, {"python": "import os, sys; os.unlink(sys.argv[1] + '/qmem.sqlite-shm')"},
            {"leave_free": 0}, {"qmem": ["find", "deploy"]}, {"leave_free": 256 * 1024},
            {"qmem": ["find", "deploy", "--json"]})
        self.assertEqual(answers[2]["code"], 0, answers[2]["stderr"])
        stopped = answers[4]
        self.assertEqual(stopped["code"], 1)
        self.assertEqual(stopped["stderr"].count("\n"), 1)
        self.assertIn("is full, and its write-ahead log holds changes", stopped["stderr"])
        self.assertEqual(len(json.loads(answers[6]["stdout"])["results"]), 2)  # nothing was lost

    def test_a_process_that_opened_on_a_full_disk_writes_once_there_is_room(self):
        # A host's bridge keeps its index open for the whole session.
        bridge = textwrap.dedent("""
            import json, os, sys
            from qmem.localdb.record import Observation
            from qmem.localindex import LocalIndex
            index = LocalIndex(os.environ["QMEM_SQLITE"])
            out = {"read_only": index.read_only, "found": len(index.find("deploy").records)}
            try:
                index.learn([Observation(id="g-1", text="deploy note from the bridge")])
            except Exception as exc:
                out["full"] = str(exc)
            os.unlink(os.path.join(sys.argv[1], "filler"))
            index.learn([Observation(id="g-2", text="deploy note once there is room")])
            out.update(after=index.read_only, found_after=len(index.find("deploy").records))
            print(json.dumps(out))
        """)
        answers = self.run_steps(
            {"qmem": ["store", "--queue-only", "--project", "p", "--text", "deploy note"]},
            {"leave_free": 0}, {"python": bridge})
        self.assertEqual(answers[2]["code"], 0, answers[2]["stderr"])
        self.assertEqual(json.loads(answers[2]["stdout"]), {
            "read_only": True, "found": 1, "full": DISK_FULL[12:-1], "after": False, "found_after": 2})


#: A process that had the index open is killed: its -wal and -shm files stay behind, so the next
#: process opens the index writable however full the disk is.
KILLED_HOLDER = textwrap.dedent("""
    import subprocess, sys
    code = ("import os\\nfrom qmem.localindex import LocalIndex\\n"
            "index = LocalIndex(os.environ['QMEM_SQLITE'])\\nindex.find('deploy')\\nos.kill(os.getpid(), 9)")
    print(subprocess.run([sys.executable, "-c", code]).returncode)
""")


class StatusSaysWhatAWriteWouldDoTests(FullDiskTestCase):
    """Issue 31, item 2: ``status --json`` ``read_only`` is what the next ``store`` finds."""

    def test_read_only_matches_what_store_does(self):
        seen = {}
        for leftover in (False, True):
            for free_kb in (0, 8, 24, 64):  # each on a fresh disk
                with self.subTest(leftover=leftover, free_kb=free_kb):
                    answers = self.run_steps(
                        {"qmem": ["store", "--queue-only", "--project", "p", "--text", "deploy note"]},
                        *([{"python": KILLED_HOLDER}] if leftover else []),
                        {"leave_free": free_kb * 1024}, {"qmem": ["status", "--json"]},
                        {"qmem": ["store", "--queue-only", "--project", "p", "--text", "one more"]})
                    status, store = answers[-2], answers[-1]
                    self.assertEqual((status["code"], status["stderr"]), (0, ""), status)
                    document = json.loads(status["stdout"])
                    seen[leftover, free_kb] = (document["read_only"], store["code"])
                    self.assertEqual(document["read_only"], store["code"] != 0, (document, store))
                    if document["read_only"]:
                        self.assertIn("the disk holding it is full", document["read_only_reason"])
                        self.assertIn(DISK_FULL[12:-1], store["stderr"])
                    else:
                        self.assertIsNone(document["read_only_reason"])
        # The file opens writable at 64 KB free, yet a store's pages do not fit: the probe says so.
        self.assertEqual(seen[False, 64], (True, 1), seen)


class StatusWhileAnotherProcessWritesTests(TempHomeTestCase):
    def test_a_busy_index_is_not_called_read_only(self):
        self.assertEqual(self.run_module("qmem.local", "store", "--queue-only", "--project", "p", "--text",
                                         "deploy note").code, 0)
        holder = subprocess.Popen(
            [sys.executable, "-c", "import sqlite3, sys\nconn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
             "conn.execute('BEGIN IMMEDIATE')\nprint('holding', flush=True)\nsys.stdin.read()",
             str(self.runtime_path())], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(holder.wait, 60)
        self.addCleanup(holder.stdout.close)
        self.addCleanup(holder.stdin.close)
        self.assertEqual(holder.stdout.readline(), "holding\n")  # another process is writing the index
        status = self.run_module("qmem.local", "status", "--json")
        self.assertEqual(status.code, 0, status.stderr)
        self.assertEqual(json.loads(status.stdout)["read_only"], False)

    def runtime_path(self):
        from qmem.runtime import Runtime

        rt = Runtime(self.env)
        path = rt.paths.database
        rt.close()
        return path


class ImportOnAFullDiskTests(FullDiskTestCase):
    def test_an_import_the_disk_stopped_is_redone_whole(self):
        session = SessionFile(self.home / ".pi" / "agent" / "sessions" / "--work--" / "s.jsonl")
        session.call("qmem_store", {"text": "learned before the disk filled", "project_id": "p"},
                     details={"qmem": 1, "record": {"id": "g-1"}})
        for n in range(3):  # restoring these needs far more room than saving the file's offset
            text = " ".join(f"word{n}x{i}" for i in range(2400))[:19_000]
            session.call("qmem_store", {"text": text, "project_id": "p"},
                         details={"qmem": 1, "queued": True, "record": {"id": f"local-{n:032x}"}})
        answers = self.run_steps(
            {"qmem": ["status"]}, {"leave_free": 96 * 1024}, {"qmem": ["import", "--json"]},
            {"leave_free": 512 * 1024}, {"qmem": ["import", "--json"]}, {"qmem": ["import", "--json"]},
            {"qmem": ["queue", "--json"]})
        failed = answers[2]
        self.assertEqual((failed["code"], failed["stderr"]), (1, DISK_FULL))
        first, again, queue = (json.loads(answers[n]["stdout"]) for n in (4, 5, 6))
        self.assertEqual((first["read"], first["records_added"], first["queued_restored"]), (1, 1, 3))
        self.assertEqual((again["unchanged"], again["queued_restored"]), (1, 0))
        self.assertEqual(queue["counts"]["pending"], 3)
        self.assertEqual(sorted(r["id"] for r in queue["records"]), [f"local-{n:032x}" for n in range(3)])
