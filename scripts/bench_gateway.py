"""Benchmark the gateway lane: breaker-open latency and outbox flush against a bare client.

    python scripts/bench_gateway.py [--records 1000] [--calls 5000]

Prints:
  * the latency of a gateway call while the breaker is open (state-file read included),
    p50/p99 over --calls calls (target p99 <= 1 ms), and of a whole qmem_store that is
    queued because of it;
  * flush of --records queued records to the loopback fake gateway, and in the same run
    the same request bodies sent by a bare http.client loop (one keep-alive connection)
    to an identical fresh fake: seconds each and the ratio (target <= 3 s, ratio <= 1.5),
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from qmem.gateway import GatewayUnavailable  # noqa: E402
from qmem.records import NewRecord  # noqa: E402
from qmem.runtime import Runtime  # noqa: E402
from qmem.store import qmem_store  # noqa: E402
from qmem.sync import flush  # noqa: E402
from tests.fakes import FakeGateway, refused_url  # noqa: E402

KEY = "bench-key"


def environment(home: Path, url: str) -> dict[str, str]:
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


def bare_loop(port: int, bodies: list[dict]) -> float:
    """The baseline: the same bodies POSTed by a bare http.client loop on one keep-alive connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
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


def bench_flush(home: Path, count: int, *, per_project: bool, through_cli: bool) -> None:
    texts = [f"benchmark memory record {i}: the deploy of service {i % 37} uses canary stage {i % 5}"
             for i in range(count)]
    bodies = [{"text": t, "project_id": f"project-{i}" if per_project else "bench", "kind": "fact"}
              for i, t in enumerate(texts)]
    home.mkdir()
    with FakeGateway(api_key=KEY) as fake:
        env = environment(home, fake.url)
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
        qmem_seconds = time.perf_counter() - t0
        assert synced == count, synced
    with FakeGateway(api_key=KEY) as fake:
        bare_seconds = bare_loop(fake.port, bodies)
    label = f"{'a project per record' if per_project else 'one project'}, {'CLI' if through_cli else 'in-process'}"
    print(f"flush of {count} records ({label}): qmem {qmem_seconds:.3f} s, bare http.client loop "
          f"{bare_seconds:.3f} s, ratio {qmem_seconds / bare_seconds:.2f}x (targets <= 3 s, <= 1.5x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=5000)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "a").mkdir()
        bench_breaker(Path(tmp) / "a", args.calls)
        for n, (per_project, through_cli) in enumerate([(False, False), (True, False), (False, True), (True, True)]):
            bench_flush(Path(tmp) / f"flush-{n}", args.records, per_project=per_project, through_cli=through_cli)


if __name__ == "__main__":
    main()
