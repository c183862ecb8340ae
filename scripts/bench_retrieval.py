"""Retrieval quality of the local index on long dialogue memory (LoCoMo), beside Okapi BM25.

    python scripts/bench_retrieval.py [--data ../shared/testdata/locomo_dev.json] [--subprocess 20]

Reads the LoCoMo development set from ``../shared/testdata/`` (CC BY-NC 4.0: read from
there, never copied into this repository; without it the script says so and exits 0) and
scores it as ``../shared/testdata/README.md`` says: every dialogue turn is one record
(id ``locomo-<sample_id>-<dia_id>``, project ``<sample_id>``, text ``"<speaker>: <text>"``
plus ``" [shares a photo: <caption>]"``); each question of categories 1-4 with evidence is
asked within its own project for the top 10; recall@k is the share of a question's
evidence turns in its top k, averaged over questions.

Prints, all measured in this run:
  * R@1/5/10 of the real ``LocalIndex.find`` path: a real index in a temporary file, the
    turns learned with ``LocalIndex.learn`` as any gateway answer is (goal R@10 >= 0.60);
  * R@1/5/10 of Okapi BM25 computed here (k1 1.2, b 0.75, ``\\w+`` lower-cased tokens,
    statistics per conversation), with the classic Robertson-Sparck Jones idf (the
    reference) and with the non-negative idf ``log(1 + (N - n + 0.5) / (n + 0.5))``;
  * SQL p50 per question: the time spent inside SQLite (execute + fetch) by ``find``
    (goal <= 1 ms), ``find`` in-process p50, and the raw FTS5 floor
    ``SELECT rowid ... MATCH <find's final expression> ORDER BY rank LIMIT 10``;
  * whole-command p50: ``qmem.local.run(["find", "--json", "--project", P, "--", Q])``
    in-process (new Runtime, config, index open, search, JSON) for every question, and
    ``python -m qmem.local find --json`` as a subprocess for ``--subprocess`` questions.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from qmem import local  # noqa: E402
from qmem.localdb.lexical import match_expression, query_terms  # noqa: E402
from qmem.localdb.record import Observation  # noqa: E402
from qmem.localindex import LocalIndex  # noqa: E402
from sqltiming import TimedSQL  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "testdata" / "locomo_dev.json"
K1, B = 1.2, 0.75


def load(path: Path) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, list[str]]]]:
    """(record id, project, text) per turn and (project, question, evidence ids) per question."""
    samples = json.loads(path.read_text(encoding="utf-8"))
    records, questions = [], []
    for sample in samples:
        sid = sample["sample_id"]
        conversation = sample["conversation"]
        for key, turns in conversation.items():
            if not (key.startswith("session_") and isinstance(turns, list)):
                continue
            for turn in turns:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shares a photo: {turn['blip_caption']}]"
                records.append((f"locomo-{sid}-{turn['dia_id']}", sid, text))
        for qa in sample["qa"]:
            if qa.get("category") not in (1, 2, 3, 4) or not qa.get("evidence"):
                continue
            evidence: list[str] = []
            for entry in qa["evidence"]:
                for part in str(entry).split(";"):
                    rid = f"locomo-{sid}-{part.strip()}"
                    if part.strip() and rid not in evidence:
                        evidence.append(rid)
            if evidence:
                questions.append((sid, str(qa["question"]), evidence))
    return records, questions


def recall(questions: list[tuple[str, str, list[str]]], ranked: list[list[str]]) -> dict[int, float]:
    return {k: sum(len(set(top[:k]) & set(ev)) / len(ev) for (_, _, ev), top in zip(questions, ranked))
            / len(questions) for k in (1, 5, 10)}


def okapi(records, questions, *, classic: bool) -> list[list[str]]:
    """Okapi BM25 per conversation; ties keep dialogue order."""
    tokens = lambda text: re.findall(r"\w+", text.lower())  # noqa: E731
    by_project: dict[str, list[tuple[str, collections.Counter]]] = collections.defaultdict(list)
    for rid, project, text in records:
        by_project[project].append((rid, collections.Counter(tokens(text))))
    stats = {}
    for project, docs in by_project.items():
        n = len(docs)
        avgdl = sum(sum(c.values()) for _, c in docs) / n
        df = collections.Counter(word for _, c in docs for word in c)
        stats[project] = (docs, n, avgdl, df)
    ranked = []
    for project, question, _ in questions:
        docs, n, avgdl, df = stats[project]
        words = tokens(question)
        scored = []
        for position, (rid, counts) in enumerate(docs):
            length = sum(counts.values())
            score, hit = 0.0, False
            for word in words:
                tf = counts.get(word, 0)
                if not tf:
                    continue
                hit = True
                ratio = (n - df[word] + 0.5) / (df[word] + 0.5)
                idf = math.log(ratio) if classic else math.log(1 + ratio)
                score += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avgdl))
            if hit:
                scored.append((-score, position, rid))
        scored.sort()
        ranked.append([rid for _, _, rid in scored[:10]])
    return ranked


def p50(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--subprocess", type=int, default=20, help="questions to time as a subprocess (0: none)")
    args = parser.parse_args()
    if not args.data.is_file():
        print(f"skipped: the LoCoMo development set is not at {args.data} (it is read from ../shared/testdata/, "
              f"never stored in this repository)")
        return 0
    records, questions = load(args.data)
    print(f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}; {len(records)} turns in "
          f"{len({r[1] for r in records})} conversations, {len(questions)} questions")

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        path = home / "retrieval.sqlite"
        with LocalIndex(path) as index:
            index.learn([Observation(id=rid, text=text, project_id=project, state="synced", kind="episode")
                         for rid, project, text in records])
        index = LocalIndex(path)
        raw = sqlite3.connect(str(path))
        for _, question, _ in questions[:20]:  # warm the caches of both connections
            index.find(question, limit=10)
        ranked, sql_t, find_t, raw_t, partial = [], [], [], [], 0
        with TimedSQL(index) as timed:
            for project, question, _ in questions:
                timed.spent = 0.0
                started = time.perf_counter()
                result = index.find(question, project=project, limit=10)
                find_t.append(time.perf_counter() - started)
                sql_t.append(timed.spent)
                ranked.append([r.id for r in result.records])
                partial += result.partial
                final = timed.last_match or match_expression(query_terms(question).terms)
                started = time.perf_counter()
                raw.execute("SELECT rowid FROM records_fts WHERE records_fts MATCH ? ORDER BY rank LIMIT 10",
                            (final,)).fetchall()
                raw_t.append(time.perf_counter() - started)
        index.close()
        raw.close()

        env = {k: v for k, v in os.environ.items() if not k.startswith(("QMEM_", "XDG_"))}
        env.update(HOME=str(home), QMEM_SQLITE=str(path), PYTHONPATH=str(REPO))
        command_t = []
        for project, question, _ in questions:
            started = time.perf_counter()
            outcome = local.run(["find", "--json", "--project", project, "--", question], env=env)
            command_t.append(time.perf_counter() - started)
            if outcome.code != 0:
                print(f"find failed: {outcome.error}")
                return 1
        process_t = []
        for project, question, _ in questions[:args.subprocess]:
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "qmem.local", "find", "--json", "--project", project, "--",
                            question], env=env, cwd=str(home), capture_output=True, check=True)
            process_t.append(time.perf_counter() - started)

    rows = [("qmem find (real path)", recall(questions, ranked)),
            ("Okapi BM25, classic idf (reference)", recall(questions, okapi(records, questions, classic=True))),
            ("Okapi BM25, idf log(1+x)", recall(questions, okapi(records, questions, classic=False)))]
    print(f"\n{'':38s}  R@1    R@5    R@10")
    for label, r in rows:
        print(f"{label:38s}  {r[1]:.3f}  {r[5]:.3f}  {r[10]:.3f}")
    reference = rows[1][1][10]
    print(f"R@10 qmem - reference: {rows[0][1][10] - reference:+.3f}   (goal: qmem R@10 >= 0.60); "
          f"{partial} of {len(questions)} answers partial")
    okapi_ranked = okapi(records, questions, classic=True)
    print("per conversation, R@10 qmem / reference (the gain should not hang on one of them):")
    for project in sorted({q[0] for q in questions}):
        picked = [i for i, q in enumerate(questions) if q[0] == project]
        subset = [questions[i] for i in picked]
        mine = recall(subset, [ranked[i] for i in picked])[10]
        theirs = recall(subset, [okapi_ranked[i] for i in picked])[10]
        print(f"  {project:10s} {len(picked):4d} questions  {mine:.3f} / {theirs:.3f}  ({mine - theirs:+.3f})")
    print(f"\nSQL inside find      p50 {p50(sql_t):.3f} ms   (goal <= 1 ms)")
    print(f"find() in-process    p50 {p50(find_t):.3f} ms")
    print(f"raw FTS5 final query p50 {p50(raw_t):.3f} ms   find/raw {p50(find_t) / p50(raw_t):.2f}x")
    print(f"whole command        p50 {p50(command_t):.2f} ms   (qmem.local.run in-process: runtime, open, find, JSON)")
    if process_t:
        print(f"whole command        p50 {p50(process_t):.1f} ms   (python -m qmem.local find --json, subprocess, "
              f"{len(process_t)} questions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
