"""Benchmark the credential scanner: recall and false positives per family, and throughput.

    python scripts/bench_secretscan.py [--corpus DIR] [--size-mb 4] [--runs 5] [--module FILE]

Prints, on the corpus (``tests/corpora/secrets/*.jsonl`` by default; each line
``{"family": "...", "text": "..."}``, ``family`` null for a benign text):
  * per family: the credentials found (any finding in the text), those found under the right
    family, and the false positives (benign texts with any finding) -- targets: recall >= 0.98
    overall, false positives <= 0.5 %;
  * throughput in MB/s of ``scan`` over a large mixed text (the corpus, qmem's own sources and
    README, repeated to --size-mb), beside a baseline measured in the same run on the same text
    -- one trivial regular-expression pass, ``re.finditer(r"\\w+", text)`` -- and the ratio
    scan/baseline (medians of --runs runs).
--module loads ``scan`` from another file (an older secretscan.py, say) to compare versions.
Nothing here asserts.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import re
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def load_scan(module_file: str | None):
    if module_file is None:
        from qmem.secretscan import scan
        return scan
    spec = importlib.util.spec_from_file_location("secretscan_under_test", module_file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module.scan


def load_corpus(directory: Path) -> list[dict]:
    cases = []
    for path in sorted(directory.glob("*.jsonl")):
        with open(path, encoding="utf-8") as f:
            cases += [json.loads(line) for line in f if line.strip()]
    return cases


def quality(scan, cases: list[dict]) -> None:
    found = collections.Counter()
    right = collections.Counter()
    total = collections.Counter()
    false_positives = collections.Counter()   # by the family wrongly reported
    negatives = 0
    flagged = 0
    for case in cases:
        findings = scan(case["text"])
        family = case["family"]
        if family is None:
            negatives += 1
            if findings:
                flagged += 1
                for name in {f.family for f in findings}:
                    false_positives[name] += 1
            continue
        total[family] += 1
        found[family] += bool(findings)
        right[family] += any(f.family == family for f in findings)
    print(f"{'family':24} {'cases':>5} {'found':>6} {'right family':>13} {'recall':>7}")
    for family in sorted(total):
        print(f"{family:24} {total[family]:5} {found[family]:6} {right[family]:13} "
              f"{found[family] / total[family]:7.3f}")
    positives = sum(total.values())
    print(f"{'overall':24} {positives:5} {sum(found.values()):6} {sum(right.values()):13} "
          f"{sum(found.values()) / positives:7.3f}   (target >= 0.98)")
    print(f"right family: {sum(right.values()) / positives:.3f} of {positives} credentials "
          f"over {len(total)} families")
    print(f"false positives: {flagged} of {negatives} benign texts = {flagged / max(negatives, 1):.2%}"
          "   (target <= 0.5 %)")
    for family, count in sorted(false_positives.items()):
        print(f"  reported as {family}: {count}")


def mixed_text(cases: list[dict], size: int) -> str:
    parts = [case["text"] for case in cases]
    for path in sorted((REPO / "qmem").glob("*.py")) + [REPO / "README.md"]:
        parts.append(path.read_text(encoding="utf-8"))
    text = "\n".join(parts)
    return (text * (size // len(text) + 1))[:size]


def median_seconds(run, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def throughput(scan, cases: list[dict], size_mb: float, runs: int) -> None:
    text = mixed_text(cases, int(size_mb * 1_000_000))
    megabytes = len(text.encode("utf-8")) / 1e6
    word = re.compile(r"\w+")
    baseline = median_seconds(lambda: sum(1 for _ in word.finditer(text)), runs)
    scanned = median_seconds(lambda: scan(text), runs)
    findings = len(scan(text))
    print(f"\nthroughput on {megabytes:.1f} MB of mixed text ({findings} findings), median of {runs} runs:")
    print(f"  baseline re.finditer(r'\\w+'): {megabytes / baseline:8.1f} MB/s")
    print(f"  scan:                         {megabytes / scanned:8.1f} MB/s")
    print(f"  ratio scan/baseline:          {baseline / scanned:8.2f}")
    small = [case["text"] for case in cases]
    per_text = median_seconds(lambda: [scan(t) for t in small], runs) / len(small)
    print(f"  per corpus text (avg {sum(map(len, small)) / len(small):.0f} chars): {per_text * 1e6:.1f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=REPO / "tests" / "corpora" / "secrets",
                        help="directory of *.jsonl corpus files")
    parser.add_argument("--size-mb", type=float, default=4.0, help="size of the throughput text")
    parser.add_argument("--runs", type=int, default=5, help="runs per timing (the median is shown)")
    parser.add_argument("--module", help="a secretscan.py file to load instead of qmem.secretscan")
    args = parser.parse_args()
    scan = load_scan(args.module)
    cases = load_corpus(args.corpus)
    quality(scan, cases)
    throughput(scan, cases, args.size_mb, args.runs)


if __name__ == "__main__":
    main()
