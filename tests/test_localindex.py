import ast
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import unittest
from pathlib import Path

from qmem.errors import CorruptIndexError, InputError, LocalIndexError
from qmem.localdb.lexical import match_expression, query_terms
from qmem.localdb.record import Observation, Record, merge_observation, observation_from_record
from qmem.localdb.schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION
from qmem.localindex import LocalIndex

from .packagemap import imports_of, modules, tree
from .support import REPO, TempHomeTestCase, unprivileged_runner

HOSTILE_QUERIES = [
    '"', '""', '"unbalanced', "*", "deploy*", "*deploy", ":", "text:deploy", "records_fts:deploy",
    "NEAR", "NEAR(deploy gateway)", "NEAR(deploy, 5)", "AND", "OR", "NOT", "deploy AND", "OR deploy",
    "deploy NOT gateway", "(", ")", "(deploy", "deploy)", "((()))", "^deploy", "deploy^", "-deploy", "+deploy",
    "{text}: deploy", "col : x", "'", "'; DROP TABLE records; --", "\x00deploy", "dep\x00loy", "\x1b[31mdeploy",
    "\u202edeploy", "deploy\u200b", "\t\n\r", "   ", "", "\ufeff", "🦄", "deploy 🦄", "x" * 5000,
    " ".join(["deploy"] * 500), " ".join(f"w{i}" for i in range(1000)), "\ud800", "città", "CITTÀ",
]


def sample(index: LocalIndex, record_id: str, text: str, **fields) -> None:
    index.learn([Observation(id=record_id, text=text, state="synced", **fields)])


class IndexTestCase(TempHomeTestCase):
    def setUp(self):
        super().setUp()
        self.path = self.home / "data" / "qmem.sqlite"
        self.index = LocalIndex(self.path)
        self.addCleanup(self.index.close)


class SchemaTests(IndexTestCase):
    def test_wal_user_version_mark_and_private_file(self):
        conn = sqlite3.connect(self.path)
        self.addCleanup(conn.close)
        self.assertEqual(conn.execute("PRAGMA journal_mode").fetchone()[0], "wal")
        self.assertEqual(conn.execute("PRAGMA user_version").fetchone()[0], SCHEMA_VERSION)
        self.assertEqual(conn.execute("PRAGMA application_id").fetchone()[0], APPLICATION_ID)
        self.assertEqual(APPLICATION_ID.to_bytes(4, "big"), b"qmem")
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'records_fts'").fetchone()[0]
        self.assertIn("porter unicode61 remove_diacritics 2", sql)
        self.assertNotIn("prefix", sql)
        self.assertIn("tail", [row[1] for row in conn.execute("PRAGMA table_info(import_files)")])
        self.assertEqual(self.path.stat().st_mode & 0o777, 0o600)

    def test_integrity_check_of_a_sound_index(self):
        self.assertEqual(self.index.check_integrity(), ["ok"])

    def make_old(self, version: int, texts=("made by schema one",)) -> Path:
        path = self.home / f"v{version}.sqlite"
        conn = sqlite3.connect(path)
        for script in MIGRATIONS[:version]:
            conn.executescript(script)
        conn.execute("PRAGMA journal_mode = WAL")
        for i, text in enumerate(texts):
            conn.execute("INSERT INTO records (id, text, state, coverage, content_hash, learned_at) "
                         "VALUES (?, ?, 'synced', 'full', 'h', 'now')", (f"old{i}", text))
        conn.execute(f"PRAGMA user_version = {version}")
        conn.commit()
        conn.close()
        return path

    def test_migrates_v1_and_v2_files_keeping_records_and_marking_them(self):
        for version in (1, 2):
            with self.subTest(version=version):
                path = self.make_old(version, ["made by schema one, visited twice"])
                with LocalIndex(path) as index:
                    self.assertEqual(index.find("schema one").records[0].id, "old0")
                    self.assertEqual(index.find("visits").records[0].id, "old0")  # re-indexed with stems
                conn = sqlite3.connect(path)
                self.addCleanup(conn.close)
                self.assertEqual(conn.execute("PRAGMA user_version").fetchone()[0], SCHEMA_VERSION)
                self.assertEqual(conn.execute("PRAGMA application_id").fetchone()[0], APPLICATION_ID)
                self.assertIsNotNone(conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE name = 'records_superseded_by'").fetchone())
                self.assertEqual(conn.execute("SELECT tail FROM import_files").fetchall(), [])

    def test_migration_reports_progress_and_indexes_every_record(self):
        import qmem.localdb.schema as schema

        texts = [f"record number {i} about walking" for i in range(23)]
        path = self.make_old(2, texts)
        calls = []
        batch, schema.REBUILD_BATCH = schema.REBUILD_BATCH, 5
        self.addCleanup(setattr, schema, "REBUILD_BATCH", batch)
        with LocalIndex(path, progress=lambda done, total: calls.append((done, total))) as index:
            self.assertEqual(calls, [(0, 23), (5, 23), (10, 23), (15, 23), (20, 23), (23, 23)])
            result = index.find("walked", limit=100)
            self.assertEqual(len(result.records), 23)
        calls.clear()
        with LocalIndex(path, progress=lambda done, total: calls.append((done, total))):
            self.assertEqual(calls, [])  # already current: no migration, no progress

    def test_failed_migration_changes_nothing(self):
        path = self.make_old(2)
        conn = sqlite3.connect(path)
        conn.execute("ALTER TABLE import_files ADD COLUMN tail TEXT")  # v3 will fail to add it
        conn.commit()
        conn.close()
        with self.assertRaises(LocalIndexError):
            LocalIndex(path)
        conn = sqlite3.connect(path)
        self.addCleanup(conn.close)
        self.assertEqual(conn.execute("PRAGMA user_version").fetchone()[0], 2)
        self.assertEqual(conn.execute("PRAGMA application_id").fetchone()[0], 0)
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'records_fts'").fetchone()[0]
        self.assertNotIn("porter", sql)
        self.assertEqual(conn.execute("SELECT count(*) FROM records_fts WHERE records_fts MATCH 'schema'")
                         .fetchone()[0], 1)

    def test_reopen_is_idempotent(self):
        sample(self.index, "a1", "kept across reopen")
        self.index.close()
        with LocalIndex(self.path) as again:
            self.assertEqual(again.get("a1").text, "kept across reopen")


class FindTests(IndexTestCase):
    def setUp(self):
        super().setUp()
        sample(self.index, "r1", "We deploy with blue-green switches behind the gateway", project_id="alpha",
               kind="decision", created_at="2026-01-01T00:00:00Z")
        sample(self.index, "r2", "La città di Perché usa il circuit breaker", project_id="beta", kind="fact")
        sample(self.index, "r3", "Gateway configuration lives in config.json", project_id="alpha", kind="fact")

    def ids(self, query, **kw):
        return [r.id for r in self.index.find(query, **kw).records]

    def test_all_words_first_then_filled_with_any_word(self):
        result = self.index.find("deploy gateway")
        self.assertEqual([r.id for r in result.records], ["r1", "r3"])
        self.assertEqual((result.match, result.complete, result.partial, result.more), ("all", 1, False, False))
        self.assertEqual(result.to_json()["complete"], 1)

    def test_any_word_fallback_is_labelled_partial(self):
        result = self.index.find("gateway unicorn")
        self.assertTrue(result.partial)
        self.assertEqual(sorted(r.id for r in result.records), ["r1", "r3"])
        self.assertEqual(result.to_json()["match"], "any")
        self.assertEqual(result.complete, 0)

    def test_diacritics_and_stems(self):
        self.assertEqual(self.ids("citta"), ["r2"])
        self.assertEqual(self.ids("PERCHE"), ["r2"])
        self.assertEqual(self.ids("configurations"), ["r3"])  # stem "configur"
        self.assertEqual(self.ids("deploying"), ["r1"])
        result = self.index.find("breakers circuit")
        self.assertEqual(([r.id for r in result.records], result.partial), (["r2"], False))

    def test_prefixes_only_when_no_word_matches_exactly(self):
        result = self.index.find("configu gatew")  # no exact word at all: every word as a prefix
        self.assertEqual(([r.id for r in result.records], result.match, result.complete),
                         (["r3", "r1"], "all-prefix", 1))
        self.assertFalse(result.partial)
        result = self.index.find("configur gate")  # "configur" is a word (a stem): no prefixes
        self.assertEqual(([r.id for r in result.records], result.match), (["r3"], "any"))
        result = self.index.find("deplo nothing")
        self.assertEqual(([r.id for r in result.records], result.match), (["r1"], "any"))

    def test_stopwords_are_left_out_unless_nothing_else(self):
        sample(self.index, "c1", "what did you do to the what did you")
        result = self.index.find("what did the gateway do")
        self.assertEqual(result.terms, ("gateway",))
        self.assertEqual(result.stopwords, ("what", "did", "the", "do"))
        self.assertEqual(sorted(r.id for r in result.records), ["r1", "r3"])
        self.assertEqual(self.ids("what did you"), ["c1"])
        self.assertEqual(self.index.find("what did you").to_json()["stopwords"], [])

    def test_more_says_results_were_left_out(self):
        for i in range(5):
            sample(self.index, f"m{i}", f"gateway note {i}")
        self.assertTrue(self.index.find("gateway", limit=6).more)
        self.assertFalse(self.index.find("gateway", limit=7).more)
        self.assertEqual(len(self.index.find("gateway", limit=7).records), 7)
        mixed = self.index.find("gateway note", limit=5)  # 5 complete of 5 shown, the rest not
        self.assertEqual((mixed.complete, mixed.more, len(mixed.records)), (5, True, 5))
        filled = self.index.find("gateway note", limit=6)
        self.assertEqual((filled.complete, filled.more, len(filled.records)), (5, True, 6))
        self.assertTrue(filled.to_json()["more"])

    def test_equal_scores_keep_learning_order_with_and_without_filters(self):
        order = ["t5", "t2", "t9", "t1", "t7", "t3"]
        for record_id in order:
            sample(self.index, record_id, "identical tie text", project_id="ties", scope="s")
        for kw in ({}, {"project": "ties"}, {"scope": "s"}):
            with self.subTest(**kw):
                self.assertEqual(self.ids("identical tie", **kw), order)
                self.assertEqual(self.ids("identical tie", limit=3, **kw), order[:3])
                self.assertEqual(self.ids("identical unicorn", limit=4, **kw), order[:4])

    def test_scope_matches_exactly(self):
        sample(self.index, "sc1", "scoped gateway note", scope="team")
        sample(self.index, "sc2", "scoped gateway note", scope="personal")
        sample(self.index, "sc3", "scoped gateway note")  # scope unknown
        self.assertEqual(self.ids("scoped", scope="team"), ["sc1"])
        self.assertEqual(self.ids("scoped", scope="personal"), ["sc2"])
        self.assertEqual(self.ids("scoped", scope="other"), [])
        self.assertEqual(self.ids("scoped"), ["sc1", "sc2", "sc3"])

    def test_text_that_cannot_be_stored_is_an_input_error(self):
        for call in (lambda: self.index.find("\ud800"), lambda: self.index.find("gateway \udfff"),
                     lambda: self.index.find("gateway", project="\ud800"),
                     lambda: self.index.find("gateway", scope="a\udc80"), lambda: self.index.get("\ud800"),
                     lambda: self.index.get_meta("\ud800"), lambda: self.index.set_meta("k", "\ud800"),
                     lambda: self.index.learn([Observation(id="u1", text="bad \ud800 text")]),
                     lambda: self.index.learn([Observation(id="u2", text="fine")], meta={"k": "\ud800"})):
            with self.assertRaises(InputError) as caught:
                call()
            self.assertIn("not valid Unicode", str(caught.exception))
            self.assertNotIn("\n", str(caught.exception))
        self.assertIsNone(self.index.get("u1"))
        self.assertIsNone(self.index.get("u2"))
        self.assertIsNone(observation_from_record({"id": "g", "text": "x\ud800"}, coverage="full", state="synced"))
        with self.assertRaises(InputError):
            self.index.find("gateway", project=3)

    def test_filters(self):
        self.assertEqual(self.ids("gateway", project="alpha", kind="fact"), ["r3"])
        self.assertEqual(self.ids("gateway", project="beta"), [])
        self.assertEqual(len(self.index.find("gateway", limit=1).records), 1)
        with self.assertRaises(InputError):
            self.index.find("gateway", kind="opinion")
        for bad in (0, -1, 10**9, True, "3"):
            with self.subTest(limit=bad), self.assertRaises(InputError):
                self.index.find("gateway", limit=bad)

    def test_hostile_queries_answer_or_raise_input_error(self):
        for query in HOSTILE_QUERIES:
            with self.subTest(query=query[:40]):
                try:
                    result = self.index.find(query)
                except InputError as exc:
                    self.assertRegex(str(exc), "no words|not valid Unicode")
                else:
                    self.assertLessEqual(len(result.terms), 32)

    def test_operators_are_matched_as_words(self):
        sample(self.index, "r4", "Use NOT operator near the AND gate")
        self.assertEqual(self.ids("NOT"), ["r4"])
        self.assertEqual(self.ids("near AND"), ["r4"])
        self.assertEqual(self.ids("deploy:"), ["r1"])  # punctuation dropped inside the string

    def test_one_megabyte_query(self):
        result = self.index.find("gateway " + "z" * (1 << 20))
        self.assertTrue(result.partial)
        self.assertEqual(sorted(r.id for r in result.records), ["r1", "r3"])

    def test_hidden_by_default(self):
        sample(self.index, "s1", "secret plan superseded", superseded_by="r1")
        sample(self.index, "s2", "secret plan private", private=True)
        sample(self.index, "s3", "secret plan deleted", deleted_at="2026-02-01T00:00:00Z")
        sample(self.index, "s4", "secret plan expired", expires_at="2020-01-01T00:00:00+02:00")
        sample(self.index, "s5", "secret plan current", expires_at="2999-01-01T00:00:00.123456Z")
        self.assertEqual(self.ids("secret plan"), ["s5"])
        self.assertIn("s1", self.ids("secret plan", superseded=True))
        self.assertIn("s2", self.ids("secret plan", private=True))
        shown = self.ids("secret plan", deleted=True)
        self.assertIn("s3", shown)
        self.assertIn("s4", shown)

    def test_pending_records_are_found_and_marked(self):
        from qmem.localdb.outbox import Outbox
        from qmem.records import NewRecord

        pending = Outbox(self.index).enqueue(NewRecord(text="queued gateway note", project_id="alpha"))
        result = self.index.find("queued gateway")
        self.assertEqual((result.records[0].id, result.complete), (pending.id, 1))
        self.assertTrue(result.records[0].pending)


class QueryBuildingTests(unittest.TestCase):
    def test_terms_are_quoted_strings(self):
        terms = query_terms('foo "bar" NEAR(x) a:b * -- \x00z')
        self.assertEqual(terms.terms, ("foo", '"bar"', "NEAR(x)", "a:b", "z"))
        self.assertEqual(match_expression(terms.terms), '"foo" AND """bar""" AND "NEAR(x)" AND "a:b" AND "z"')
        self.assertEqual(match_expression(["a", "b"], prefix=True), '"a"* AND "b"*')
        self.assertEqual(match_expression(["a", "b"], prefix=True, any_term=True), '"a"* OR "b"*')

    def test_bounds(self):
        terms = query_terms(" ".join(f"w{i}" for i in range(100)) + " w1 W2")
        self.assertEqual(len(terms.terms), 32)
        self.assertEqual(terms.dropped, 68)
        self.assertEqual(len(query_terms("a" * 500).terms[0]), 64)


class MergeTests(unittest.TestCase):
    NOW = "2026-11-29T00:00:00Z"

    def base(self, **kw):
        return merge_observation(None, Observation(**{"id": "g1", "text": "full text", **kw}), self.NOW)

    def test_full_text_never_replaced_by_partial(self):
        full = self.base()
        self.assertIsNone(merge_observation(full, Observation(id="g1", text="full", coverage="partial"), self.NOW))
        partial = self.base(coverage="partial", text="excerpt")
        merged = merge_observation(partial, Observation(id="g1", text="the whole text"), self.NOW)
        self.assertEqual((merged.text, merged.coverage), ("the whole text", "full"))
        longer = merge_observation(partial, Observation(id="g1", text="excerpt, longer", coverage="partial"),
                                   self.NOW)
        self.assertEqual(longer.text, "excerpt, longer")

    def test_sticky_fields_and_gap_filling(self):
        rec = self.base(project_id="p")
        rec = merge_observation(rec, Observation(id="g1", superseded_by="g2", kind="fact"), self.NOW)
        self.assertEqual((rec.superseded_by, rec.kind, rec.project_id), ("g2", "fact", "p"))
        self.assertIsNone(merge_observation(rec, Observation(id="g1", project_id="other"), self.NOW))
        synced = merge_observation(rec, Observation(id="g1", project_id="other", state="synced"), self.NOW)
        self.assertEqual((synced.project_id, synced.state, synced.superseded_by), ("other", "synced", "g2"))

    def test_synced_never_downgraded(self):
        rec = self.base(state="synced")
        merged = merge_observation(rec, Observation(id="g1", kind="fact"), self.NOW)
        self.assertEqual(merged.state, "synced")

    def test_unchanged_returns_none(self):
        rec = self.base(kind="fact")
        self.assertIsNone(merge_observation(rec, Observation(id="g1", text="full text", kind="fact"), self.NOW))


class BadFileTests(TempHomeTestCase):
    def digest(self, path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    def assertRefusedUntouched(self, path: Path, error=CorruptIndexError, fragment="untouched"):
        siblings = sorted(p.name for p in path.parent.iterdir())
        before = (self.digest(path), path.stat().st_size, path.stat().st_mtime_ns)
        with self.assertRaises(error) as caught:
            LocalIndex(path)
        message = str(caught.exception)
        self.assertNotIn(str(path.parent), message)
        self.assertIn(fragment, message)
        self.assertEqual(before, (self.digest(path), path.stat().st_size, path.stat().st_mtime_ns))
        self.assertEqual(siblings, sorted(p.name for p in path.parent.iterdir()))  # no -wal, -shm, -journal
        return message

    def foreign(self, name: str, *, user_version: int, wal: bool = False, application_id: int = 0) -> Path:
        path = self.home / name
        conn = sqlite3.connect(path)
        if wal:
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE precious (x)")
        conn.execute("CREATE TABLE records (id, text)")
        conn.execute("INSERT INTO precious VALUES (1)")
        conn.execute(f"PRAGMA user_version = {user_version}")
        conn.execute(f"PRAGMA application_id = {application_id}")
        conn.commit()
        conn.close()
        return path

    def qmem_shaped(self, name: str, version: int) -> sqlite3.Connection:
        conn = sqlite3.connect(self.home / name)
        for script in MIGRATIONS[:version]:
            conn.executescript(script)
        conn.execute(f"PRAGMA user_version = {version}")
        return conn

    def test_not_sqlite(self):
        path = self.home / "qmem.sqlite"
        path.write_bytes(b"this is a text file, not a database\n" * 100)
        message = self.assertRefusedUntouched(path, fragment="")
        self.assertIn("not an SQLite database", message)
        self.assertIn("import", message)  # says how to recover

    def test_damaged_sqlite(self):
        path = self.home / "qmem.sqlite"
        with LocalIndex(path) as index:
            sample(index, "a", "some text")
        data = bytearray(path.read_bytes())
        data[100:4096] = b"\xff" * (4096 - 100)  # header intact, schema page destroyed
        path.write_bytes(bytes(data))
        for suffix in ("-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        self.assertRefusedUntouched(path)

    def test_foreign_sqlite_database(self):
        path = self.home / "other.sqlite"
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE precious (x)")
        conn.execute("INSERT INTO precious VALUES (1)")
        conn.commit()
        conn.close()
        message = self.assertRefusedUntouched(path)
        self.assertIn("did not create", message)

    def test_foreign_database_that_looks_versioned_is_untouched(self):
        # user_version 1 or 2 once passed as qmem's; then journal_mode = WAL rewrote the header.
        for version in (1, 2):
            for wal in (False, True):
                with self.subTest(user_version=version, wal=wal):
                    path = self.foreign(f"other-{version}-{wal}.sqlite", user_version=version, wal=wal)
                    self.assertIn("did not create", self.assertRefusedUntouched(path))

    def test_foreign_database_with_a_live_write_ahead_log_is_untouched(self):
        path = self.foreign("live.sqlite", user_version=2, wal=True)
        writer = sqlite3.connect(path)
        self.addCleanup(writer.close)
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("INSERT INTO precious VALUES (2)")
        writer.commit()  # in the -wal only; the other application still has it open
        log = Path(f"{path}-wal")
        log_before = self.digest(log)
        self.assertRefusedUntouched(path)
        self.assertEqual(self.digest(log), log_before)

    def test_another_applications_id_is_refused_even_with_qmem_tables(self):
        path = self.foreign("app.sqlite", user_version=2, application_id=0x12345678)
        self.assertIn("another application (application_id 0x12345678)", self.assertRefusedUntouched(path))
        conn = self.qmem_shaped("shaped.sqlite", 2)
        conn.execute("PRAGMA application_id = 42")
        conn.close()
        self.assertIn("another application", self.assertRefusedUntouched(self.home / "shaped.sqlite"))

    def test_qmem_tables_plus_others_or_an_unknown_version_are_refused(self):
        conn = self.qmem_shaped("extra.sqlite", 2)
        conn.execute("CREATE TABLE someone_elses (x)")
        conn.close()
        self.assertRefusedUntouched(self.home / "extra.sqlite")
        conn = self.qmem_shaped("v1-as-v2.sqlite", 1)
        conn.execute("PRAGMA user_version = 2")  # v1 tables, v2 claimed
        conn.close()
        self.assertRefusedUntouched(self.home / "v1-as-v2.sqlite")
        conn = self.qmem_shaped("unmarked-v3.sqlite", 2)
        conn.execute("PRAGMA user_version = 3")  # only a marked file can be v3
        conn.close()
        self.assertRefusedUntouched(self.home / "unmarked-v3.sqlite")

    def test_newer_schema(self):
        path = self.home / "new.sqlite"
        with LocalIndex(path):
            pass
        conn = sqlite3.connect(path)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        conn.close()
        message = self.assertRefusedUntouched(path, error=LocalIndexError, fragment="newer qmem")
        self.assertIn(f"schema v{SCHEMA_VERSION + 1}", message)

    def test_newer_schema_still_in_the_write_ahead_log(self):
        path = self.home / "newer-wal.sqlite"
        with LocalIndex(path):
            pass
        writer = sqlite3.connect(path)
        self.addCleanup(writer.close)
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        with self.assertRaises(LocalIndexError) as caught:
            LocalIndex(path)
        self.assertIn("newer qmem", str(caught.exception))
        self.assertEqual(writer.execute("PRAGMA user_version").fetchone()[0], SCHEMA_VERSION + 1)

    def test_empty_file_and_empty_database_become_an_index(self):
        empty = self.home / "empty.sqlite"
        empty.touch()
        blank = self.home / "blank.sqlite"
        sqlite3.connect(blank).execute("PRAGMA user_version").fetchone()
        for path in (empty, blank):
            with LocalIndex(path) as index:
                sample(index, "e", "works")
                self.assertEqual(index.get("e").text, "works")

    def test_full_disk_writes_nothing(self):
        path = self.home / "full.sqlite"
        with LocalIndex(path) as index:
            sample(index, "keep", "already stored")
            # SQLite's own "database or disk is full" path, reached by capping the file size.
            pages = index._conn.execute("PRAGMA page_count").fetchone()[0]
            index._conn.execute(f"PRAGMA max_page_count = {pages + 2}")
            big = [Observation(id=f"b{i}", text=f"bulk record number {i} " * 50) for i in range(2000)]
            with self.assertRaises(LocalIndexError) as caught:
                index.learn(big)
            self.assertIn("full", str(caught.exception))
            self.assertEqual(index.status().records, 1)
            self.assertEqual(index.get("keep").text, "already stored")


READER = r"""
import json, sys
from qmem import local
from qmem.errors import LocalIndexError
from qmem.localdb.record import Observation
from qmem.localindex import LocalIndex
from qmem.localdb.outbox import Outbox

index = LocalIndex(sys.argv[1])
out = {"read_only": index.read_only, "found": [r.id for r in index.find("kept").records],
       "records": index.status().records, "queue": Outbox(index).report().counts}
for attempt in (lambda: index.learn([Observation(id="new", text="never written")]),
                lambda: index.set_meta("k", "v")):
    try:
        attempt()
        out.setdefault("writes", []).append("written")
    except LocalIndexError as exc:
        out.setdefault("writes", []).append(str(exc))
index.close()
env = {"HOME": sys.argv[2], "QMEM_SQLITE": sys.argv[1], "PATH": "/usr/bin:/bin"}
out["cli"] = [local.run([*args, "--json"], env=env).code for args in (["find", "kept"], ["status"], ["queue"])]
status = json.loads(local.run(["status", "--json"], env=env).stdout)
out["status_read_only"] = [status["read_only"], status["read_only_reason"]]
print(json.dumps(out))
"""


class ReadOnlyTests(TempHomeTestCase):
    """A file or directory this process cannot write: reads answer, writes fail clearly.

    As root (who ignores file modes) the reader runs as ``nobody`` through ``setpriv``.
    """

    def setUp(self):
        super().setUp()
        self.root = os.geteuid() == 0
        self.runner: list[str] = []
        if self.root:
            self.runner, why_not = unprivileged_runner({"PYTHONPATH": str(REPO)})
            if why_not:
                self.skipTest(why_not)
        self.directory = self.home / "ro"
        self.directory.mkdir()
        self.path = self.directory / "qmem.sqlite"
        self.addCleanup(os.chmod, self.directory, 0o700)
        with LocalIndex(self.path) as index:
            sample(index, "k1", "kept record one")
            from qmem.localdb.outbox import Outbox
            from qmem.records import NewRecord

            Outbox(index).enqueue(NewRecord(text="kept queued note", project_id="p"))
        os.chmod(self.home, 0o755)

    def lock_down(self, *, directory_writable: bool) -> None:
        if self.root:  # root owns everything: nobody may read but not write
            os.chmod(self.path, 0o644)
            os.chmod(self.directory, 0o777 if directory_writable else 0o755)
        else:
            os.chmod(self.path, 0o444)
            os.chmod(self.directory, 0o755 if directory_writable else 0o555)

    def read_as_reader(self) -> dict:
        proc = subprocess.run([*self.runner, sys.executable, "-c", READER, str(self.path), str(self.directory)],
                              capture_output=True, text=True, timeout=60, cwd=REPO,
                              env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
        self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
        return json.loads(proc.stdout)

    def assertServesReadsOnly(self, out: dict, *, found: list[str]) -> None:
        gateway_ids = sorted(i for i in out["found"] if not i.startswith("local-"))
        self.assertEqual((gateway_ids, len(out["found"])), (found, len(found) + 1))  # + the queued note
        self.assertEqual(out["records"], len(found) + 1)
        self.assertEqual(out["queue"]["pending"], 1)
        self.assertEqual(out["writes"], ["the local index qmem.sqlite is read-only; nothing was written"] * 2)
        self.assertEqual(out["cli"], [0, 0, 0])
        self.assertTrue(out["read_only"])
        self.assertEqual(out["status_read_only"][0], True)  # status says what it is
        self.assertTrue(out["status_read_only"][1].startswith("the file or its directory cannot be written"))

    def test_read_only_file_in_a_writable_directory(self):
        self.lock_down(directory_writable=True)
        before = hashlib.sha256(self.path.read_bytes()).hexdigest()
        out = self.read_as_reader()
        self.assertServesReadsOnly(out, found=["k1"])
        self.assertEqual(hashlib.sha256(self.path.read_bytes()).hexdigest(), before)

    def test_read_only_directory_without_shared_memory_file(self):
        self.lock_down(directory_writable=False)
        self.assertFalse(Path(f"{self.path}-shm").exists())
        before = hashlib.sha256(self.path.read_bytes()).hexdigest()
        out = self.read_as_reader()
        self.assertTrue(out["read_only"])
        self.assertServesReadsOnly(out, found=["k1"])
        self.assertEqual(hashlib.sha256(self.path.read_bytes()).hexdigest(), before)
        self.assertEqual(sorted(p.name for p in self.directory.iterdir()), ["qmem.sqlite"])

    def test_read_only_directory_while_a_writer_holds_the_log(self):
        os.chmod(self.path, 0o644)  # the -wal and -shm a writer creates take the file's mode
        writer = LocalIndex(self.path)
        self.addCleanup(writer.close)
        writer._conn.execute("PRAGMA wal_autocheckpoint = 0")
        sample(writer, "k2", "kept record two, only in the log")
        self.assertGreater(Path(f"{self.path}-wal").stat().st_size, 0)
        self.lock_down(directory_writable=False)
        out = self.read_as_reader()
        self.assertServesReadsOnly(out, found=["k1", "k2"])


#: A statement on one of the index's tables, as it appears in a string of a module.
INDEX_STATEMENT = re.compile(
    r"\b(?:FROM|INTO|UPDATE|JOIN|TABLE)\s+(?:records|records_fts|meta|import_files|import_calls)\b")


class OwnershipTests(unittest.TestCase):
    """The index's tables have one owner: localindex runs their statements (composing the row
    statements of localdb.rows, which nothing else imports), localdb.schema defines them."""

    OWNERS = ("localindex", "localdb.rows", "localdb.schema")

    def test_no_other_module_holds_a_statement_on_the_index_tables(self):
        offenders = []
        for name in modules():
            if name in self.OWNERS:
                continue
            for node in ast.walk(tree(name)):
                text = node.value if isinstance(node, ast.Constant) else None
                if isinstance(text, str) and INDEX_STATEMENT.search(text):
                    offenders.append(f"{name}:{node.lineno}")
        self.assertEqual(offenders, [])
        self.assertTrue(any(INDEX_STATEMENT.search(node.value) for node in ast.walk(tree("localdb.rows"))
                            if isinstance(node, ast.Constant) and isinstance(node.value, str)))  # it can see one

    def test_only_the_owner_composes_the_row_statements(self):
        importers = sorted(name for name in modules() if name != "localdb.rows" and "localdb.rows" in imports_of(name))
        self.assertEqual(importers, ["localindex"])


class RecordJsonTests(unittest.TestCase):
    def test_provenance_grouped(self):
        rec = Record(id="x", text="t", state="observed", coverage="full", machine="m", session_file="pi:f", tool="qmem_get")
        self.assertEqual(rec.to_json()["provenance"], {"machine": "m", "session_file": "pi:f", "tool": "qmem_get"})


if __name__ == "__main__":
    unittest.main()
