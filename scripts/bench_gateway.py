"""Benchmark the gateway lane: breaker-open latency and outbox flush against a bare client.

    python scripts/bench_gateway.py [--records 1000] [--calls 5000]

Prints:
  * the latency of a gateway call while the breaker is open (state-file read included),
    p50/p99 over --calls calls (target p99 <= 1 ms), and of a whole qmem_store that is
    queued because of it;
  * flush of --records queued records to the loopback fake gateway, and in the same run
    the same request bodies sent by a bare http.client loop (one keep-alive connection)
    to an identical fresh fake, each fake in its own process: medians of --rounds interleaved
    runs and the ratio (target <= 3 s, ratio <= 1.5),
    with one project for all records and with a project per record, in-process and
    through `python -m qmem.local flush` (whose figure includes starting Python).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from qmem.clients.gateway import GatewayUnavailable  # noqa: E402
from qmem.records import NewRecord  # noqa: E402
from qmem.runtime import Runtime  # noqa: E402
from qmem.store import qmem_store  # noqa: E402
from qmem.sync import flush  # noqa: E402
from tests.fakes import refused_url  # noqa: E402

KEY = "bench-key"


def environment(home: Path, url: str) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    config = home / "config.json"
    config.write_text(json.dumps({"url": url, "connectTimeoutMs": 5000, "timeoutMs": 5000}))
    return {"HOME": str(home), "QMEM_CONFIG": str(config), "QMEM_GATEWAY_API_KEY": KEY,
            "PATH": os.environ.get("PATH", "")}


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(int(len(ordered) * q), len(ordered) - 1)]


def bench_breaker(home: Path, calls: int) -> None:
    rt = Runtime(environment(home, refused_url()))
    breaker = rt.breaker_for(rt.config.url)
    breaker.definitive_failure()
    gateway = rt.gateway
    assert gateway is not None
    timings = []
    for _ in range(calls):
        t0 = time.perf_counter()
        try:
            gateway.search({"query": "x", "top_k": 5})
        except GatewayUnavailable as exc:
            assert exc.breaker_open
        timings.append((time.perf_counter() - t0) * 1000)
    print(f"breaker-open gateway call: p50 {statistics.median(timings):.4f} ms, "
          f"p99 {percentile(timings, 0.99):.4f} ms over {calls} calls (target p99 <= 1 ms)")
    rt.index.status()  # open the index once, as a long-lived host session has it open
    store_timings = []
    for i in range(min(calls, 500)):
        t0 = time.perf_counter()
        result = qmem_store(rt, {"text": f"queued while down {i}", "project_id": "bench"})
        store_timings.append((time.perf_counter() - t0) * 1000)
        assert result.details["queued"]
    print(f"qmem_store queued because the breaker is open: p50 {statistics.median(store_timings):.3f} ms, "
          f"p99 {percentile(store_timings, 0.99):.3f} ms (includes the SQLite commit)")
    rt.close()


@contextmanager
def gateway_process() -> Iterator[str]:
    """A fresh fake gateway in its own process, as a real gateway is: the client's Python work and
    the server's do not share one GIL, which would charge the server's time to whichever is busier."""
    code = ("import sys; from tests.fakes import FakeGateway; g = FakeGateway(api_key=sys.argv[1]).start(); "
            "print(g.url, flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code, KEY], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            cwd=REPO, text=True)
    try:
        yield proc.stdout.readline().strip()
    finally:
        proc.stdin.close()
        proc.wait(30)


def bare_loop(url: str, bodies: list[dict]) -> float:
    """The baseline: the same bodies POSTed by a bare http.client loop on one keep-alive connection."""
    conn = http.client.HTTPConnection("127.0.0.1", int(url.rsplit(":", 1)[1]), timeout=5)
    t0 = time.perf_counter()
    for i, body in enumerate(bodies):
        conn.request("POST", "/v1/memories", body=json.dumps(body).encode(),
                     headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json",
                              "Idempotency-Key": f"local-{i:032x}"})
        response = conn.getresponse()
        response.read()
        assert response.status == 201
    seconds = time.perf_counter() - t0
    conn.close()
    return seconds


def bare_script(url: str, bodies: list[dict]) -> float:
    """The same loop as a fresh ``python -c`` process: the baseline for a command, which also starts Python."""
    code = ("import http.client, json, sys; port, key = int(sys.argv[1]), sys.argv[2]; "
            "bodies = json.load(sys.stdin); conn = http.client.HTTPConnection('127.0.0.1', port, timeout=5)\n"
            "for i, body in enumerate(bodies):\n"
            "    conn.request('POST', '/v1/memories', body=json.dumps(body).encode(), headers={"
            "'Authorization': 'Bearer ' + key, 'Content-Type': 'application/json', "
            "'Idempotency-Key': f'local-{i:032x}'})\n"
            "    response = conn.getresponse(); response.read(); assert response.status == 201")
    payload = json.dumps(bodies)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, url.rsplit(":", 1)[1], KEY], input=payload, text=True, check=True)
    return time.perf_counter() - t0


def qmem_flush(home: Path, url: str, bodies: list[dict], *, through_cli: bool) -> float:
    env = environment(home, url)
    rt = Runtime(env)
    for body in bodies:
        rt.outbox.enqueue(NewRecord(**body))
    rt.close()
    t0 = time.perf_counter()
    if through_cli:
        done = subprocess.run([sys.executable, "-m", "qmem.local", "flush", "--json"], env={
            **env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, check=False)
        synced = json.loads(done.stdout)["synced"]
    else:
        rt = Runtime(env)
        synced = flush(rt).synced
        rt.close()
    seconds = time.perf_counter() - t0
    assert synced == len(bodies), synced
    return seconds


def bench_flush(home: Path, count: int, rounds: int, *, per_project: bool, through_cli: bool) -> None:
    texts = [f"benchmark memory record {i}: the deploy of service {i % 37} uses canary stage {i % 5}"
             for i in range(count)]
    bodies = [{"text": t, "project_id": f"project-{i}" if per_project else "bench", "kind": "fact"}
              for i, t in enumerate(texts)]
    qmem_times, bare_times, script_times = [], [], []
    for n in range(rounds):  # interleaved, each against a fresh gateway, so load hits both alike
        with gateway_process() as url:
            qmem_times.append(qmem_flush(home / f"run-{n}", url, bodies, through_cli=through_cli))
        with gateway_process() as url:
            bare_times.append(bare_loop(url, bodies))
        if through_cli:
            with gateway_process() as url:
                script_times.append(bare_script(url, bodies))
    qmem_seconds, bare_seconds = statistics.median(qmem_times), statistics.median(bare_times)
    label = f"{'a project per record' if per_project else 'one project'}, {'CLI' if through_cli else 'in-process'}"
    line = (f"flush of {count} records ({label}): qmem {qmem_seconds:.3f} s, bare http.client loop "
            f"{bare_seconds:.3f} s (medians of {rounds}), ratio {qmem_seconds / bare_seconds:.2f}x")
    if through_cli:
        script_seconds = statistics.median(script_times)
        line += (f"; the same loop as a python -c script (it starts Python too) {script_seconds:.3f} s, "
                 f"ratio {qmem_seconds / script_seconds:.2f}x")
    print(line + " (targets <= 3 s, <= 1.5x)")


def main() -> None:
    from cleanrun import rerun_on_clean_interpreter

    rerun_on_clean_interpreter()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3, help="flush measurements per variant (medians)")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "a").mkdir()
        bench_breaker(Path(tmp) / "a", args.calls)
        for n, (per_project, through_cli) in enumerate([(False, False), (True, False), (False, True), (True, True)]):
            home = Path(tmp) / f"flush-{n}"
            home.mkdir()
            bench_flush(home, args.records, args.rounds, per_project=per_project, through_cli=through_cli)


if __name__ == "__main__":
    main()
