"""Benchmark the pi/Prime bridge: spawn-to-ready and a context round trip with 100 messages.

    python scripts/bench_bridge.py [--spawns 20] [--calls 500]

Prints, each beside the same work done in the same run:
  * bridge spawn-to-ready (``python -m qmem.bridge`` until its ``ready`` line; target <= 150 ms),
    beside a bare interpreter start (``python -c``) and the in-process import of the bridge;
  * a ``context`` round trip with 100 messages and a cached recall result (target <= 2 ms p50):
    through the real ``index.js`` shim driven by Node (the path pi takes), through the bridge
    driven from Python, and in-process (``PluginSession.context`` + the patch);
Recall is served by loopback fakes and cached after the first call, as during a tool loop.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from qmem.diagnostics import Warnings  # noqa: E402
from qmem.hosts.session import PluginSession  # noqa: E402
from qmem.recall import recall_patch  # noqa: E402
from tests.fakes import FakeEmbeddings, FakeQdrant, embed_text  # noqa: E402

DIM = 256
NODE_DRIVER = r"""
import qmem from "%(index)s";
const handlers = {};
const pi = { on: (name, fn) => { handlers[name] = fn; }, registerTool: () => {}, registerCommand: () => {},
             getActiveTools: () => [] };
qmem(pi);
const ctx = { cwd: %(cwd)s, hasUI: false, ui: {}, sessionManager: { getHeader: () => ({}) }, signal: undefined };
await handlers.session_start({}, ctx);
const messages = JSON.parse(%(messages)s);
const first = await handlers.context({ messages }, ctx);
if (!first || !first.messages.some((m) => m.customType === "qmem:recall")) throw new Error("no recall block");
const samples = [];
for (let i = 0; i < %(calls)d; i++) {
  const t0 = process.hrtime.bigint();
  await handlers.context({ messages }, ctx);
  samples.push(Number(process.hrtime.bigint() - t0) / 1e6);
}
await handlers.session_shutdown({}, ctx);
console.log(JSON.stringify(samples));
"""


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(int(len(ordered) * q), len(ordered) - 1)]


def conversation(prompt: str, n: int = 100) -> list[dict]:
    messages = [{"role": "user", "content": [{"type": "text", "text": prompt}], "timestamp": 1}]
    while len(messages) < n:
        i = len(messages)
        messages.append({"role": "assistant", "content": [{"type": "toolCall", "id": f"c{i}", "name": "bash",
                                                            "arguments": {"command": "ls -la"}}], "timestamp": i})
        messages.append({"role": "toolResult", "toolCallId": f"c{i}", "toolName": "bash",
                         "content": [{"type": "text", "text": "total 8\n-rw-r--r-- file.txt\n" * 10}],
                         "isError": False, "timestamp": i})
    return messages[:n]


def environment(home: Path, qdrant: FakeQdrant, embeddings: FakeEmbeddings) -> dict[str, str]:
    config = home / "config.json"
    config.write_text(json.dumps({"recall": {"qdrantUrl": qdrant.url, "embeddingsUrl": embeddings.base_url,
                                             "dimension": DIM}}))
    return {"HOME": str(home), "QMEM_CONFIG": str(config), "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": str(REPO), "PI_CODING_AGENT": "true"}


def spawn_to_ready(env: dict[str, str], spawns: int) -> tuple[list[float], list[float]]:
    bridge, bare = [], []
    for _ in range(spawns):
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "qmem.bridge"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=env)
        assert proc.stdout is not None and b'"ready"' in proc.stdout.readline()
        bridge.append((time.perf_counter() - t0) * 1000)
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait()
        proc.stdout.close()
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "print('ready')"], stdout=subprocess.PIPE, env=env, check=True)
        bare.append((time.perf_counter() - t0) * 1000)
    return bridge, bare


def python_round_trips(env: dict[str, str], messages: list[dict], calls: int, cwd: Path) -> list[float]:
    proc = subprocess.Popen([sys.executable, "-m", "qmem.bridge"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdout.readline()

    def call(request_id: int, method: str, params: dict) -> dict:
        proc.stdin.write((json.dumps({"id": request_id, "method": method, "params": params}) + "\n").encode())
        proc.stdin.flush()
        while True:
            answer = json.loads(proc.stdout.readline())
            if answer.get("id") == request_id:
                return answer

    call(0, "session_start", {"cwd": str(cwd), "extensionDir": str(cwd / ".pi" / "agent" / "extensions" / "qmem")})
    params = {"messages": messages, "depthGiven": False}
    assert call(1, "context", params)["result"]["append"] is not None
    samples = []
    for i in range(calls):
        t0 = time.perf_counter()
        call(i + 2, "context", params)
        samples.append((time.perf_counter() - t0) * 1000)
    proc.stdin.close()
    proc.wait()
    proc.stdout.close()
    return samples


def node_round_trips(env: dict[str, str], messages: list[dict], calls: int, cwd: Path, tmp: Path) -> list[float]:
    extension = cwd / ".pi" / "agent" / "extensions" / "qmem"
    shutil.copytree(REPO / "qmem", extension, ignore=lambda d, names: [n for n in names if n == "__pycache__"])
    driver = tmp / "driver.mjs"
    driver.write_text(NODE_DRIVER % {"index": (extension / "index.js").as_posix(), "cwd": json.dumps(str(cwd)),
                                     "messages": json.dumps(json.dumps(messages)), "calls": calls})
    node_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    node_env["QMEM_PYTHON"] = sys.executable
    out = subprocess.run(["node", str(driver)], env=node_env, cwd=cwd, capture_output=True, text=True, check=True,
                         timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    from cleanrun import rerun_on_clean_interpreter

    rerun_on_clean_interpreter()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spawns", type=int, default=20)
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    prompt = "how do we deploy with blue green switching?"
    print(f"python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp, FakeQdrant() as qdrant, FakeEmbeddings(models={"bge-m3": DIM}) as emb:
        home = Path(tmp)
        cwd = home / "proj"
        (cwd / ".git").mkdir(parents=True)
        qdrant.create_collection("qmem_memories", size=DIM)
        for i in range(10):
            text = f"memory {i}: deploy with blue green switching, canary stage {i}"
            qdrant.add_point("qmem_memories", i + 1, embed_text(text, DIM), {
                "host": "pi", "status": "active", "secret_scan": "passed", "text": text, "project": "proj",
                "source_type": "hermes", "source_collection": "h", "source_id": str(i), "import_run_id": "ab" * 32,
                "transform_version": "hermes-v1", "created_at": "2026-01-01T00:00:00Z"})
        env = environment(home, qdrant, emb)
        messages = conversation(prompt)

        bridge, bare = spawn_to_ready(env, args.spawns)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import qmem.bridge"], env=env, check=True)
        import_ms = (time.perf_counter() - t0) * 1000
        print(f"bridge spawn-to-ready: p50 {statistics.median(bridge):.1f} ms, max {max(bridge):.1f} ms "
              f"(target <= 150 ms); bare interpreter start p50 {statistics.median(bare):.1f} ms "
              f"(ratio {statistics.median(bridge) / statistics.median(bare):.2f}x); "
              f"python -c 'import qmem.bridge' {import_ms:.1f} ms")

        session = PluginSession(host="pi", cwd=cwd, env=dict(env), warnings=Warnings(lambda s: None))
        session.context(messages)
        in_process = []
        for _ in range(args.calls):
            t0 = time.perf_counter()
            recall_patch(messages, session.context(messages))
            in_process.append((time.perf_counter() - t0) * 1000)
        session.close()
        piped = python_round_trips(env, messages, args.calls, cwd)
        base = statistics.median(in_process)
        print(f"context, 100 messages, cached: in-process p50 {base:.3f} ms; via the bridge from Python "
              f"p50 {statistics.median(piped):.3f} ms, p99 {percentile(piped, 0.99):.3f} ms")
        if shutil.which("node"):
            shim = node_round_trips(env, messages, args.calls, cwd, home)
            print(f"context, 100 messages, cached, through index.js (pi's path): p50 {statistics.median(shim):.3f} ms, "
                  f"p99 {percentile(shim, 0.99):.3f} ms (target <= 2 ms p50); "
                  f"ratio to in-process {statistics.median(shim) / base:.1f}x")
        else:
            print("node is not installed: the index.js round trip was not measured")


if __name__ == "__main__":
    main()
