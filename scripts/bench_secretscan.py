"""Benchmark the credential scanner: recall and false positives per family, throughput and growth.

    python scripts/bench_secretscan.py [--corpus DIR] [--size-mb 4] [--runs 5] [--growth-runs 3]
                                       [--module FILE|DIR]

Prints, on the corpus (``tests/corpora/secrets/*.jsonl`` by default; each line
``{"family": "...", "text": "..."}``, ``family`` null for a benign text):
  * per family: the credentials found (any finding in the text), those found under the right
    family, and the false positives (benign texts with any finding) -- targets: recall >= 0.98
    overall, false positives <= 0.5 %;
  * throughput in MB/s of ``scan`` over a large mixed text (the corpus, qmem's own sources and
    README, repeated to --size-mb), beside a baseline measured in the same run on the same text
    -- one trivial regular-expression pass, ``re.finditer(r"\\w+", text)`` -- and the ratio
    scan/baseline (medians of --runs runs);
  * the first use in a fresh process: importing the scanner and scanning one short text, in ms
    (what a CLI store, a flush or a session's first prompt pays once), beside importing ``json``
    and encoding one value, timed inside the same processes, interleaved (medians of 10 each);
  * the corpus of forms (``tests/corpora/secrets/forms``): recall and false positives of its
    tune half (per form with --detail) and of its held-out half (the two figures only: the
    scanner is never tuned on it);
  * growth on hostile input (the inputs of tests/test_secretscan.py's backtracking tests): the
    scan's time per character on a text about ten times as long over that on the text -- 1.0 for
    a linear scan, 10 for a quadratic one -- beside the same figure for a baseline that does the
    same work for every character, ``re.finditer(r"(?s).", text)``, measured interleaved with it
    (least times of --growth-runs runs; 0 skips this part), and their ratio.
--module loads ``scan`` from another version: a secretscan.py file (from before the scanner was
split into modules) or a checkout's directory (its qmem package is loaded under another name).
Nothing here asserts.
"""

from __future__ import annotations

import argparse
import collections
import gc
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def load_scan(module_path: str | None):
    if module_path is None:
        from qmem.secretscan.engine import scan
        return scan
    path = Path(module_path)
    if path.is_dir():  # a checkout: its package, under a name that cannot clash with ours
        package = path / "qmem"
        spec = importlib.util.spec_from_file_location("qmem_under_test", package / "__init__.py",
                                                      submodule_search_locations=[str(package)])
        sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[spec.name])
        under_test = importlib.import_module("qmem_under_test.secretscan")
        return getattr(under_test, "scan", None) or importlib.import_module("qmem_under_test.secretscan.engine").scan
    spec = importlib.util.spec_from_file_location("secretscan_under_test", path)
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


def overlaps(finding, text: str, secret: str | None) -> bool:
    """Whether *finding* overlaps the credential's part of *text* (any finding, without one)."""
    at = text.find(secret) if secret else -1
    return at == -1 or (finding.start < at + len(secret) and finding.end > at)


def summary(scan, cases: list[dict]) -> tuple[int, int, int, int]:
    """(credentials found, credentials, benign texts flagged, benign texts): a credential is
    found when a finding overlaps its ``secret`` part."""
    found = positives = flagged = negatives = 0
    for case in cases:
        findings = scan(case["text"])
        if case["family"] is None:
            negatives += 1
            flagged += bool(findings)
        else:
            positives += 1
            found += any(overlaps(f, case["text"], case.get("secret")) for f in findings)
    return found, positives, flagged, negatives


def forms_quality(scan, forms: Path, detail: bool) -> None:
    """The corpus of forms: the tune half per form (what tuning may look at), the held-out half
    as its two figures only (what tuning must never look at)."""
    for half in ("tune", "heldout"):
        path = forms / f"{half}.jsonl"
        if not path.exists():
            continue
        with open(path, encoding="utf-8") as f:
            cases = [json.loads(line) for line in f if line.strip()]
        found, positives, flagged, negatives = summary(scan, cases)
        print(f"\nforms, {half} half: recall {found / max(positives, 1):.3f} ({found} of {positives} credentials "
              f"over {len({c['family'] for c in cases if c['family']})} forms), false positives "
              f"{flagged / max(negatives, 1):.2%} ({flagged} of {negatives} benign texts)"
              "   (targets >= 0.98, <= 0.5 %)")
        if half == "tune" and detail:
            by_form: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
            for case in cases:
                key = case["family"] or f"benign:{case['form']}"
                hit = summary(scan, [case])
                by_form[key][0] += hit[0] + hit[2]
                by_form[key][1] += 1
            for key, (bad_or_found, total) in sorted(by_form.items()):
                print(f"  {key:44} {bad_or_found:3} of {total:3} {'flagged' if key.startswith('benign:') else 'found'}")


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


FIRST_USE = """
import sys, time
sys.path.insert(0, sys.argv[1])
started = time.perf_counter()
if sys.argv[2] == "scan":
    from qmem.secretscan.engine import scan
    scan("deploys of the billing service use blue-green switching since March")
else:
    import json
    json.dumps({"deploys": "blue-green"})
print((time.perf_counter() - started) * 1000)
"""


def first_use(checkout: Path, rounds: int = 10) -> None:
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    times: dict[str, list[float]] = {"scan": [], "json": []}
    for round_number in range(rounds + 1):  # the first round writes the byte-code caches and is not counted
        for kind in times:
            done = subprocess.run([sys.executable, "-c", FIRST_USE, str(checkout), kind], capture_output=True,
                                  text=True, check=True, env=env)
            if round_number:
                times[kind].append(float(done.stdout))
    scan_ms, json_ms = statistics.median(times["scan"]), statistics.median(times["json"])
    print(f"\nfirst use in a fresh process (medians of {rounds}, interleaved): import and one short scan "
          f"{scan_ms:.1f} ms; import json and one dumps {json_ms:.1f} ms; ratio {scan_ms / json_ms:.1f}")


def timed(run) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def calls_for(function, text: str, seconds: float = 0.005) -> int:
    """How many calls on *text* take about *seconds*: a timing shorter than that is mostly noise."""
    return max(1, round(seconds / max(timed(lambda: function(text)), 1e-7)))


def growth_of(functions: dict, short: str, long: str, runs: int) -> dict[str, float]:
    """Per function: its time per character on *long* over that on *short*, from the least time of
    ``n`` calls on *long* and of ``10 n`` calls on *short*; the functions are measured in turn
    within each run, so that the load on the machine weighs on each alike (and the least time is
    the one the load disturbed least)."""
    calls = {name: calls_for(function, long) for name, function in functions.items()}
    tens = {name: [] for name in functions}
    ones = {name: [] for name in functions}
    for _ in range(runs):
        for name, function in functions.items():
            n = calls[name]
            tens[name].append(timed(lambda: [function(short) for _ in range(10 * n)]))
            ones[name].append(timed(lambda: [function(long) for _ in range(n)]))
    return {name: (min(ones[name]) / len(long)) / (min(tens[name]) / (10 * len(short))) for name in functions}


def growth(scan, runs: int) -> None:
    # The backtracking tests' hostile inputs, made at two sizes.
    from tests import test_secretscan as hostile
    # The baseline does the same work for every character (r"\w+" would do less on long runs).
    character = re.compile(r"(?s).")
    functions = {"scan": scan, "baseline": lambda text: sum(1 for _ in character.finditer(text))}
    groups = [
        ("hostile pieces", hostile.piece_inputs, 10_000),
        ("rule samples", lambda size: ((label, text) for label, text in hostile.rule_inputs(size)
                                       if label.endswith(("repeated", "spaced"))), 2_000),
        # A hundred values a text, so that the work on the values outweighs the cost of a call.
        ("long values", lambda size: ((label, (text + "\n") * 100) for label, text in hostile.value_inputs(size)),
         50),
    ]
    print(f"\ngrowth on hostile input: time per character on a text about 10x as long / on the text "
          f"(1.0 linear, 10 quadratic), least of {runs} runs, the baseline interleaved:")
    worst = (0.0, "")
    enabled = gc.isenabled()
    gc.disable()  # a collection inside one run would be noise, not growth
    try:
        for name, inputs, size in groups:
            rows = []
            pairs = {label: (short, long) for (label, short), (_, long) in zip(inputs(size), inputs(10 * size))}

            def row(label: str, runs: int) -> tuple[float, float, float, str]:
                figures = growth_of(functions, *pairs[label], runs)
                return figures["scan"] / figures["baseline"], figures["scan"], figures["baseline"], label

            rows = sorted((row(label, runs) for label in pairs), reverse=True)
            # A high figure may be a moment of load: measure the highest again, three times as long.
            rows = sorted([row(label, 3 * runs) for *_, label in rows[:5]] + rows[5:], reverse=True)
            print(f"  {name}: {len(rows)} inputs, sizes {size:,} and {10 * size:,}; median growth "
                  f"{statistics.median(r[1] for r in rows):.2f}, baseline {statistics.median(r[2] for r in rows):.2f}"
                  f"; the highest ratios:")
            for ratio, scan_growth, base_growth, label in rows[:3]:
                print(f"    ratio {ratio:5.2f}  growth {scan_growth:5.2f}  baseline {base_growth:5.2f}  {label}")
            worst = max(worst, (rows[0][0], f"{name}: {rows[0][3]}"))
    finally:
        if enabled:
            gc.enable()
    print(f"  highest ratio of growths scan/baseline: {worst[0]:.2f} ({worst[1]})")


def main() -> None:
    from cleanrun import rerun_on_clean_interpreter

    rerun_on_clean_interpreter()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=REPO / "tests" / "corpora" / "secrets",
                        help="directory of *.jsonl corpus files")
    parser.add_argument("--size-mb", type=float, default=4.0, help="size of the throughput text")
    parser.add_argument("--runs", type=int, default=5, help="runs per timing (the median is shown)")
    parser.add_argument("--growth-runs", type=int, default=3, help="runs per growth figure (0: none)")
    parser.add_argument("--forms", type=Path, default=REPO / "tests" / "corpora" / "secrets" / "forms",
                        help="directory of the corpus of forms (tune.jsonl, heldout.jsonl)")
    parser.add_argument("--detail", action="store_true", help="per form figures of the tune half")
    parser.add_argument("--quality-only", action="store_true", help="recall and false positives only")
    parser.add_argument("--module", help="a secretscan.py file, or a checkout's directory, whose scan "
                                         "to measure instead of this one's")
    args = parser.parse_args()
    scan = load_scan(args.module)
    cases = load_corpus(args.corpus)
    quality(scan, cases)
    forms_quality(scan, args.forms, args.detail)
    if args.quality_only:
        return
    throughput(scan, cases, args.size_mb, args.runs)
    if args.module is None or Path(args.module).is_dir():
        first_use(REPO if args.module is None else Path(args.module))
    if args.growth_runs > 0:
        growth(scan, args.growth_runs)


if __name__ == "__main__":
    main()
