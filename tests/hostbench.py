"""The bench that the pi and Prime end-to-end tests share.

:class:`AgentHostTestCase` gives each test a throwaway HOME with: a scripted fake LLM, a fake
Memory Gateway, Qdrant (one curated point for ``host=pi`` and one for ``host=prime``, same
text) and embeddings server, all on 127.0.0.1; a project directory (``work/e2eproj`` with a
``.git``); and the host's agent directory (``AGENT_DIR``) whose ``models.json`` names the
fake LLM as provider ``fake``.  :meth:`~AgentHostTestCase.install` installs qmem the README's
way (``python3 -m qmem.local install HOST``, a link; ``--copy`` on request).  The host itself
is run by the subclass.

:func:`script` is what the fake LLM answers: ``STORE <text>`` → a ``qmem_store`` call; after a
tool result → ``done: <result>``; a session that began with ``EVERY TOOL`` → each of
:data:`EVERY_TOOL_STEPS` in turn; anything else → a greeting.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any

from .fakes import FakeEmbeddings, FakeGateway, FakeQdrant, Fault, embed_text
from .fakes.llm import FakeLLM, Reply, after_last_assistant, text_of
from .support import REPO, clean_env

DIM = 64
BLOCK = '<memory-context trust="untrusted">'
RECALLED = "Blue green deploys of e2eproj happen on Tuesdays after the canary"
QMEM_TOOLS = {"qmem_store", "qmem_search", "qmem_correct", "qmem_meta", "qmem_get", "memory_search"}
GREETING = "hello from the fake llm"
EVERY_TOOL = "EVERY TOOL"  # a prompt that makes the fake LLM call each of these, in turn
EVERY_TOOL_STEPS = [("qmem_store", {"text": "Stored by every tool", "project_id": "e2eproj", "kind": "fact"}),
                    ("qmem_search", {"query": "stored by every tool"}), ("qmem_meta", {}),
                    ("memory_search", {"query": "blue green deploys"})]
EVERY_DONE = "every tool answered"
SLOW_PROMPT = "STORE Slow recall turns keep going"  # a store: the tool call the late block waits for


def prompt_of(body: dict[str, Any]) -> str:
    """The user's words in the newest turn, recall blocks left out."""
    user = [text_of(m.get("content")) for m in after_last_assistant(body) if m.get("role") == "user"]
    return next((text for text in user if not text.startswith(BLOCK)), "")


def first_prompt(body: dict[str, Any]) -> str:
    """The session's first user words (recall blocks left out)."""
    user = (text_of(m.get("content")) for m in body.get("messages") or [] if m.get("role") == "user")
    return next((text for text in user if not text.startswith(BLOCK)), "")


def script(body: dict[str, Any]) -> Reply:
    if first_prompt(body).startswith(EVERY_TOOL):  # one tool after the other, then a last word
        done = sum(1 for m in body.get("messages") or [] if m.get("role") == "tool")
        return Reply(tool_calls=[EVERY_TOOL_STEPS[done]]) if done < len(EVERY_TOOL_STEPS) else Reply(text=EVERY_DONE)
    tool_results = [m for m in after_last_assistant(body) if m.get("role") == "tool"]
    if tool_results:
        return Reply(text="done: " + text_of(tool_results[-1].get("content"))[:200])
    prompt = prompt_of(body)
    if prompt.startswith("STORE "):
        return Reply(tool_calls=[("qmem_store", {"text": prompt[6:], "project_id": "e2eproj", "kind": "fact"})])
    return Reply(text=GREETING)


def tool_results(session: Path) -> dict[str, tuple[bool, str]]:
    """Each tool's result in a session file: (isError, its text)."""
    results = {}
    for line in session.read_text().splitlines():
        message = json.loads(line).get("message") or {}
        if message.get("role") == "toolResult":
            results[message.get("toolName")] = (message.get("isError") is True, text_of(message.get("content")))
    return results


def assert_every_tool_answered(test: Any, session: Path, recalled: str) -> None:
    """Every tool of :data:`EVERY_TOOL_STEPS` ran in ``session`` without an error, and
    ``memory_search`` found the ``recalled`` text."""
    results = tool_results(session)
    test.assertEqual(set(results), {name for name, _ in EVERY_TOOL_STEPS})
    for name, (failed, text) in results.items():
        test.assertFalse(failed, f"{name}: {text}")
    test.assertIn(recalled, results["memory_search"][1])


def recall_blocks(request: dict[str, Any]) -> list[str]:
    """Recall messages in one LLM request (the system prompt mentions the tag too, as a rule)."""
    return [text_of(m.get("content")) for m in request["messages"]
            if m.get("role") == "user" and text_of(m.get("content")).startswith(BLOCK)]


def make_clone(destination: Path, *, commit: bool = False) -> Path:
    """A clone of this repository as a host's installer sees it: the root ``package.json``, the
    marketplace (``.claude-plugin/``) and the ``qmem`` folder of the working tree (caches left out);
    ``commit``: a git work tree with one commit."""
    destination.mkdir(parents=True)
    shutil.copy2(REPO / "package.json", destination / "package.json")
    shutil.copytree(REPO / ".claude-plugin", destination / ".claude-plugin")
    shutil.copytree(REPO / "qmem", destination / "qmem", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if commit:
        git = ["git", "-C", str(destination), "-c", "user.name=qmem tests", "-c", "user.email=tests@qmem.invalid"]
        env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
        for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "qmem"]):
            subprocess.run([*git, *args], check=True, capture_output=True, env=env, timeout=60)
    return destination


def recording_python(directory: Path, python: Path | str) -> Path:
    """A QMEM_PYTHON that writes its working directory and environment to ``bridge-start.json``, then
    runs ``python`` with its arguments: what the shim starts the bridge with."""
    path = directory / "recording-python"
    record = directory / "bridge-start.json"
    path.write_text(f"#!{python}\nimport json, os, sys\n"
                    f"json.dump({{'cwd': os.getcwd(), 'env': dict(os.environ), 'argv': sys.argv[1:]}}, "
                    f"open({str(record)!r}, 'w'))\n"
                    f"os.execv({str(python)!r}, [{str(python)!r}, *sys.argv[1:]])\n")
    path.chmod(0o755)
    return path


class AgentHostTestCase(unittest.TestCase):
    HOST = "pi"  # what `qmem.local install` is given
    AGENT_DIR = ".pi/agent"  # relative to HOME
    AGENT_VARIABLE = "PI_CODING_AGENT_DIR"  # what moves it

    def script(self, body: dict[str, Any]) -> Reply:
        return script(body)

    def setUp(self) -> None:
        super().setUp()
        self.home = Path(tempfile.mkdtemp(prefix="qmem-host-"))
        self.addCleanup(shutil.rmtree, self.home, True)
        self.llm = FakeLLM(self.script).start()
        self.gateway = FakeGateway(api_key="gw-key").start()
        self.qdrant = FakeQdrant(keys={"read-key": "r"}).start()
        self.embeddings = FakeEmbeddings(models={"bge-m3": DIM}).start()
        for fake in (self.llm, self.gateway, self.qdrant, self.embeddings):
            self.addCleanup(fake.stop)
        self.qdrant.create_collection("qmem_memories", size=DIM)
        for point, host in ((1, "pi"), (2, "prime")):
            self.qdrant.add_point("qmem_memories", point, embed_text(RECALLED, DIM), {
                "host": host, "status": "active", "secret_scan": "passed", "text": f"{RECALLED} ({host})",
                "project": "e2eproj", "source_type": "hermes", "source_collection": "hermes_memories",
                "source_id": str(point), "import_run_id": "cd" * 32, "transform_version": "hermes-v1",
                "created_at": "2026-01-01T00:00:00Z"})
        self.work = self.home / "work" / "e2eproj"
        (self.work / ".git").mkdir(parents=True)
        self.agent = self.home / self.AGENT_DIR
        self.write_models(self.agent)
        self.env = clean_env(self.home, QMEM_PYTHON=sys.executable, QMEM_GATEWAY_API_KEY="gw-key",
                             QMEM_QDRANT_API_KEY="read-key")
        del self.env["PYTHONPATH"]  # the shim must find qmem on its own
        self.configure(self.gateway.url)

    def write_models(self, agent: Path) -> None:
        agent.mkdir(parents=True, exist_ok=True)
        (agent / "models.json").write_text(json.dumps({"providers": {"fake": {
            "baseUrl": self.llm.url + "/v1", "api": "openai-completions", "apiKey": "sk-fake",
            "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
            "models": [{"id": "fake-model", "contextWindow": 32000, "maxTokens": 1024}]}}}))
        (agent / "settings.json").write_text(json.dumps({
            "defaultProvider": "fake", "defaultModel": "fake-model", "quietStartup": True,
            "retry": {"enabled": False, "provider": {"maxRetries": 0}}, "compaction": {"enabled": False}}))

    def configure(self, url: str, recall: bool = True) -> None:
        """Write qmem's config: the gateway at ``url`` and, with ``recall``, the fake Qdrant and embeddings."""
        path = self.home / ".config" / "qmem" / "config.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        document: dict[str, Any] = {"url": url, "connectTimeoutMs": 5000, "timeoutMs": 5000}
        if recall:
            # waitMs as long as the timeout: these tests are about what a request carries, not when it is
            # ready, on a loaded machine; the slow-recall tests set their own (configure_slow_recall).
            document["recall"] = {"qdrantUrl": self.qdrant.url, "embeddingsUrl": self.embeddings.base_url,
                                  "dimension": DIM, "timeoutMs": 5000, "waitMs": 5000}
        path.write_text(json.dumps(document))

    def install(self, agent: Path | None = None, *, copy: bool = False) -> Path:
        """Install qmem as the README says: ``python3 -m qmem.local install HOST`` from the clone (a link into
        this checkout; ``copy``: ``--copy``), into ``agent`` (moved by the host's variable) or the default."""
        env = {key: value for key, value in self.env.items() if key != "PYTHONPATH"}
        if agent is not None and agent != self.agent:
            env[self.AGENT_VARIABLE] = str(agent)
        proc = subprocess.run([sys.executable, "-m", "qmem.local", "install", self.HOST, *(["--copy"] if copy else [])],
                              cwd=REPO, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            raise AssertionError(f"install {self.HOST} failed: {proc.stderr}")
        target = (agent or self.agent) / "extensions" / "qmem"
        if copy != (not target.is_symlink()):
            raise AssertionError(f"install {self.HOST} made {'a link' if target.is_symlink() else 'a copy'}")
        return target

    # -- issue 27: a slow Qdrant never holds up a turn

    def configure_slow_recall(self) -> None:
        """Recall on, waitMs 100; Qdrant answers each request 1.5 s late and a store takes 3 s, so a
        turn's first LLM request cannot have the block and the request after the tool call can."""
        self.configure(self.gateway.url)
        path = self.home / ".config" / "qmem" / "config.json"
        document = json.loads(path.read_text())
        document["recall"]["waitMs"] = 100
        path.write_text(json.dumps(document))
        self.qdrant.inject(Fault.delay(1.5, path="/collections", times=None))
        self.gateway.inject(Fault.delay(3.0, path="/v1/memories", method="POST", times=None))

    def recall_log(self) -> list[dict[str, Any]]:
        """``qmem.local recall-log --json``'s entries; the output holds no prompt and no memory text."""
        proc = subprocess.run([sys.executable, "-m", "qmem.local", "recall-log", "--json"], cwd=self.home,
                              env=dict(self.env, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            raise AssertionError(proc.stderr)
        for secret in (SLOW_PROMPT, SLOW_PROMPT[6:], RECALLED, "e2eproj happen"):
            if secret in proc.stdout:
                raise AssertionError(f"recall-log shows {secret!r}")
        return json.loads(proc.stdout)["entries"]

