"""Benchmark the recall lane's per-turn costs against loopback fakes.

    python scripts/bench_recall.py [--repeat 2000]

Prints, each beside a baseline measured in the same run:
  * a context call whose result is cached, over 200 messages (target <= 0.5 ms), against the
    least any transform must do (copy the list, append one message);
  * rendering 50 results into the block (target <= 2 ms), against html-escaping and joining
    the same texts;
  * a context call for a new prompt while the Qdrant/embeddings breakers are open
    (target <= 1 ms), against the cached call;
  * upstream calls for one prompt followed by 20 tool-loop turns (must be 1 embedding and at
    most 2 searches).
"""

from __future__ import annotations

import argparse
import html
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from qmem.diagnostics import Warnings  # noqa: E402
from qmem.fence.memorycontext import Excerpt, render_block  # noqa: E402
from qmem.recall import Recall  # noqa: E402
from qmem.runtime import Runtime  # noqa: E402
from tests.fakes import FakeEmbeddings, FakeQdrant, embed_text, refused_url  # noqa: E402

DIM = 1024


def timed(fn, repeat: int) -> tuple[float, float]:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.99) - 1]


def conversation(n: int, prompt: str) -> list[dict]:
    messages = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
    while len(messages) < n:
        messages.append({"role": "assistant", "content": [{"type": "toolCall", "id": f"c{len(messages)}",
                                                            "name": "bash", "arguments": {"command": "ls"}}]})
        messages.append({"role": "toolResult", "toolCallId": f"c{len(messages)}", "toolName": "bash",
                         "content": [{"type": "text", "text": "file.txt\n" * 20}]})
    return messages[:n]


def make_runtime(home: Path, qdrant_url: str, embeddings_url: str) -> Runtime:
    config = home / "config.json"
    config.write_text(json.dumps({"recall": {"qdrantUrl": qdrant_url, "embeddingsUrl": embeddings_url,
                                             "dimension": DIM, "timeoutMs": 3000}}))
    return Runtime({"HOME": str(home), "QMEM_CONFIG": str(config)}, warnings=Warnings(lambda s: None))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args()
    repeat = args.repeat
    print(f"python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp, FakeQdrant() as qdrant, FakeEmbeddings(models={"bge-m3": DIM}) as emb:
        home = Path(tmp)
        (home / "proj" / ".git").mkdir(parents=True)
        qdrant.create_collection("qmem_memories", size=DIM)
        for i in range(60):
            text = f"memory {i}: the deploy pipeline uses blue green switching and canary step {i}"
            qdrant.add_point("qmem_memories", i + 1, embed_text(text, DIM), {
                "host": "pi", "status": "active", "secret_scan": "passed", "text": text,
                "project": "proj" if i % 2 else "other", "source_type": "hermes", "source_collection": "h",
                "source_id": str(i), "import_run_id": "ab" * 32, "transform_version": "hermes-v1",
                "created_at": "2026-01-01T00:00:00Z"})
        rt = make_runtime(home, qdrant.url, emb.base_url)
        recall = Recall(rt.recall_services(), host="pi", cwd=home / "proj")
        messages = conversation(200, "how do we deploy with blue green?")

        # upstream calls for one prompt and 20 tool-loop turns
        turn = list(messages[:1])
        for i in range(21):
            recall.context(turn)
            turn = turn + [{"role": "assistant", "content": f"call {i}"}, {"role": "toolResult", "content": "ok"}]
        print(f"one prompt + 20 tool-loop turns: {recall.upstream_calls['embedding']} embedding, "
              f"{recall.upstream_calls['search']} searches (must be 1 and <= 2)")

        cached, cached99 = timed(lambda: recall.context(messages), repeat)
        floor, floor99 = timed(lambda: list(messages) + [{"role": "custom"}], repeat)
        print(f"cached context call, 200 messages: p50 {cached:.4f} ms, p99 {cached99:.4f} ms (target <= 0.5 ms); "
              f"baseline copy+append p50 {floor:.4f} ms; ratio {cached / floor:.1f}x")

        sentences = ("blue green deploys with a canary stage. ",
                     "il deploy in città usa blue green, perché è più sicuro. ")
        excerpts = [Excerpt(id=str(i), text=f"memory {i}: " + sentences[i % 2] * 8,
                            lane="project" if i % 2 else "host", score=0.8, source="hermes:h",
                            created="2026-01-01T00:00:00Z") for i in range(50)]
        texts = [e.text for e in excerpts]
        render, render99 = timed(lambda: render_block(excerpts, max_chars=200_000), repeat // 4)
        naive, _ = timed(lambda: "\n".join(html.escape(t) for t in texts), repeat // 4)
        print(f"render 50 results (half with diacritics): p50 {render:.3f} ms, p99 {render99:.3f} ms (target <= 2 ms); "
              f"baseline escape+join p50 {naive:.3f} ms; ratio {render / naive:.1f}x")

        (home / "dead").mkdir()
        dead = make_runtime(home / "dead", refused_url(), refused_url("/v1"))
        dead_recall = Recall(dead.recall_services(), host="pi", cwd=home / "proj")
        dead_recall.context(conversation(200, "open the breaker"))  # the first failure opens it
        counter = iter(range(10**9))
        opened, opened99 = timed(lambda: dead_recall.context(conversation(1, f"prompt {next(counter)}")), repeat)
        print(f"new prompt with the breakers open: p50 {opened:.4f} ms, p99 {opened99:.4f} ms (target <= 1 ms); "
              f"baseline cached call p50 {cached:.4f} ms; ratio {opened / cached:.1f}x")
        recall.close()
        dead_recall.close()
        rt.close()
        dead.close()


if __name__ == "__main__":
    main()
