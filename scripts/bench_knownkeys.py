"""Benchmark the redaction of qmem's own keys by value (qmem.clients.knownkeys).

    python scripts/bench_knownkeys.py [--keys 3] [--size-mb 2] [--runs 5]

For each input, prints the time of ``KnownKeys.redact`` beside a baseline measured interleaved
on the same text in the same run -- one trivial regular-expression pass,
``re.finditer(r"\\w+", text)`` -- and the ratio redact/baseline (medians of --runs runs):

  * prose: qmem's README and sources repeated to --size-mb, no key in it (the common case);
  * keyed prose: the same with a key piece every ~4 KB (13-character pieces of random keys);
  * a JSON export page: 1,000 gateway records, through ``redact_document``;
  * hostile: a run of one key's character (``a`` * n, key ``a`` * 600), the key repeated, and
    the near miss ``aaaaaaaaaaab`` repeated (every position a candidate, none a piece).

Then growth: the time per character on a hostile text ten times as long over that on the
text (1.0 for linear, 10 for quadratic), beside the same figure for the baseline.  Nothing
here asserts.
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from qmem.clients.knownkeys import KnownKeys  # noqa: E402


def baseline(text: str) -> int:
    return sum(1 for _ in re.finditer(r"\w+", text))


def timed(function, argument) -> float:
    started = time.perf_counter()
    function(argument)
    return time.perf_counter() - started


def compare(label: str, redact, text, runs: int, size: int) -> None:
    ours, base = [], []
    flat = text if isinstance(text, str) else json.dumps(text)
    for _ in range(runs):  # interleaved, so a loaded machine slows both alike
        ours.append(timed(redact, text if isinstance(text, str) else json.loads(flat)))
        base.append(timed(baseline, flat))
    mine, theirs = statistics.median(ours), statistics.median(base)
    print(f"{label:<28} {size / 1e6:7.2f} MB  redact {mine * 1000:8.1f} ms ({size / mine / 1e6:6.1f} MB/s)  "
          f"baseline {theirs * 1000:7.1f} ms  ratio {mine / theirs:6.1f}")


def growth(label: str, keys: KnownKeys, make, runs: int) -> None:
    small, large = make(100_000), make(1_000_000)
    def per_char(function, text):
        return min(timed(function, text) for _ in range(runs)) / len(text)
    ours = per_char(keys.redact, large) / per_char(keys.redact, small)
    base = per_char(baseline, large) / per_char(baseline, small)
    print(f"growth {label:<21} redact x{ours:5.2f}  baseline x{base:5.2f}  ratio {ours / base:5.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=3, help="random 48-character keys besides the hostile one")
    parser.add_argument("--size-mb", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    keys = [secrets.token_urlsafe(36) for _ in range(args.keys)]
    known = KnownKeys(keys + ["short-key"])
    source = "\n".join(p.read_text(encoding="utf-8") for p in [REPO / "README.md", *sorted((REPO / "qmem").glob("*.py"))])
    size = int(args.size_mb * 1e6)
    prose = (source * (size // len(source) + 1))[:size]
    keyed = "".join(chunk + keys[i % len(keys)][5:18] for i, chunk in
                    enumerate(prose[i:i + 4096] for i in range(0, len(prose), 4096)))
    page = {"items": [{"id": f"{i:08d}-0000-4000-8000-000000000000", "text": prose[i * 300:(i + 1) * 300],
                       "kind": "fact", "project_id": "shop", "scope": "project", "agent_id": "pi",
                       "created_at": "2026-01-01T00:00:00Z", "deleted_at": None} for i in range(1000)],
            "next_cursor": "c2VxOjEwMDA"}
    print(f"{len(keys)} random keys of 48 characters and one of 9; medians of {args.runs} runs")
    compare("prose, no key", known.redact, prose, args.runs, len(prose))
    compare("prose, a piece every 4 KB", known.redact, keyed, args.runs, len(keyed))
    compare("export page (document)", known.redact_document, page, args.runs, len(json.dumps(page)))
    hostile = KnownKeys(keys + ["a" * 600])
    n = size
    compare("hostile: a * n", hostile.redact, "a" * n, args.runs, n)
    compare("hostile: the key repeated", hostile.redact, (keys[0] * (n // len(keys[0]) + 1))[:n], args.runs, n)
    compare("hostile: near miss", hostile.redact, ("a" * 11 + "b") * (n // 12), args.runs, n)
    growth("near miss", hostile, lambda length: ("a" * 11 + "b") * (length // 12), 3)
    growth("a * n", hostile, lambda length: "a" * length, 3)


if __name__ == "__main__":
    main()
