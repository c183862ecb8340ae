"""End to end with the real Hermes Agent 0.19.0: ``hermes chat -q`` turns, offline.

qmem is installed the way the README says (``python3 -m qmem.local install hermes``: a link in
``$HERMES_HOME/plugins`` and ``plugins.enabled`` in config.yaml) into a throwaway HOME, and Hermes
is started from a project directory (``work/e2eproj`` with a ``.git``).  Its model is a scripted
fake LLM on 127.0.0.1; qmem's gateway, Qdrant and embeddings are fakes too.  Every other address
goes through a proxy nobody listens on, so nothing leaves the machine, and Hermes' lazy installs
are off (``HERMES_DISABLE_LAZY_INSTALLS=1``): it would otherwise pip-install into its own venv.

The fakes are shared by a class (a Hermes turn costs seconds); each test has its own HOME.
The assertions read the requests the fake LLM received, Hermes' stderr and what Hermes left on
disk: ``state.db`` and every file under ``$HERMES_HOME`` and the project directory.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any

from qmem.diagnostics import SENTENCES
from qmem.fence.memorycontext import HEADER, OPEN_TAG

from .fakes import FakeEmbeddings, FakeGateway, FakeQdrant, Fault, embed_text, refused_url, unused_port
from .fakes.llm import FakeLLM, Reply, text_of
from .hosts import hermes_python
from .support import REPO, clean_env

DIM = 64
RECALLED = "Blue green deploys of e2eproj happen on Tuesdays after the canary"
ELIGIBLE = f"{RECALLED} (pi)"
#: Curated points that must never be recalled on a pi lane in e2eproj, by why.
INELIGIBLE = {"(prime)": {"host": "prime"}, "(archived)": {"status": "archived"},
              "(unscanned)": {"secret_scan": "pending"}, "(bad run id)": {"import_run_id": "not-hex"}}
RULES = "## qmem rules"
#: What qmem adds to a request, by lines only it writes there: the rules, a block's fixed header and the
#: recalled text.  (The tag itself is no mark: qmem's tool descriptions name it, and Hermes' request dumps
#: and session snapshots hold the tool schemas.)
RULES_TEXT = (RULES, "### Machine identification", "The qmem skill holds the full procedure")
RECALL_TEXT = (HEADER, RECALLED)
HIGH_USAGE = 60_000  # above 85% of the 64,000-token context configured below: Hermes compresses


def seed_curated(qdrant: FakeQdrant) -> None:
    """One eligible point for host pi in e2eproj and one ineligible point per rule, all alike."""
    qdrant.create_collection("qmem_memories", size=DIM)
    base = {"host": "pi", "status": "active", "secret_scan": "passed", "project": "e2eproj",
            "source_type": "hermes", "source_collection": "hermes_memories", "import_run_id": "cd" * 32,
            "transform_version": "hermes-v1", "created_at": "2026-01-01T00:00:00Z"}
    points = [("(pi)", {})] + list(INELIGIBLE.items())
    for number, (mark, change) in enumerate(points, 1):
        qdrant.add_point("qmem_memories", number, embed_text(RECALLED, DIM),
                         {**base, **change, "source_id": str(number), "text": f"{RECALLED} {mark}"})


def user_blocks(request: dict[str, Any]) -> list[str]:
    """The automatic recall blocks in a request: qmem blocks inside user messages."""
    return [text for m in request.get("messages") or [] if m.get("role") == "user"
            for text in [text_of(m.get("content"))] if OPEN_TAG in text]


def tool_names(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools") or []}


def current_prompt(request: dict[str, Any]) -> tuple[str, int]:
    """The text of the last user message and how many tool results follow it."""
    messages = request["messages"]
    last = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    return text_of(messages[last].get("content")), sum(1 for m in messages[last + 1:] if m.get("role") == "tool")


class HermesHostTestCase(unittest.TestCase):
    """The shared bench: fakes per class, a HOME with Hermes and qmem installed per test."""

    llm: FakeLLM

    @classmethod
    def setUpClass(cls) -> None:
        cls.python, reason = hermes_python()
        if cls.python is None:
            raise unittest.SkipTest(reason)
        cls.root = Path(tempfile.mkdtemp(prefix="qmem-hermes-"))
        cls.addClassCleanup(shutil.rmtree, cls.root, True)
        cls.llm = FakeLLM(cls.answer).start()
        cls.gateway = FakeGateway(api_key="gw-key").start()
        cls.qdrant = FakeQdrant(keys={"read-key": "r"}).start()
        cls.embeddings = FakeEmbeddings(models={"bge-m3": DIM}).start()
        for fake in (cls.llm, cls.gateway, cls.qdrant, cls.embeddings):
            cls.addClassCleanup(fake.stop)
        seed_curated(cls.qdrant)
        cls.proxy = f"http://127.0.0.1:{unused_port()}"

    # -- the fake model

    @classmethod
    def answer(cls, body: dict[str, Any]) -> Reply:
        names = tool_names(body)
        if not names:  # Hermes' auxiliary calls (a title, a compression summary): no tools, no middleware
            return Reply(text="A short summary of the earlier work.")
        prompt, done = current_prompt(body)
        if prompt.startswith("THREE"):
            steps = [("qmem_meta", {}), ("qmem_search", {"query": "deploys"}), ("qmem_meta", {})]
            return Reply(tool_calls=[steps[done]]) if done < len(steps) else Reply(text="three done")
        if prompt.startswith("AGAIN"):
            cls.llm.prompt_tokens = HIGH_USAGE if done == 0 else 10  # compress once, after the first request
            return Reply(tool_calls=[("qmem_meta", {})]) if done == 0 else Reply(text="again done")
        if prompt.startswith("DELEGATE"):
            goal = "CHILD: look up how blue green deploys work with memory_search"
            return Reply(tool_calls=[("delegate_task", {"goal": goal, "toolsets": ["qmem"]})]) if done == 0 \
                else Reply(text="parent done")
        if prompt.startswith("CHILD"):
            return Reply(tool_calls=[("memory_search", {"query": "blue green deploys"})]) if done == 0 \
                else Reply(text="child done")
        return Reply(tool_calls=[("qmem_meta", {})]) if done == 0 else Reply(text="one done")

    # -- a HOME with Hermes and qmem

    def setUp(self) -> None:
        super().setUp()
        for fake in (self.llm, self.gateway, self.qdrant, self.embeddings):
            fake.clear()
            fake.clear_faults()
        self.llm.prompt_tokens = 10
        self.home = Path(tempfile.mkdtemp(prefix="home-", dir=self.root))
        self.hermes_home = self.home / ".hermes"
        self.work = self.home / "work" / "e2eproj"
        (self.work / ".git").mkdir(parents=True)
        self.hermes_home.mkdir()
        (self.hermes_home / "config.yaml").write_text(
            "model:\n"
            f"  default: fake-model\n  provider: custom\n  base_url: {self.llm.url}/v1\n  context_length: 64000\n"
            "security:\n  allow_lazy_installs: false\n  tirith_enabled: false\n"
            "sessions:\n  write_json_snapshots: true\n"
            "compression:\n  protect_last_n: 2\n  protect_first_n: 1\n")
        no_proxy = "127.0.0.1,localhost"
        self.env = clean_env(self.home, HERMES_HOME=str(self.hermes_home), OPENAI_API_KEY="sk-fake",
                             HERMES_DISABLE_LAZY_INSTALLS="1", NO_COLOR="1", QMEM_GATEWAY_API_KEY="gw-key",
                             QMEM_QDRANT_API_KEY="read-key", HTTP_PROXY=self.proxy, HTTPS_PROXY=self.proxy,
                             ALL_PROXY=self.proxy, http_proxy=self.proxy, https_proxy=self.proxy,
                             NO_PROXY=no_proxy, no_proxy=no_proxy)
        installed = subprocess.run([sys.executable, "-m", "qmem.local", "install", "hermes"], env=self.env,
                                   cwd=self.home, capture_output=True, text=True, timeout=60)
        self.assertEqual(installed.returncode, 0, installed.stderr)
        self.assertTrue((self.hermes_home / "plugins" / "qmem").is_symlink())
        del self.env["PYTHONPATH"]  # Hermes finds qmem through its plugins directory, not the checkout
        self.configure()

    def configure(self, **recall: Any) -> None:
        """qmem's config: the fake gateway, and recall on the pi lane against the fakes (``recall`` overrides)."""
        document = {"url": self.gateway.url, "connectTimeoutMs": 5000, "timeoutMs": 5000,
                    "recall": {"qdrantUrl": self.qdrant.url, "embeddingsUrl": self.embeddings.base_url,
                               "dimension": DIM, "timeoutMs": 5000, "host": "pi", **recall}}
        path = self.home / ".config" / "qmem" / "config.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document))

    def hermes(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        launcher = "import sys; from hermes_cli.main import main; sys.argv[0] = 'hermes'; sys.exit(main())"
        proc = subprocess.run([str(self.python), "-c", launcher, *args], cwd=self.work, env=env or self.env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240)
        self.assertNotIn("Traceback", proc.stderr)
        return proc

    def chat(self, prompt: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return self.hermes("chat", "-q", prompt, "-Q", *args, env=env)

    # -- what the model got

    def main_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.llm.chat_requests if r.get("tools")]

    def assertRulesOnce(self, request: dict[str, Any]) -> None:
        messages = request["messages"]
        self.assertEqual(messages[0]["role"], "system")
        self.assertEqual(text_of(messages[0]["content"]).count(RULES), 1)
        self.assertEqual(json.dumps(request).count(RULES), 1)

    def assertRecalledOnce(self, request: dict[str, Any]) -> None:
        [block] = user_blocks(request)
        self.assertIn(ELIGIBLE, block)
        for mark in INELIGIBLE:
            self.assertNotIn(mark, json.dumps(request))

    def embedding_calls(self) -> int:
        return len(self.embeddings.requests_to("/v1/embeddings", "POST"))

    def qmem_warnings(self, stderr: str) -> list[str]:
        return [line for line in stderr.splitlines() if line.startswith("qmem:")]

    # -- what Hermes left on disk

    def stored_files(self) -> dict[Path, bytes]:
        """Every regular file under $HERMES_HOME and the project directory (the qmem link not followed)."""
        found = {}
        for top in (self.hermes_home, self.work):
            for directory, _dirs, files in os.walk(top):
                for name in files:
                    path = Path(directory) / name
                    if not path.is_symlink():
                        found[path] = path.read_bytes()
        return found

    def stored_rows(self) -> list[dict[str, Any]]:
        with sqlite3.connect(self.hermes_home / "state.db") as db:
            db.row_factory = sqlite3.Row
            return [dict(row) for row in db.execute("SELECT * FROM messages ORDER BY id")]

    def assertNothingStored(self, *, tool_results_in: tuple[str, ...] = ()) -> None:
        """Neither the rules nor a block in any file, nor a ``memory-context`` tag in a stored message.

        ``tool_results_in``: path fragments of the files that may hold an explicit ``memory_search``
        result, which Hermes stores as it stores any tool's answer.
        """
        files = self.stored_files()
        self.assertTrue(any(path.name == "state.db" for path in files))
        for path, data in files.items():
            holds_results = any(part in str(path) for part in tool_results_in)
            for text in RULES_TEXT + (() if holds_results else RECALL_TEXT):
                for form in {text, json.dumps(text)[1:-1]}:  # as written, and inside a JSON string
                    self.assertNotIn(form.encode(), data, f"{text[:30]!r} in {path.relative_to(self.home)}")
        rows = self.stored_rows()
        self.assertTrue(rows)
        self.assertEqual([row["id"] for row in rows if row["api_content"]], [])  # nothing added to a prompt
        tagged = [row for row in rows if "memory-context" in json.dumps(row)]
        self.assertEqual([row["role"] for row in tagged], ["tool"] * len(tagged) if tool_results_in else [])


class TurnTests(HermesHostTestCase):
    def test_three_tool_turn_then_resume_and_compression(self):
        env = dict(self.env, HERMES_DUMP_REQUESTS="1")
        proc = self.chat("THREE: how do blue green deploys work here", env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertIn("three done", proc.stdout)
        requests = self.main_requests()
        self.assertEqual(len(requests), 4)
        for request in requests:
            self.assertRulesOnce(request)
            self.assertRecalledOnce(request)
        self.assertIn('skill_view("qmem:qmem")', text_of(requests[0]["messages"][0]["content"]))
        self.assertEqual(self.embedding_calls(), 1)
        self.assertEqual(self.qmem_warnings(proc.stderr), [])
        for request in self.llm.chat_requests:
            if not request.get("tools"):  # a title: Hermes' auxiliary calls do not pass through the middleware
                self.assertNotIn(RULES, json.dumps(request))
                self.assertNotIn(OPEN_TAG, json.dumps(request))
        dumps = list((self.hermes_home / "sessions").glob("request_dump_*.json"))
        self.assertGreaterEqual(len(dumps), 4)  # written from Hermes' own request, before qmem's copy
        self.assertNothingStored()

        session_id = proc.stderr.split("session_id:")[1].split()[0]
        self.llm.clear()
        proc = self.chat("AGAIN: and which day do they happen", "--resume", session_id)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertIn("again done", proc.stdout)
        summaries = [r for r in self.llm.chat_requests if not r.get("tools") and "summar" in json.dumps(r).lower()]
        self.assertTrue(summaries, "Hermes did not compress the context")
        for request in summaries:
            self.assertNotIn(RULES, json.dumps(request))
            self.assertNotIn(OPEN_TAG, json.dumps(request))
        self.assertTrue(any(row["compacted"] for row in self.stored_rows()))
        requests = self.main_requests()
        self.assertGreaterEqual(len(requests), 2)
        for request in requests:
            self.assertRulesOnce(request)
            self.assertRecalledOnce(request)
            self.assertTrue(user_blocks(request)[0].startswith("AGAIN"))  # on this turn's prompt
        self.assertEqual(self.embedding_calls(), 2)
        self.assertNothingStored()

    def test_a_provider_error_dump_holds_hermes_own_request(self):
        self.llm.inject(Fault.status(400, {"error": {"message": "bad request", "type": "invalid_request_error"}},
                                     path="/v1/chat/completions", times=None))
        proc = self.chat("ONE: blue green deploys?")
        [sent, *_] = self.main_requests()
        self.assertRulesOnce(sent)  # the provider got them…
        self.assertRecalledOnce(sent)
        dumps = list((self.hermes_home / "sessions").glob("request_dump_*.json"))
        self.assertTrue(dumps, proc.stderr[-2000:])
        self.assertNothingStored()  # …the dump of the failed request did not

    def test_a_delegated_task_gets_no_automatic_recall_but_memory_search_answers(self):
        proc = self.hermes("-z", "DELEGATE: ask a helper about blue green deploys")
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertIn("parent done", proc.stdout)
        parent = [r for r in self.main_requests() if "delegate_task" in tool_names(r)]
        child = [r for r in self.main_requests() if "delegate_task" not in tool_names(r)]
        self.assertEqual((len(parent), len(child)), (2, 2))
        for request in parent:
            self.assertRulesOnce(request)
            self.assertRecalledOnce(request)
        for request in child:
            self.assertIn("memory_search", tool_names(request))
            self.assertRulesOnce(request)  # qmem's tools are offered to the child: the rules come with them
            self.assertEqual(user_blocks(request), [])
        [answer] = [m for m in child[1]["messages"] if m.get("role") == "tool"]
        self.assertIn(ELIGIBLE, text_of(answer["content"]))  # the explicit search answered
        self.assertEqual(self.embedding_calls(), 2)  # the parent's prompt and the child's query, nothing more
        # An explicit memory_search result is the tool's answer: Hermes stores it like any tool result.
        self.assertNothingStored(tool_results_in=("state.db", "delegation", "sessions/session_"))
        answers = [row for row in self.stored_rows() if HEADER in (row["content"] or "")]
        self.assertEqual([row["role"] for row in answers], ["tool"])


class FailOpenTests(HermesHostTestCase):
    def assertFailedOpen(self, proc: subprocess.CompletedProcess) -> None:
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertIn("one done", proc.stdout)
        [warning] = self.qmem_warnings(proc.stderr)
        self.assertIn(warning, SENTENCES.values())
        requests = self.main_requests()
        self.assertEqual(len(requests), 2)
        for request in requests:
            self.assertRulesOnce(request)
            self.assertEqual(user_blocks(request), [])
            text = json.dumps(request)
            for sentence in SENTENCES.values():
                self.assertNotIn(sentence, text)
        self.assertNothingStored()

    def test_qdrant_down(self):
        self.configure(qdrantUrl=refused_url())
        self.assertFailedOpen(self.chat("ONE: blue green deploys?"))
        self.assertEqual(self.embedding_calls(), 1)

    def test_embeddings_down(self):
        self.configure(embeddingsUrl=refused_url("/v1"))
        self.assertFailedOpen(self.chat("ONE: blue green deploys?"))
        self.assertEqual(self.qdrant.requests, [])

    def test_hung_qdrant(self):
        hung = FakeQdrant(keys={"read-key": "r"}).start()
        self.addCleanup(hung.stop)
        hung.inject(Fault.hang(times=None))
        self.configure(qdrantUrl=hung.url, timeoutMs=1500)
        self.assertFailedOpen(self.chat("ONE: blue green deploys?"))
        # Asked once — the collection and both lanes at the same moment — and given up on for the rest of the turn.
        self.assertEqual(len(hung.requests), 3)


class SlowRecallTests(HermesHostTestCase):
    """Issue 27: a slow Qdrant never holds up a Hermes turn; its block joins the turn's next request."""

    def recall_log(self) -> dict[str, Any]:
        proc = subprocess.run([sys.executable, "-m", "qmem.local", "recall-log", "--json"], cwd=self.home,
                              env=dict(self.env, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        for secret in ("blue green deploys?", "which day", RECALLED, "e2eproj happen"):
            self.assertNotIn(secret, proc.stdout)  # ids and numbers only
        return json.loads(proc.stdout)

    def test_a_slow_qdrant_block_lands_on_the_request_after_the_tool_call(self):
        self.configure(waitMs=100)
        self.qdrant.inject(Fault.delay(1.5, path="/collections", times=None))  # far above waitMs
        self.gateway.inject(Fault.delay(3.0, path="/v1/meta", times=None))  # the tool call outlasts the recall
        proc = self.chat("ONE: blue green deploys?")
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertIn("one done", proc.stdout)
        first, second = self.main_requests()
        self.assertEqual(user_blocks(first), [])  # not ready in time: the request went on without it
        self.assertRecalledOnce(second)
        self.assertEqual(self.qmem_warnings(proc.stderr), [])
        self.assertNothingStored()
        self.assertEqual([e["outcome"] for e in self.recall_log()["entries"]], ["late"])
        # Three slow calls in a row opened Qdrant's breaker, for every process: the next turn skips it.
        self.llm.clear()
        proc = self.chat("ONE: and which day?")
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertEqual([user_blocks(r) for r in self.main_requests()], [[], []])
        self.assertEqual([e["outcome"] for e in self.recall_log()["entries"]], ["skipped", "late"])
        self.assertEqual(self.embedding_calls(), 1)  # an open Qdrant breaker costs no embedding


if __name__ == "__main__":
    unittest.main()
