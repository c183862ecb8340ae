import hashlib
import sqlite3
import unittest
from pathlib import Path

from qmem.errors import CorruptIndexError, InputError, LocalIndexError
from qmem.localindex import (
    SCHEMA_VERSION, LocalIndex, Observation, Record, match_expression, merge_observation, query_terms,
)

from .support import TempHomeTestCase

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
    def test_wal_user_version_and_private_file(self):
        conn = sqlite3.connect(self.path)
        self.addCleanup(conn.close)
        self.assertEqual(conn.execute("PRAGMA journal_mode").fetchone()[0], "wal")
        self.assertEqual(conn.execute("PRAGMA user_version").fetchone()[0], SCHEMA_VERSION)
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'records_fts'").fetchone()[0]
        self.assertIn("unicode61 remove_diacritics 2", sql)
        self.assertIn("prefix", sql)
        self.assertEqual(self.path.stat().st_mode & 0o777, 0o600)

    def test_migrates_a_v1_file_keeping_its_records(self):
        from qmem.localindex import _MIGRATIONS

        path = self.home / "v1.sqlite"
        conn = sqlite3.connect(path)
        conn.executescript(_MIGRATIONS[0])
        conn.execute("INSERT INTO records (id, text, state, coverage, content_hash, learned_at) "
                     "VALUES ('old', 'made by schema one', 'synced', 'full', 'h', 'now')")
        conn.execute("PRAGMA user_version = 1")
        conn.commit()
        conn.close()
        with LocalIndex(path) as index:
            self.assertEqual(index.find("schema one").records[0].id, "old")
        conn = sqlite3.connect(path)
        self.addCleanup(conn.close)
        self.assertEqual(conn.execute("PRAGMA user_version").fetchone()[0], SCHEMA_VERSION)
        self.assertIsNotNone(conn.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'records_superseded_by'").fetchone())

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

    def test_all_words_first(self):
        result = self.index.find("deploy gateway")
        self.assertEqual([r.id for r in result.records], ["r1"])
        self.assertFalse(result.partial)

    def test_any_word_fallback_is_labelled_partial(self):
        result = self.index.find("gateway unicorn")
        self.assertTrue(result.partial)
        self.assertEqual(sorted(r.id for r in result.records), ["r1", "r3"])
        self.assertEqual(result.to_json()["match"], "any")

    def test_diacritics_and_prefixes(self):
        self.assertEqual(self.ids("citta"), ["r2"])
        self.assertEqual(self.ids("PERCHE"), ["r2"])
        result = self.index.find("configur gate")  # no exact word: every word as a prefix
        self.assertEqual(([r.id for r in result.records], result.match), (["r3"], "all-prefix"))
        self.assertFalse(result.partial)

    def test_exact_words_are_preferred_to_prefixes(self):
        sample(self.index, "r5", "deploy notes")
        sample(self.index, "r6", "deployment notes")
        result = self.index.find("deploy notes")
        self.assertEqual(([r.id for r in result.records], result.match), (["r5"], "all"))
        self.assertEqual(self.index.find("deplo notes").match, "all-prefix")
        # A longer word is not a prefix match: only "circuit" matches, so the answer is partial.
        result = self.index.find("breakers circuit")
        self.assertEqual(([r.id for r in result.records], result.partial), (["r2"], True))

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
                    self.assertIn("no words", str(exc))
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
        from qmem.outbox import Outbox
        from qmem.records import NewRecord

        pending = Outbox(self.index).enqueue(NewRecord(text="queued gateway note", project_id="alpha"))
        result = self.index.find("queued gateway")
        self.assertEqual([r.id for r in result.records], [pending.id])
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
        before = (self.digest(path), path.stat().st_size, path.stat().st_mtime_ns)
        with self.assertRaises(error) as caught:
            LocalIndex(path)
        message = str(caught.exception)
        self.assertNotIn(str(path.parent), message)
        self.assertEqual(before, (self.digest(path), path.stat().st_size, path.stat().st_mtime_ns))
        self.assertFalse(Path(str(path) + "-wal").exists() and Path(str(path) + "-wal").stat().st_size)
        return message

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

    def test_newer_schema(self):
        path = self.home / "new.sqlite"
        with LocalIndex(path):
            pass
        conn = sqlite3.connect(path)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        conn.close()
        with self.assertRaises(LocalIndexError) as caught:
            LocalIndex(path)
        self.assertIn("newer qmem", str(caught.exception))

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


class RecordJsonTests(unittest.TestCase):
    def test_provenance_grouped(self):
        rec = Record(id="x", text="t", state="observed", coverage="full", machine="m", session_file="pi:f", tool="qmem_get")
        self.assertEqual(rec.to_json()["provenance"], {"machine": "m", "session_file": "pi:f", "tool": "qmem_get"})


if __name__ == "__main__":
    unittest.main()
