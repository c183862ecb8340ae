"""Benchmark ``import-hermes --dry-run`` over a large source served by the loopback fake Qdrant.

    python scripts/bench_import.py [--points 100000] [--dimension 1024]

The fake (in this process) serves a qdrant-memory collection of ``--points`` points.  Then,
each in its own subprocess so that neither competes with the server for the GIL:

  * the dry-run: ``python -m qmem.admin import-hermes … --dry-run --json``, exactly as an
    operator runs it — wall time, points/s and its peak RSS (target <= 400 MB);
  * the baseline: the least any importer must do — scroll the same pages with the same
    request through qmem's transport and JSON-parse them, nothing else.

It prints both times and the ratio dry-run / baseline (target <= 2x).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from qmem.admin import run  # noqa: E402
from qmem.curation.importrun import page_size_for  # noqa: E402
from qmem.clients.transport import HttpClient  # noqa: E402
from qmem.curation.hermespoint import PROFILES  # noqa: E402
from tests.fakes import FakeQdrant  # noqa: E402

COLLECTION = "hermes_memories"
VECTOR_POOL = 1024  # distinct vector lists; the fake caches the JSON of up to 4096 of them
SENTENCES = ("Deploys use blue-green switching with a canary stage", "The staging database is rebuilt nightly",
             "Prefer small pull requests with one concern each", "Il gateway usa la porta 8443 in città")


def populate(qdrant: FakeQdrant, points: int, dimension: int) -> None:
    rng = random.Random(1)
    qdrant.create_collection(COLLECTION, size=dimension, vector_name="dense")
    pool = [[rng.uniform(-0.1, 0.1) for _ in range(dimension)] for _ in range(VECTOR_POOL)]
    qdrant.add_point(COLLECTION, "0e039c91-9509-57b6-877a-e878e1d61d93", pool[0],
                     {"_qdrant_memory_schema": 1, "embedding_fingerprint": "sha256:bench"})

    def records():
        for i in range(1, points + 1):
            yield i, {"dense": pool[i % VECTOR_POOL]}, {
                "text": f"{SENTENCES[i % len(SENTENCES)]} (memory {i})", "user_id": "operator",
                "agent_id": None if i % 3 else "hermes", "source": "tool", "session_id": f"session-{i // 50}",
                "category": ["ops", f"team-{i % 7}"], "importance": 0.5, "metadata": {"origin": "bench", "n": i},
                "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-02T00:00:00Z",
                "content_hash": f"sha256:{i:064x}", "schema_version": 1}

    qdrant.add_points(COLLECTION, records())


def baseline_child(url: str, dimension: int) -> None:
    """Scroll and JSON-parse every page, as the dry-run requests them; print the point count."""
    profile = PROFILES["qdrant-memory"]
    body = {"limit": page_size_for(dimension), "with_payload": list(profile.requested_fields),
            "with_vector": [profile.vector_name]}
    count = 0
    with HttpClient(url, connect_timeout=15, body_timeout=60, service="Qdrant",
                    max_response_bytes=64 * 1024 * 1024) as http:
        while True:
            result = json.loads(http.request("POST", f"/collections/{COLLECTION}/points/scroll",
                                             json_body=body).body)["result"]
            count += len(result["points"])
            if result["next_page_offset"] is None:
                break
            body["offset"] = result["next_page_offset"]
    print(count)


class Launcher:
    """A small process, started before the fake is populated, that runs the measured subprocesses.

    A child started straight from this (large) process would report this process's size as
    its peak: Linux keeps the RSS high-water mark of the address space a child had before
    exec, and subprocess uses vfork.  Started from the launcher, a child inherits at most
    the launcher's few MB, so ``wait4``'s ``ru_maxrss`` is the child's own peak.
    """

    def __init__(self) -> None:
        self._proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--launcher"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, argv: list[str], env: dict[str, str]) -> tuple[float, int, str]:
        """(wall seconds, peak RSS in bytes, stdout) of one subprocess."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps({"argv": argv, "env": env}) + "\n")
        self._proc.stdin.flush()
        answer = json.loads(self._proc.stdout.readline())
        if answer["code"] != 0:
            raise SystemExit(f"child failed ({answer['code']}): {answer['stderr'].strip()}")
        return answer["seconds"], answer["maxrss_kib"] * 1024, answer["stdout"]

    def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._proc.wait()


def launcher_loop() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            started = time.perf_counter()
            proc = subprocess.Popen(request["argv"], env=request["env"], stdout=out, stderr=err)
            _, status, usage = os.wait4(proc.pid, 0)
            seconds = time.perf_counter() - started
            proc.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            err.seek(0)
            answer = {"code": proc.returncode, "seconds": seconds, "maxrss_kib": usage.ru_maxrss,
                      "stdout": out.read().decode(errors="replace"), "stderr": err.read().decode(errors="replace")}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--dimension", type=int, default=1024)
    parser.add_argument("--baseline-child", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--launcher", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not (args.baseline_child or args.launcher):  # the children speak JSON on stdout
        from cleanrun import rerun_on_clean_interpreter

        rerun_on_clean_interpreter()
    if args.baseline_child:
        baseline_child(args.baseline_child, args.dimension)
        return
    if args.launcher:
        launcher_loop()
        return
    launcher = Launcher()  # before the fake grows: see Launcher

    print(f"python {sys.version.split()[0]}; {args.points} points of dimension {args.dimension}")
    with tempfile.TemporaryDirectory() as home, FakeQdrant() as source, FakeQdrant() as destination:
        t0 = time.perf_counter()
        populate(source, args.points, args.dimension)
        print(f"fake populated in {time.perf_counter() - t0:.1f} s")
        config = Path(home) / ".config" / "qmem" / "config.json"
        config.parent.mkdir(parents=True)
        config.write_text(json.dumps({"timeoutMs": 120_000, "recall": {"qdrantUrl": destination.url,
                                                                        "dimension": args.dimension}}))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("QMEM_", "PI_QDRANT_MEMORY_", "XDG_"))}
        env.update(HOME=home, PYTHONPATH=str(REPO))
        init = run(["init"], env=env)
        assert init.code == 0, init.error
        destination.clear()

        dry_s, peak, out = launcher.run(
            [sys.executable, "-m", "qmem.admin", "import-hermes", "--source-url", source.url, "--source-collection",
             COLLECTION, "--target-host", "pi", "--source-model", "bge-m3", "--dry-run", "--json"], env)
        counts = json.loads(out)["counts"]
        base_s, _, base_out = launcher.run(
            [sys.executable, str(Path(__file__).resolve()), "--baseline-child", source.url,
             "--dimension", str(args.dimension)], env)
        assert int(base_out) == counts["read"], (base_out, counts)
        assert not destination.mutations(), "the dry-run wrote to the destination"
        assert not source.mutations(), "the dry-run wrote to the source"
    launcher.close()

    print(f"dry-run: {counts['read']} points read, {counts['accepted']} accepted in {dry_s:.2f} s = "
          f"{counts['read'] / dry_s:,.0f} points/s; peak RSS {peak / 2**20:.0f} MB (target <= 400 MB)")
    print(f"baseline (scroll + JSON-parse the same pages): {base_s:.2f} s = {counts['read'] / base_s:,.0f} points/s")
    print(f"ratio dry-run / baseline: {dry_s / base_s:.2f}x (target <= 2x)")


if __name__ == "__main__":
    main()
