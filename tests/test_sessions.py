import json
import os

from qmem.errors import LocalIndexError
from qmem.localdb.outbox import Outbox
from qmem.localdb.record import Outcome
from qmem.localdb.sessionimport import SessionImporter, learned_from_call, session_roots
from qmem.localindex import LocalIndex

from .sessionfiles import SessionFile
from .support import TempHomeTestCase

STORE_ARGS = {"text": "Deploys use blue-green switching", "project_id": "alpha", "kind": "decision"}


class ImportTestCase(TempHomeTestCase):
    def setUp(self):
        super().setUp()
        self.index = LocalIndex(self.home / "qmem.sqlite")
        self.addCleanup(self.index.close)
        self.pi_sessions = self.home / ".pi" / "agent" / "sessions" / "--work-project--"

    def run_import(self, env=None):
        return SessionImporter(self.index).run(session_roots(env or self.env))

    def session(self, name="2026-11-29T10-00-00-000Z_a.jsonl", directory=None):
        return SessionFile((directory or self.pi_sessions) / name)


class LearnTests(ImportTestCase):
    def test_store_correct_get_search_from_details(self):
        s = self.session()
        s.call("qmem_store", STORE_ARGS, details={"qmem": 1, "record": {"id": "g-1", **STORE_ARGS,
                                                                        "created_at": "2026-11-29T10:00:00Z"}})
        s.call("qmem_correct", {"supersedes_id": "g-1", "text": "Deploys use canary releases", "project_id": "alpha",
                                "supersede_reason": "changed in Q4"},
               details={"qmem": 1, "record": {"id": "g-2", "text": "Deploys use canary releases",
                                              "supersedes_id": "g-1"}})
        s.call("qmem_get", {"id": "g-3"}, details={"qmem": 1, "record": {
            "id": "g-3", "text": "Private note", "private": True, "project_id": "beta", "kind": "fact"}})
        s.call("qmem_search", {"query": "deploy"}, details={"qmem": 1, "results": [
            {"id": "g-4", "score": 0.7, "text": "Other agent's excerpt", "agent_id": "hermes", "project_id": "alpha"},
            {"id": "g-1", "score": 0.6, "text": "Deploys use", "project_id": "alpha"}]})
        report = self.run_import()
        self.assertEqual((report.files, report.read, report.records_added), (1, 1, 4))
        old = self.index.get("g-1")
        self.assertEqual((old.text, old.coverage, old.superseded_by), (STORE_ARGS["text"], "full", "g-2"))
        self.assertEqual((old.tool, old.session_file), ("qmem_store", f"pi:sessions/{self.pi_sessions.name}/{s.path.name}"))
        self.assertTrue(old.machine)
        self.assertEqual(self.index.get("g-2").supersedes_id, "g-1")
        self.assertTrue(self.index.get("g-3").private)
        other = self.index.get("g-4")
        self.assertEqual((other.coverage, other.agent_id, other.state), ("partial", "hermes", "observed"))
        self.assertEqual([r.id for r in self.index.find("deploys").records], ["g-2"])  # g-1 superseded

    def test_text_fallback_and_things_never_imported(self):
        s = self.session()
        s.call("qmem_store", STORE_ARGS, text=json.dumps({"id": "g-9", "text": STORE_ARGS["text"]}))
        s.call("qmem_store", STORE_ARGS, text='Stored. {"id": "g-10", "status": "ok"}')
        s.call("qmem_store", STORE_ARGS, details={"qmem": 1, "record": {"id": "g-11"}}, is_error=True)
        s.call("qmem_search", {"query": "x"}, details={"qmem": 1, "fallback": "local_sqlite",
                                                       "results": [{"id": "g-12", "text": "from local"}]})
        s.call("memory_search", {"query": "x"}, details={"qmem": 1, "results": [{"id": "g-13", "text": "recall"}]})
        s.call("qmem_get", {"id": "x"}, text="not json at all")
        self.run_import()
        self.assertEqual(self.index.get("g-9").text, STORE_ARGS["text"])
        self.assertEqual(self.index.get("g-10").text, STORE_ARGS["text"])  # text from the call's arguments
        for absent in ("g-11", "g-12", "g-13"):
            self.assertIsNone(self.index.get(absent), absent)

    def test_queued_store_is_restored_to_the_outbox_once(self):
        s = self.session()
        local_id = "local-" + "b" * 32
        s.call("qmem_store", STORE_ARGS, details={"qmem": 1, "queued": True, "record": {"id": local_id}})
        self.assertEqual(self.run_import().queued_restored, 1)
        self.assertEqual(self.index.get(local_id).state, "pending")
        s.user("touch the file")
        os.utime(s.path, ns=(1, 1))
        report = self.run_import()
        self.assertEqual(report.queued_restored, 0)
        self.assertEqual(Outbox(self.index).report().counts["pending"], 1)
        # Once it is known under its gateway id, another file holding the same call restores nothing.
        Outbox(self.index).record_outcomes([Outcome.synced(local_id, {"id": "g-1", "text": STORE_ARGS["text"]})])
        again = self.session("2026-11-29T11-00-00-000Z_b.jsonl")
        again.call("qmem_store", STORE_ARGS, details={"qmem": 1, "queued": True, "record": {"id": local_id}})
        self.assertEqual(self.run_import().queued_restored, 0)
        self.assertEqual((self.index.status().records, self.index.get(local_id).id), (1, "g-1"))

    def test_a_restore_that_fails_is_redone_by_the_next_import(self):
        # The disk fills while the import writes: what the file taught, the writes it queued and
        # how far it was read are saved together or not at all, so the next import restores them.
        s = self.session()
        s.call("qmem_store", {**STORE_ARGS, "text": "Kept before the disk filled"},
               details={"qmem": 1, "record": {"id": "g-1"}})
        queued = {}
        for n in range(3):  # big texts: restoring them needs pages that learning g-1 does not
            local_id = f"local-{n:032x}"
            queued[local_id] = " ".join(f"word{n}x{i}" for i in range(2500))[:19_000]
            s.call("qmem_store", {**STORE_ARGS, "text": queued[local_id]},
                   details={"qmem": 1, "queued": True, "record": {"id": local_id}})
        # SQLite's own "database or disk is full", reached by capping the file's size.
        pages = self.index._conn.execute("PRAGMA page_count").fetchone()[0]
        self.index._conn.execute(f"PRAGMA max_page_count = {pages + 4}")
        with self.assertRaises(LocalIndexError) as caught:
            self.run_import()
        self.assertIn("full", str(caught.exception))
        self.assertEqual((self.index.imported_files(), self.index.get("g-1")), ({}, None))
        self.index._conn.execute("PRAGMA max_page_count = 1073741823")
        report = self.run_import()
        self.assertEqual((report.read, report.records_added, report.queued_restored), (1, 1, 3))
        for local_id, text in queued.items():
            self.assertEqual((self.index.get(local_id).state, self.index.get(local_id).text), ("pending", text))
        os.utime(s.path, ns=(1, 1))  # changed as far as a stat can tell: read again, restored once
        self.assertEqual(self.run_import().queued_restored, 0)
        self.assertEqual(Outbox(self.index).report().counts["pending"], 3)

    def test_learned_from_call_is_pure(self):
        result = {"role": "toolResult", "details": {"qmem": 1, "record": {"id": "g-1"}}}
        [obs] = learned_from_call("qmem_store", STORE_ARGS, result, "pi:f")
        self.assertEqual((obs.id, obs.text, obs.project_id, obs.kind), ("g-1", STORE_ARGS["text"], "alpha", "decision"))


class IncrementalTests(ImportTestCase):
    def test_unchanged_appended_truncated_replaced(self):
        s = self.session()
        s.call("qmem_store", STORE_ARGS, details={"qmem": 1, "record": {"id": "g-1", **STORE_ARGS}})
        first = self.run_import()
        self.assertEqual((first.read, first.bytes), (1, s.path.stat().st_size))

        again = self.run_import()
        self.assertEqual((again.unchanged, again.read, again.bytes), (1, 0, 0))

        size_before = s.path.stat().st_size
        call_id = s.tool_call("qmem_get", {"id": "g-2"})  # the result is not written yet
        appended = self.run_import()
        self.assertEqual(appended.bytes, s.path.stat().st_size - size_before)  # read from the offset
        s.tool_result(call_id, "qmem_get", details={"qmem": 1, "record": {"id": "g-2", "text": "paired later"}})
        self.run_import()
        self.assertEqual(self.index.get("g-2").text, "paired later")  # call remembered across runs

        # Truncated and rewritten with other content: read again from the start.
        s.path.write_text("")
        s2 = SessionFile(s.path)
        s2.call("qmem_get", {"id": "g-3"}, details={"qmem": 1, "record": {"id": "g-3", "text": "after truncation"}})
        report = self.run_import()
        self.assertEqual(report.reread, 1)
        self.assertEqual(self.index.get("g-3").text, "after truncation")

        # Replaced by another file of at least the same size (new inode, different first bytes).
        content = s.path.read_bytes()
        replacement = self.home / "replacement.jsonl"
        s3 = SessionFile(replacement, cwd="/elsewhere/with/a/longer/path/name")
        s3.call("qmem_get", {"id": "g-4"}, details={"qmem": 1, "record": {"id": "g-4", "text": "replaced file"}})
        self.assertGreaterEqual(replacement.stat().st_size, len(content))
        os.replace(replacement, s.path)
        report = self.run_import()
        self.assertEqual(report.reread, 1)
        self.assertEqual(self.index.get("g-4").text, "replaced file")
        self.assertEqual(self.index.status().records, 4)  # nothing duplicated by the re-reads

    def test_bad_lines_are_counted_and_skipped(self):
        s = self.session()
        s.raw(b'{"type":"message","message":{"role":"toolResult","toolName":"qmem_get"\n')  # malformed
        s.raw(b'{"type":"brand_new_entry","note":"qmem_store"}\n')  # unknown entry type
        s.raw(b'{"type":"message","text":"qmem_\xff\xfe"}\n')  # not UTF-8
        s.raw(b'["qmem_store"]\n')  # JSON, but not an entry
        s.call("qmem_get", {"id": "g-1"}, details={"qmem": 1, "record": {"id": "g-1", "text": "survives"}})
        call_id = s.tool_call("qmem_get", {"id": "g-2"})
        line = json.dumps({"type": "message", "id": "z", "message": {
            "role": "toolResult", "toolCallId": call_id, "toolName": "qmem_get",
            "details": {"qmem": 1, "record": {"id": "g-2", "text": "completed later"}}}}).encode() + b"\n"
        s.raw(line[:40])  # half-written last line
        report = self.run_import()
        self.assertEqual((report.malformed_lines, report.unknown_entries, report.non_utf8_lines,
                          report.incomplete_last_lines), (2, 1, 1, 1))
        self.assertEqual(self.index.get("g-1").text, "survives")
        self.assertIsNone(self.index.get("g-2"))
        s.raw(line[40:])  # the writer finishes the line
        self.run_import()
        self.assertEqual(self.index.get("g-2").text, "completed later")


class RootTests(ImportTestCase):
    def test_prime_layouts_and_directory_variables(self):
        pi_dir, prime_dir, session_dir = self.home / "pi-agent", self.home / "prime-agent", self.home / "pi-sessions"
        env = dict(self.env, PI_CODING_AGENT_DIR=str(pi_dir), PRIME_AGENT_CODING_AGENT_DIR=str(prime_dir),
                   PI_CODING_AGENT_SESSION_DIR=str(session_dir))
        files = [
            (pi_dir / "sessions" / "--x--", "g-pi"),
            (prime_dir / "sessions", "g-prime"),
            (prime_dir / "session-artifacts" / "run1" / "sub-1", "g-sub"),
            (session_dir, "g-dir"),
            (self.pi_sessions, "g-default"),  # ~/.pi/agent is not read when PI_CODING_AGENT_DIR is set
        ]
        for directory, record_id in files:
            SessionFile(directory / "s.jsonl").call(
                "qmem_get", {"id": record_id}, details={"qmem": 1, "record": {"id": record_id, "text": record_id}})
        report = SessionImporter(self.index).run(session_roots(env))
        self.assertEqual(report.by_host, {"pi": 2, "prime": 2})
        for _, record_id in files[:4]:
            self.assertIsNotNone(self.index.get(record_id), record_id)
        self.assertIsNone(self.index.get("g-default"))
        self.assertEqual(self.index.get("g-sub").session_file, "prime:session-artifacts/run1/sub-1/s.jsonl")
