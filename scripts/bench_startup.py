"""Benchmark whole-process start-up: ``qmem.local find``, the MCP server and the bridge.

    python scripts/bench_startup.py [--records 10000] [--runs 40] [--kinds find,raw,...] [--python PATH]

Builds a --records local index (the corpus of ``bench_localindex.py``) and a config naming a
gateway (a refused loopback port, never called by these paths) with recall off, then times
whole processes, interleaved round by round (each round runs every kind once, in a rotated
order), and prints p50 and p90 of each:
  * ``find``: ``python -m qmem.local find <words>`` on that index;
  * ``raw``: a ``python -c`` that runs the raw FTS5 query ``SELECT rowid FROM records_fts WHERE
    records_fts MATCH ? ORDER BY rank LIMIT 10`` with find's final MATCH expression for the same
    words, fetches those rows' text and prints it (the floor under find);
  * ``floor``: ``raw`` preceded by importing every standard-library module ``find`` loads (found
    once, from ``sys.modules`` after a find): what is left of find / raw above floor / raw is
    qmem's own work;
  * ``pass``: ``python -c pass`` (the interpreter alone);
  * ``mcp``: the MCP server started as ``mcp-config`` writes it, to its ``initialize`` answer and
    to its ``tools/list`` answer;
  * ``bridge``: the bridge started as ``index.js`` spawns it (``-c`` bootstrap, PYTHONSAFEPATH), to
    its ``ready`` line and to its ``session_start`` answer.
Then the ratios: find / raw (target <= 1.5x), and MCP and bridge start-up against ``pass`` and
against ``raw``.  Nothing here asserts.

Every process, qmem's and the baselines', runs one **clean interpreter**: this Python in a
``venv --without-pip`` made once under ``.cache/`` (``tests/cleanpython.py``), or ``--python``.
A base interpreter whose site-packages hold a ``.pth`` file that imports modules at each start
(as some sandboxes install) slows ``pass`` and ``raw`` and preloads part of what qmem imports,
so it flatters the ratios; a user's Python has no such file.  The first line names the
interpreter and how many modules it holds at start.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

import bench_localindex  # noqa: E402
from qmem.localindex import LocalIndex  # noqa: E402
from qmem.setup.mcpconfig import server_entry  # noqa: E402
from sqltiming import TimedSQL  # noqa: E402
from tests.cleanpython import clean_interpreter, describe  # noqa: E402
from tests.fakes import refused_url  # noqa: E402

RAW = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
rowids = [row[0] for row in conn.execute(
    "SELECT rowid FROM records_fts WHERE records_fts MATCH ? ORDER BY rank LIMIT 10", (sys.argv[2],))]
marks = ",".join("?" * len(rowids))
texts = dict(conn.execute(f"SELECT rowid, id || '  ' || text FROM records WHERE rowid IN ({marks})", rowids))
print("\\n".join(texts[rowid] for rowid in rowids))
"""

INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "bench", "version": "1"}}}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}

# What index.js keeps of the host's environment (BRIDGE_ENV), as far as this run sets it.
BRIDGE_KEPT = ("PATH", "HOME", "LANG", "TMPDIR", "QMEM_CONFIG", "QMEM_SQLITE")


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(int(len(ordered) * q), len(ordered) - 1)]


def final_matches(database: Path, queries: list[str]) -> list[str]:
    """The MATCH expression find's last stage binds for each query (what the raw query runs)."""
    finals = []
    with LocalIndex(database) as index, TimedSQL(index) as timed:
        for query in queries:
            index.find(query)
            assert timed.last_match is not None
            finals.append(timed.last_match)
    return finals


#: Runs a find in-process and prints the modules it left loaded, one per line, on stderr.
LOADED_BY_FIND = """
import runpy, sys
sys.argv = ["qmem.local", "find", "--", *sys.argv[1:]]
try:
    runpy.run_module("qmem.local", run_name="__main__")
except SystemExit:
    pass
sys.stderr.write("\\n".join(sys.modules))
"""

#: Imports each module named on stdin that can be imported alone; prints those, one per line.
IMPORTABLE = """
import importlib, sys
for name in sys.stdin.read().split():
    try:
        importlib.import_module(name)
    except Exception:
        continue
    print(name)
"""


def stdlib_floor(env: dict[str, str], cwd: Path, query: str) -> str:
    """A ``python -c`` script importing the standard-library modules a find loads that a bare
    interpreter does not, then running :data:`RAW`."""
    def modules(argv: list[str], stdin: str = "") -> list[str]:
        done = subprocess.run(argv, env=env, cwd=cwd, input=stdin, capture_output=True, text=True, check=True)
        return (done.stderr or done.stdout).split()

    bare = set(modules([*PYTHON, "-c", "import sys; sys.stderr.write(chr(10).join(sys.modules))"]))
    wanted = [name for name in modules([*PYTHON, "-c", LOADED_BY_FIND, *query.split()])
              if name not in bare and name.split(".")[0] != "qmem" and name != "__main__"]
    return f"import {', '.join(modules([*PYTHON, '-c', IMPORTABLE], ' '.join(wanted)))}\n{RAW}"


#: The interpreter for every process started (the clean one, or ``--python``).
PYTHON = [sys.executable]


def run_process(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - t0) * 1000


def conversation(argv: list[str], env: dict[str, str], cwd: Path, first: Callable[[bytes], bool],
                 request: dict, answered: Callable[[dict], bool]) -> tuple[float, float]:
    """Spawn, wait for the line ``first`` accepts, send ``request``, wait for its answer; both times in ms."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        while not first(proc.stdout.readline()):
            pass
        t1 = time.perf_counter()
        proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            assert line, "the process ended before answering"
            if answered(json.loads(line)):
                break
        t2 = time.perf_counter()
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
        proc.stdout.close()
    return (t1 - t0) * 1000, (t2 - t0) * 1000


def mcp_start(env: dict[str, str], cwd: Path) -> tuple[float, float]:
    entry = server_entry(env)
    argv = [entry.command, *PYTHON[1:], *entry.args]
    env = {**env, **entry.literal_env}
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
        proc.stdin.flush()
        assert b'"protocolVersion"' in proc.stdout.readline()
        t1 = time.perf_counter()
        proc.stdin.write((json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"
                          + json.dumps(TOOLS_LIST) + "\n").encode())
        proc.stdin.flush()
        assert b'"tools"' in proc.stdout.readline()
        t2 = time.perf_counter()
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
        proc.stdout.close()
    return (t1 - t0) * 1000, (t2 - t0) * 1000


def is_ready(line: bytes) -> bool:
    assert line, "the bridge ended before it was ready"
    return b'"ready"' in line


def bridge_start(env: dict[str, str], project: Path) -> tuple[float, float]:
    """As index.js spawns it: ``-c`` bootstrap, in the extension folder's parent, with its environment."""
    bootstrap = ("import sys; sys.path[:] = [p for p in sys.path if p]; import runpy; "
                 'runpy.run_module("qmem.bridge", run_name="__main__", alter_sys=True)')
    bridge_env = {name: env[name] for name in BRIDGE_KEPT if name in env}
    bridge_env.update(PYTHONPATH=str(REPO), PYTHONSAFEPATH="1")
    extension = Path(env["HOME"]) / ".pi" / "agent" / "extensions" / "qmem"
    start = {"id": 1, "method": "session_start",
             "params": {"cwd": str(project), "extensionDir": str(extension), "extensionRealDir": str(REPO / "qmem"),
                        "header": {}}}
    return conversation([*PYTHON, "-c", bootstrap], bridge_env, REPO,
                        is_ready, start,
                        lambda message: message.get("id") == 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--kinds", default="find,raw,floor,pass,mcp,bridge",
                        help="which processes to time, comma-separated (default: all six)")
    parser.add_argument("--python", help="the interpreter for every process (default: the clean one, see above)")
    args = parser.parse_args()
    PYTHON[:] = [args.python or clean_interpreter() or sys.executable]
    print(f"{describe(PYTHON[0])}; {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        project = home / "proj"
        (project / ".git").mkdir(parents=True)
        database = home / "index.sqlite"
        seconds = bench_localindex.build(database, args.records, bench_localindex.Corpus(random.Random(42)))
        queries = bench_localindex.make_queries(database, 10)
        finals = final_matches(database, queries)
        config = home / "config.json"
        config.write_text(json.dumps({"url": refused_url(), "recall": {"enabled": False}}))
        env = {"HOME": str(home), "PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO),
               "QMEM_CONFIG": str(config), "QMEM_SQLITE": str(database)}
        if "LANG" in os.environ:
            env["LANG"] = os.environ["LANG"]
        print(f"{args.records:,} records built in {seconds:.1f} s; {len(queries)} queries, one per round in turn; "
              f"{args.runs} rounds")

        def find(i: int) -> dict[str, float]:
            return {"find": run_process([*PYTHON, "-m", "qmem.local", "find", "--", *queries[i].split()],
                                        env, project)}

        def raw(i: int) -> dict[str, float]:
            return {"raw": run_process([*PYTHON, "-c", RAW, str(database), finals[i]], env, project)}

        floor_script = stdlib_floor(env, project, queries[0])

        def floor(i: int) -> dict[str, float]:
            return {"floor": run_process([*PYTHON, "-c", floor_script, str(database), finals[i]], env, project)}

        def bare(i: int) -> dict[str, float]:
            return {"pass": run_process([*PYTHON, "-c", "pass"], env, project)}

        def mcp(i: int) -> dict[str, float]:
            initialized, listed = mcp_start(env, project)
            return {"mcp initialize": initialized, "mcp tools/list": listed}

        def bridge(i: int) -> dict[str, float]:
            ready, started = bridge_start(env, project)
            return {"bridge ready": ready, "bridge session_start": started}

        chosen = args.kinds.split(",")
        kinds = [kind for name, kind in (("find", find), ("raw", raw), ("floor", floor), ("pass", bare),
                                         ("mcp", mcp), ("bridge", bridge)) if name in chosen]
        for i, kind in enumerate(kinds):  # warm-up: byte-code caches, the page cache
            kind(i)
        samples: dict[str, list[float]] = {}
        for round_number in range(args.runs):
            shift = round_number % len(kinds)
            for kind in kinds[shift:] + kinds[:shift]:
                for name, ms in kind(round_number % len(queries)).items():
                    samples.setdefault(name, []).append(ms)

    p50 = {name: statistics.median(values) for name, values in samples.items()}
    print(f"\n{'whole process':28s} {'p50 ms':>8s} {'p90 ms':>8s}")
    for name, values in samples.items():
        print(f"{name:28s} {p50[name]:8.1f} {percentile(values, 0.9):8.1f}")
    if not {"find", "raw", "pass"} <= set(p50):
        return
    print("\nratios of p50:")
    print(f"  find / raw                 {p50['find'] / p50['raw']:.2f}x   (target <= 1.5x)")
    print(f"  find / pass                {p50['find'] / p50['pass']:.2f}x")
    print(f"  raw / pass                 {p50['raw'] / p50['pass']:.2f}x")
    if "floor" in p50:
        print(f"  floor / raw                {p50['floor'] / p50['raw']:.2f}x   (the stdlib find loads, then raw)")
    for name in ("mcp initialize", "mcp tools/list", "bridge ready", "bridge session_start"):
        if name not in p50:
            continue
        print(f"  {name + ' / pass':26s} {p50[name] / p50['pass']:.2f}x   "
              f"{name} / raw {p50[name] / p50['raw']:.2f}x")


if __name__ == "__main__":
    main()
