"""Benchmark how the cost of the ``<memory-context>`` fence grows with hostile input.

    python scripts/bench_fence.py [--run 50000] [--factor 8] [--repeat 5] [--shape TEXT]

For each hostile shape of ``tests/test_fence.py`` (both ways the test renders it: plain on
several lines; casefolded, astral and on one line), ``sanitize`` runs with nothing cut (limit =
the length) at ``--run`` and ``--factor`` x ``--run`` characters.  Beside it, in the same rounds
and on the same texts, a baseline that is linear by construction: ``html.escape(text.casefold())``.
Small and large inputs, sanitize and baseline alternate within each round, so load on the
machine falls on all four alike.  Prints the best time of ``--repeat`` rounds for each, the
growth of each (large/small; ``--factor`` when linear) and the ratio of the two growths (about 1
when the fence grows as a linear pass does; a quadratic path shows as about ``--factor``).
Then the values beyond the bounds, rendered with the block's bounds: their cost should not
grow at all.  ``--shape`` keeps only the shapes whose name contains TEXT.  Nothing here asserts;
the unit test only guards against blow-ups (tests/test_fence.py, NoBlowUpTests).
"""

from __future__ import annotations

import argparse
import html
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from qmem.fence.memorycontext import EXCERPT_CHARS, PROVENANCE_CHARS, sanitize  # noqa: E402
from tests.test_fence import BEYOND_THE_BOUNDS, CASEFOLD_ASTRAL_HINTS, PLAIN_HINTS, hostile_shapes  # noqa: E402


def build(parts: list[tuple[str, int]]) -> str:
    return "".join(piece * count for piece, count in parts)


def scaled(parts: list[tuple[str, int]], factor: int) -> list[tuple[str, int]]:
    """``parts`` with every run ``factor`` times as long (single pieces stay single)."""
    return [(piece, count * factor if count > 1 else count) for piece, count in parts]


def seconds(fn, text: str) -> float:
    started = time.perf_counter()
    fn(text)
    return time.perf_counter() - started


def interleaved(fn, small: str, large: str, repeat: int) -> tuple[float, float, float, float]:
    """Best times of ``fn`` and of the baseline on ``small`` and ``large``, measured in alternation."""
    best = [float("inf")] * 4
    for _ in range(repeat):
        for slot, (measured, text) in enumerate(((fn, small), (baseline, small), (fn, large), (baseline, large))):
            best[slot] = min(best[slot], seconds(measured, text))
    return best[0], best[2], best[1], best[3]


def baseline(text: str) -> None:
    html.escape(text.casefold())


def row(label: str, n: int, times: tuple[float, float, float, float]) -> float:
    small, large, base_small, base_large = times
    growth, base_growth = large / small, base_large / base_small
    print(f"{label[:58]:58} {n:>9,} {small * 1000:9.2f} {large * 1000:9.2f} {growth:7.1f}"
          f" {base_small * 1000:8.2f} {base_large * 1000:8.2f} {base_growth:7.1f} {growth / base_growth:6.2f}")
    return growth / base_growth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=int, default=50_000, help="characters in the small input of each shape")
    parser.add_argument("--factor", type=int, default=8, help="how much longer the large input is")
    parser.add_argument("--repeat", type=int, default=5, help="rounds; the best time of each is shown")
    parser.add_argument("--shape", default="", help="only the shapes whose name contains this")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}; sanitize with limit = length; times in ms, best of {args.repeat}")
    print(f"{'shape':58} {'chars':>9} {'small':>9} {'large':>9} {'growth':>7}"
          f" {'base':>8} {'base L':>8} {'b.grow':>7} {'ratio':>6}")
    for hints in (PLAIN_HINTS, CASEFOLD_ASTRAL_HINTS):
        sanitize(hints, limit=100, single_line=False)  # compile both builds of the patterns first
    ratios = []
    shapes = {name: parts for name, parts in hostile_shapes(args.run).items() if args.shape in name}
    for name, parts in shapes.items():
        for hints, single_line, label in ((PLAIN_HINTS, False, name),
                                          (CASEFOLD_ASTRAL_HINTS, True, f"{name}, casefolded, one line")):
            small = hints + build(parts)
            large = hints + build(scaled(parts, args.factor))
            times = interleaved(lambda text: sanitize(text, limit=len(text), single_line=single_line),
                                small, large, args.repeat)
            ratios.append((row(label, len(small), times), label))
    if ratios:
        worst, label = max(ratios)
        print(f"worst growth ratio against the baseline: {worst:.2f} ({label}); "
              f"linear is about 1, quadratic about {args.factor}")
    print(f"\nbeyond the bounds (limit {EXCERPT_CHARS} for text, {PROVENANCE_CHARS} on one line): "
          "a growth about 1 means the cut comes first")
    for name, parts in BEYOND_THE_BOUNDS.items():
        if args.shape not in name:
            continue
        small = build([(piece, max(1, count // args.factor)) for piece, count in parts])
        large = build(parts)

        def bounded(text: str) -> None:
            sanitize(text, limit=EXCERPT_CHARS, single_line=False)
            sanitize(text, limit=PROVENANCE_CHARS, single_line=True)

        row(name, len(small), interleaved(bounded, small, large, args.repeat))


if __name__ == "__main__":
    main()
