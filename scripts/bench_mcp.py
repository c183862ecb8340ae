"""Benchmark the MCP server: start-up to ``initialize``, and qmem_search with the gateway away.

    python scripts/bench_mcp.py [--records 100000] [--queries 300] [--starts 20]

Prints:
  * server start to ``initialize`` answered, p50/max over --starts spawns (target <= 150 ms), beside a
    bare interpreter start;
  * ``tools/call qmem_search`` over stdio on a --records local index with the gateway's breaker open
    (so every search is the labelled local fallback), p50/p95, beside the same searches done in-process
    the way ``python -m qmem.local find --json`` does them (find + JSON + text rendering) on an open index,
    measured in the same run (target: MCP p50 within 1.5x); the whole CLI command, which also opens the
    index each time, is printed too.
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

import bench_localindex  # noqa: E402
from qmem.cli.frontend import to_json_text  # noqa: E402
from qmem.local import render_find, run  # noqa: E402
from qmem.localindex import LocalIndex  # noqa: E402
from qmem.runtime import Runtime  # noqa: E402
from tests.fakes import refused_url  # noqa: E402

INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench",
                                                                                            "version": "1"}}}


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(int(len(ordered) * q), len(ordered) - 1)]


def start_times(env: dict[str, str], starts: int) -> tuple[list[float], list[float]]:
    server, bare = [], []
    line = (json.dumps(INITIALIZE) + "\n").encode()
    for _ in range(starts):
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "qmem.mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=env)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(line)
        proc.stdin.flush()
        assert b'"protocolVersion"' in proc.stdout.readline()
        server.append((time.perf_counter() - t0) * 1000)
        proc.stdin.close()
        proc.wait()
        proc.stdout.close()
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        bare.append((time.perf_counter() - t0) * 1000)
    return server, bare


def mcp_searches(env: dict[str, str], queries: list[str]) -> list[float]:
    proc = subprocess.Popen([sys.executable, "-m", "qmem.mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None and proc.stdout is not None

    def call(message: dict) -> dict:
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())

    call(INITIALIZE)
    samples = []
    for i, query in enumerate(queries[:20] + queries):  # the first 20 warm up
        message = {"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                   "params": {"name": "qmem_search", "arguments": {"query": query}}}
        t0 = time.perf_counter()
        answer = call(message)
        elapsed = (time.perf_counter() - t0) * 1000
        assert answer["result"]["structuredContent"]["fallback"] == "local_sqlite", answer
        if i >= 20:
            samples.append(elapsed)
    proc.stdin.close()
    proc.wait()
    proc.stdout.close()
    return samples


def in_process_finds(env: dict[str, str], queries: list[str]) -> tuple[list[float], list[float]]:
    """(the search on an open index, as a long-lived process runs it; the whole CLI command, index open included)."""
    open_index, command = [], []
    with LocalIndex(Path(env["QMEM_SQLITE"])) as index:
        for i, query in enumerate(queries[:20] + queries):
            t0 = time.perf_counter()
            result = index.find(query, limit=10)
            to_json_text(result.to_json())
            render_find(result)
            elapsed = (time.perf_counter() - t0) * 1000
            if i >= 20:
                open_index.append(elapsed)
    for i, query in enumerate(queries[:20] + queries):
        t0 = time.perf_counter()
        outcome = run(["find", "--json", "--", *query.split()], env=env)
        elapsed = (time.perf_counter() - t0) * 1000
        assert outcome.code == 0, outcome.error
        if i >= 20:
            command.append(elapsed)
    return open_index, command


def main() -> None:
    from cleanrun import rerun_on_clean_interpreter

    rerun_on_clean_interpreter()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--starts", type=int, default=20)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        database = home / "index.sqlite"
        bench_localindex.build(database, args.records, bench_localindex.Corpus(random.Random(42)))
        queries = bench_localindex.make_queries(database, args.queries)
        config = home / "config.json"
        config.write_text(json.dumps({"url": refused_url(), "recall": {"enabled": False}}))
        env = {"HOME": str(home), "PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO),
               "QMEM_CONFIG": str(config), "QMEM_SQLITE": str(database)}
        rt = Runtime(env)
        rt.breaker_for(rt.config.url).definitive_failure()  # the gateway is away: every call falls back
        rt.close()

        server, bare = start_times(env, args.starts)
        print(f"start to initialize answered: p50 {statistics.median(server):.1f} ms, max {max(server):.1f} ms "
              f"(target <= 150 ms); bare interpreter start p50 {statistics.median(bare):.1f} ms")

        mcp = mcp_searches(env, queries)
        local, command = in_process_finds(env, queries)
        print(f"qmem_search over MCP, {args.records:,} records, breaker open: p50 {statistics.median(mcp):.3f} ms, "
              f"p95 {percentile(mcp, 0.95):.3f} ms")
        print(f"the same searches in-process on an open index (find + JSON + text): "
              f"p50 {statistics.median(local):.3f} ms, p95 {percentile(local, 0.95):.3f} ms; "
              f"ratio MCP / in-process p50 {statistics.median(mcp) / statistics.median(local):.2f}x (target <= 1.5)")
        print(f"the whole qmem.local find --json command in-process (opens the index each time): "
              f"p50 {statistics.median(command):.3f} ms; ratio MCP / command "
              f"{statistics.median(mcp) / statistics.median(command):.2f}x")


if __name__ == "__main__":
    main()
