"""Benchmark the local index: find latency against raw FTS5, migration, session import throughput.

    python scripts/bench_localindex.py [--records 100000] [--queries 400] [--million] [--cache DIR]

Prints, for N synthetic memory records (mixed languages, diacritics):
  * qmem ``LocalIndex.find`` p50/p95 over the queries, and in the same run on the same file a raw
    ``SELECT rowid FROM records_fts WHERE records_fts MATCH ? ORDER BY rank LIMIT 10`` of the same
    final query (the MATCH expression of find's last stage, e.g. the any-word fill) — the FTS5 floor
    qmem builds on — and the ratio qmem/raw (target p50 <= 1.3x); then both filtered to one project
    of 40 (the raw query joined to ``records`` for ``project_id``);
  * the order of equal scores: ``ORDER BY rank`` against ``ORDER BY rank, rowid`` on the final
    queries, without and with a project filter (why find uses one or the other);
  * the v2 -> current migration (re-indexing with Porter stems, then v4's time rewrite) of an index of that size;
  * session import throughput in MB/s of JSONL (target >= 20) and an unchanged re-import of 1,000 session
    files (target <= 100 ms);
  * with --million, the find figures again on 1,000,000 records.
``--cache DIR`` keeps the built indexes there (``bench-<N>-v<schema>.sqlite``) and reuses them.
Targets are printed beside the figures; nothing here asserts.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qmem.localdb.record import RECORD_COLUMNS, Observation  # noqa: E402
from qmem.localdb.schema import MIGRATIONS, SCHEMA_VERSION  # noqa: E402
from qmem.localdb.sessionimport import SessionImporter, SessionRoot  # noqa: E402
from qmem.localindex import LocalIndex  # noqa: E402
from sqltiming import TimedSQL  # noqa: E402

# A realistic vocabulary: common words of five languages (with diacritics) plus generated
# content words, drawn with a Zipf distribution, so that a query word hits hundreds or
# thousands of records — as in real notes — rather than a fixed share of all of them.
COMMON = {
    "en": "the a of to and with for on in is uses must should when after before because we it".split(),
    "it": "il la di che per con non una sono più già può perché città anche quando dopo".split(),
    "fr": "le la les des une est pour avec être à côté déjà où très après système données".split(),
    "de": "der die das und mit für ist nicht über größe übersicht schlüssel prüfung lösung".split(),
    "es": "el la los del una para con más también después índice búsqueda año señal código".split(),
}
SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "bra", "cre", "dri", "flo", "gra", "pla",
             "sto", "tre", "che", "gli", "zio", "é", "è", "à", "ü", "ö", "ñ", "ç", "ß", "ion", "ment", "ung")
TECH = ("deploy deployment gateway breaker timeout retry cache index query record memory project decision "
        "release canary rollback database migration schema vector embedding cluster config configuration "
        "token session agent network latency throughput outage incident review pipeline build test flaky "
        "benchmark docker kubernetes nginx postgres sqlite qdrant python node typescript branch commit").split()


def make_vocabulary(rng: random.Random, size: int = 40_000) -> list[str]:
    words = set(TECH)
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    vocabulary = sorted(words)
    rng.shuffle(vocabulary)
    return vocabulary


class Corpus:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.vocabulary = make_vocabulary(rng)
        weights = [1.0 / (rank + 10) ** 1.05 for rank in range(len(self.vocabulary))]
        self.cumulative = list(itertools.accumulate(weights))

    def content_word(self, rng: random.Random) -> str:
        return rng.choices(self.vocabulary, cum_weights=self.cumulative)[0]

    def text(self) -> str:
        rng = self.rng
        lang = rng.choice(list(COMMON))
        sentences = []
        for _ in range(rng.randint(1, 3)):
            words = [rng.choice(COMMON[lang]) if rng.random() < 0.4 else self.content_word(rng)
                     for _ in range(rng.randint(8, 22))]
            words.append(str(rng.randint(1, 9999)))
            sentences.append(" ".join(words).capitalize() + ".")
        return " ".join(sentences)


def build(path: Path, count: int, corpus: Corpus) -> float:
    started = time.perf_counter()
    with LocalIndex(path) as index:
        batch = []
        for i in range(count):
            batch.append(Observation(
                id=f"g-{i}", text=corpus.text(), state="synced", kind=("fact", "decision", "episode")[i % 3],
                project_id=f"project-{i % 40}", created_at="2026-11-01T00:00:00Z",
                superseded_by=f"g-{i + 1}" if i % 50 == 0 else None))
            if len(batch) == 5000:
                index.learn(batch)
                batch = []
        if batch:
            index.learn(batch)
        index._conn.execute("INSERT INTO records_fts(records_fts) VALUES ('optimize')")
    return time.perf_counter() - started


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.95) - 1]


RAW = "SELECT rowid FROM records_fts WHERE records_fts MATCH ? ORDER BY rank LIMIT 10"
RAW_PROJECT = ("SELECT r.rowid FROM records_fts JOIN records AS r ON r.rowid = records_fts.rowid "
               "WHERE records_fts MATCH ? AND r.project_id = ? ORDER BY rank LIMIT 10")


def bench_find(path: Path, queries: list[str], *, projects: int = 0) -> dict[str, Any]:
    """find against raw FTS5 of find's final MATCH expression, query by query, same file.

    ``projects``: when non-zero, every find is filtered to one of that many projects, and
    the raw query is filtered the same way (a join on ``records.project_id``).
    """
    rng = random.Random(3)
    index = LocalIndex(path)
    raw = sqlite3.connect(str(path))
    for q in queries[:20]:  # warm both caches the same way
        index.find(q)
        raw.execute(RAW, (q,)).fetchall()
    qmem_t, raw_t, finals, partial = [], [], [], 0
    with TimedSQL(index) as timed:
        for q in queries:
            project = f"project-{rng.randrange(projects)}" if projects else None
            t0 = time.perf_counter()
            result = index.find(q, project=project)
            t1 = time.perf_counter()
            if project is None:
                raw.execute(RAW, (timed.last_match,)).fetchall()
            else:
                raw.execute(RAW_PROJECT, (timed.last_match, project)).fetchall()
            t2 = time.perf_counter()
            qmem_t.append((t1 - t0) * 1000)
            raw_t.append((t2 - t1) * 1000)
            finals.append(timed.last_match)
            partial += result.partial
    index.close()
    raw.close()
    q50, q95 = percentiles(qmem_t)
    r50, r95 = percentiles(raw_t)
    return {"qmem_p50": q50, "qmem_p95": q95, "raw_p50": r50, "raw_p95": r95, "partial": partial,
            "finals": finals}


def bench_tie_order(path: Path, finals: list[str]) -> dict[str, tuple[float, float]]:
    """p50/p95 of find's SQL shape ordered by rank alone and by rank then rowid."""
    conn = sqlite3.connect(str(path))
    columns = ", ".join("r." + c for c in RECORD_COLUMNS)
    rng = random.Random(5)
    figures = {}
    for label, project in (("no filter", False), ("project filter", True)):
        for order in ("records_fts.rank", "records_fts.rank, r.rowid"):
            sql = (f"SELECT {columns} FROM records_fts JOIN records AS r ON r.rowid = records_fts.rowid "
                   f"WHERE records_fts MATCH :m AND r.superseded_by IS NULL AND r.private = 0 "
                   f"{'AND r.project_id = :p ' if project else ''}ORDER BY {order} LIMIT 11")
            samples = []
            for m in finals:
                t0 = time.perf_counter()
                conn.execute(sql, {"m": m, "p": f"project-{rng.randrange(40)}"}).fetchall()
                samples.append((time.perf_counter() - t0) * 1000)
            figures[f"{label}: ORDER BY {order.replace('records_fts.', '').replace('r.', '')}"] = percentiles(samples)
    conn.close()
    return figures


def bench_migration(path: Path, count: int, corpus: Corpus) -> float:
    """Seconds to open a v2 index of ``count`` records (the v3 migration re-indexes them all)."""
    conn = sqlite3.connect(str(path))
    for script in MIGRATIONS[:2]:
        conn.executescript(script)
    conn.execute("PRAGMA user_version = 2")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executemany(
        "INSERT INTO records (id, text, state, coverage, content_hash, learned_at) VALUES (?, ?, 'synced', 'full', "
        "'h', '2026-11-01T00:00:00Z')", ((f"g-{i}", corpus.text()) for i in range(count)))
    conn.commit()
    conn.close()
    t0 = time.perf_counter()
    with LocalIndex(path):
        pass
    return time.perf_counter() - t0


def make_queries(path: Path, n: int) -> list[str]:
    """1-3 words of one stored record each, as a user looks for something they remember.

    Words of four letters or more, so that they are content words rather than glue; the
    answer is therefore usually complete (the count of partial answers is printed).
    """
    rng = random.Random(7)
    conn = sqlite3.connect(str(path))
    total = conn.execute("SELECT max(rowid) FROM records").fetchone()[0]
    queries = []
    while len(queries) < n:
        row = conn.execute("SELECT text FROM records WHERE rowid = ?", (rng.randint(1, total),)).fetchone()
        words = [w.strip(".,") for w in row[0].split() if len(w.strip(".,")) >= 4 and not w[0].isdigit()]
        if words:
            queries.append(" ".join(rng.sample(words, min(len(words), rng.randint(1, 3)))))
    conn.close()
    return queries


def write_sessions(root: Path, files: int, target_bytes: int, corpus: Corpus) -> int:
    """pi-format sessions: mostly ordinary traffic, some qmem calls; returns bytes written."""
    total = 0
    per_file = target_bytes // files
    for f in range(files):
        directory = root / "sessions" / f"--work-p{f % 20}--"
        directory.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps({"type": "session", "version": 3, "id": f"s{f}", "cwd": "/w"})]
        size = 0
        n = 0
        while size < per_file:
            n += 1
            if n % 10 == 0:
                call = f"c{f}-{n}"
                rid = f"g-{f}-{n}"
                lines.append(json.dumps({"type": "message", "id": f"a{n}", "message": {"role": "assistant", "content": [
                    {"type": "toolCall", "id": call, "name": "qmem_store",
                     "arguments": {"text": corpus.text(), "project_id": "p"}}]}}))
                lines.append(json.dumps({"type": "message", "id": f"r{n}", "message": {
                    "role": "toolResult", "toolCallId": call, "toolName": "qmem_store",
                    "content": [{"type": "text", "text": "stored"}],
                    "details": {"qmem": 1, "record": {"id": rid, "text": corpus.text(), "project_id": "p"}}}}))
            else:
                output = "\n".join(corpus.text() for _ in range(corpus.rng.randint(2, 12)))
                lines.append(json.dumps({"type": "message", "id": f"m{n}", "message": {
                    "role": "toolResult", "toolCallId": f"x{n}", "toolName": "bash",
                    "content": [{"type": "text", "text": output}], "isError": False}}))
            size += len(lines[-1]) + 1
        data = ("\n".join(lines) + "\n").encode()
        (directory / f"session-{f}.jsonl").write_bytes(data)
        total += len(data)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--session-mb", type=int, default=64)
    parser.add_argument("--million", action="store_true", help="also measure find on 1,000,000 records")
    parser.add_argument("--cache", type=Path, help="keep and reuse the built indexes in this directory")
    args = parser.parse_args()
    corpus = Corpus(random.Random(42))
    print(f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}")
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        sizes = [args.records] + ([1_000_000] if args.million else [])
        for count in sizes:
            cached = args.cache / f"bench-{count}-v{SCHEMA_VERSION}.sqlite" if args.cache else None
            if cached is not None and cached.exists():
                path, built = cached, "reused from the cache"
            else:
                path = tmpdir / f"bench-{count}.sqlite"
                built = f"built in {build(path, count, corpus):.1f} s"
                if cached is not None:  # moved in only once complete
                    cached.parent.mkdir(parents=True, exist_ok=True)
                    path = Path(shutil.move(str(path), str(cached)))
            queries = make_queries(path, args.queries)
            print(f"\nfind on {count:,} records ({built}, {path.stat().st_size / 1e6:.0f} MB), {len(queries)} queries:")
            for projects in (0, 40):
                figures = bench_find(path, queries, projects=projects)
                ratio = figures["qmem_p50"] / figures["raw_p50"]
                print(f"  {'no filter' if not projects else 'one project of 40'}: "
                      f"{figures['partial']} answered partially")
                print(f"    qmem find   p50 {figures['qmem_p50']:.3f} ms   p95 {figures['qmem_p95']:.3f} ms")
                print(f"    raw FTS5    p50 {figures['raw_p50']:.3f} ms   p95 {figures['raw_p95']:.3f} ms"
                      f"   (same final MATCH{', same project' if projects else ''})")
                print(f"    qmem/raw    p50 {ratio:.2f}x   p95 {figures['qmem_p95'] / figures['raw_p95']:.2f}x"
                      f"   (target p50 <= 1.3x)")
                if not projects:
                    finals = figures["finals"]
            print("  order of equal scores, find's SQL on the final queries (p50 / p95 ms):")
            for label, (p50, p95) in bench_tie_order(path, finals).items():
                print(f"    {label:42s} {p50:7.3f} / {p95:7.3f}")
            seconds = bench_migration(tmpdir / f"v2-{count}.sqlite", count, corpus)
            print(f"  v2 -> v{SCHEMA_VERSION} migration of {count:,} records: {seconds:.1f} s")
            (tmpdir / f"v2-{count}.sqlite").unlink()

        sessions = tmpdir / "pi-agent"
        written = write_sessions(sessions, 200, args.session_mb * 1_000_000, corpus)
        root = SessionRoot("pi", "pi", sessions, ("sessions/*/*.jsonl",))
        with LocalIndex(tmpdir / "import.sqlite") as index:
            t0 = time.perf_counter()
            report = SessionImporter(index).run([root])
            seconds = time.perf_counter() - t0
        print(f"\nsession import: {written / 1e6:.1f} MB in {report.files} files, {seconds:.2f} s = "
              f"{written / 1e6 / seconds:.1f} MB/s (target >= 20); records added {report.records_added}")

        many = tmpdir / "many-agent"
        write_sessions(many, 1000, 1000 * 4000, corpus)
        root = SessionRoot("pi", "pi", many, ("sessions/*/*.jsonl",))
        with LocalIndex(tmpdir / "many.sqlite") as index:
            SessionImporter(index).run([root])
            timings = []
            for _ in range(5):
                t0 = time.perf_counter()
                report = SessionImporter(index).run([root])
                timings.append((time.perf_counter() - t0) * 1000)
        print(f"unchanged re-import of {report.files} files: median {statistics.median(timings):.1f} ms "
              f"(min {min(timings):.1f}) (target <= 100 ms); unchanged {report.unchanged}")


if __name__ == "__main__":
    main()
