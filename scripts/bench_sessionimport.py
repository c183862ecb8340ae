"""Benchmark ``qmem.local import`` as the session hooks run it: nothing new, and a 1 MB append.

    python scripts/bench_sessionimport.py [--files 40] [--rounds 7] [--python PATH]

Builds a HOME whose pi agent directory holds ``--files`` session files (pi's format, written by
``tests/sessionfiles.py``, with qmem tool calls among ordinary messages), imports them once, then
times whole processes, interleaved round by round on a clean interpreter (``scripts/cleanrun.py``):
  * ``import``: ``python -m qmem.local import`` with nothing new;
  * ``floor``: a ``python -c`` that imports ``sqlite3`` and ``json``, opens the same index, reads
    its import offsets and stats every session file: what an import with nothing new must do;
  * ``append``: ``import`` right after 1 MB of new session lines was appended to one file;
  * ``parse``: a ``python -c`` that reads those same 1 MB (appended again, to a copy) and parses
    every line with ``json.loads``.
It prints p50 and the spread (min–max) of each, and the ratios import / floor (target <= 1.5x)
and append / parse (target <= 2x).  Nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.sessionfiles import SessionFile  # noqa: E402

FLOOR = """
import json, os, sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
known = dict(conn.execute("SELECT key, offset FROM import_files"))
for root, _, names in os.walk(sys.argv[2]):
    for name in names:
        if name.endswith(".jsonl"):
            os.stat(os.path.join(root, name))
print(len(known))
"""

PARSE = """
import json, sys
with open(sys.argv[1], "rb") as handle:
    handle.seek(int(sys.argv[2]))
    count = sum(1 for line in handle.read().split(b"\\n") if line and json.loads(line))
print(count)
"""


def fill(session: SessionFile, size: int, stores: int) -> None:
    """About ``size`` bytes of conversation, ``stores`` of its tool calls qmem's."""
    written = session.path.stat().st_size
    goal = written + size
    n = 0
    while session.path.stat().st_size < goal:
        n += 1
        session.user(f"step {n}: look at the deploy logs and tell me what failed in the canary " * 3)
        session.call("bash", {"command": f"grep -n error logs/deploy-{n}.log | head -50"},
                     text="line 1: timeout after 30 s\n" * 20)
        if stores and n % max(1, 200 // stores) == 0:
            session.call("qmem_store", {"project_id": "shop", "text": f"Deploy step {n} failed on a timeout"},
                         details={"id": f"g-{n}", "shared": True})


def run(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    from cleanrun import rerun_on_clean_interpreter

    rerun_on_clean_interpreter()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        sessions = home / ".pi" / "agent" / "sessions" / "--work-project--"
        files = [SessionFile(sessions / f"2026-11-{i:04d}.jsonl") for i in range(args.files)]
        for session in files:
            fill(session, 64 * 1024, 3)
        database = home / "index.sqlite"
        env = {"HOME": str(home), "PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO),
               "QMEM_SQLITE": str(database)}
        subprocess.run([python, "-m", "qmem.local", "import"], env=env, check=True, stdout=subprocess.DEVNULL)
        appended = files[0]
        copy = home / "copy.jsonl"
        times: dict[str, list[float]] = {"import": [], "floor": [], "append": [], "parse": []}
        print(f"{args.files} session files of 64 KB in {sessions.parent}; {args.rounds} rounds, interleaved")
        for _ in range(args.rounds):
            times["import"].append(run([python, "-m", "qmem.local", "import"], env))
            times["floor"].append(run([python, "-c", FLOOR, str(database), str(home / ".pi")], env))
            start = appended.path.stat().st_size
            fill(appended, 1024 * 1024, 5)
            copy.write_bytes(appended.path.read_bytes())
            times["append"].append(run([python, "-m", "qmem.local", "import"], env))
            times["parse"].append(run([python, "-c", PARSE, str(copy), str(start)], env))
        print(f"\n{'whole process':14s} {'p50 ms':>8s}  spread")
        for name, values in times.items():
            print(f"{name:14s} {statistics.median(values):8.1f}  {min(values):.1f}–{max(values):.1f}")
        p50 = {name: statistics.median(values) for name, values in times.items()}
        print("\nratios of p50:")
        print(f"  import / floor   {p50['import'] / p50['floor']:.2f}x   (target <= 1.5x: nothing new)")
        print(f"  append / parse   {p50['append'] / p50['parse']:.2f}x   (target <= 2x: 1 MB appended)")
        print(json.dumps({"ratios": {"import_floor": round(p50["import"] / p50["floor"], 3),
                                     "append_parse": round(p50["append"] / p50["parse"], 3)}}))


if __name__ == "__main__":
    main()
