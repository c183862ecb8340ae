"""The bench the Claude Code and Codex plugin tests share.

:class:`PluginHostTestCase` gives each test a throwaway HOME with: a scripted fake model API
(:mod:`tests.fakes.modelapi`) on 127.0.0.1; qmem configured against a gateway nobody listens on (so a
``qmem_store`` is queued locally and ``qmem_search`` answers from the local index); every other
address reached through a proxy nobody listens on (``NO_PROXY`` lets 127.0.0.1 through), so
nothing leaves the machine; a clone of this repository (the marketplace); a project directory full
of modules named like the standard library's, each of which leaves a marker when imported
(:mod:`tests.shadowing`); and a ``python3`` first on ``PATH`` that pre-imports none of them.

:func:`store_then_search` is the scripted model: after the host-specific first steps it calls
``qmem_store``, then ``qmem_search``, then answers with the search's result.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .fakes import FakeEmbeddings, FakeQdrant, embed_text, refused_url, unused_port
from .fakes.modelapi import Call, FakeModelAPI, Reply, tool_results
from .hostbench import DIM, RECALLED, make_clone
from .shadowing import clean_python, make_shadow_project, markers
from .support import clean_env

STORED = "The plugin e2e deploys of e2eproj run on Thursdays"
QUERY = "plugin e2e deploys"
PROJECT = "e2eproj"
ANSWER = "plugin run finished"


def store_then_search(first: list[Call], name: Callable[[str], Call]) -> Callable[[str, dict[str, Any]], Reply]:
    """The model: each call of ``first``, then ``qmem_store`` and ``qmem_search`` (``name`` makes the
    host's call for a qmem tool name), then a last word quoting the search's result."""
    steps = [*first, name("qmem_store"), name("qmem_search")]
    steps[-2].arguments = {"text": STORED, "project_id": PROJECT, "kind": "fact"}
    steps[-1].arguments = {"query": QUERY}

    def script(api: str, body: dict[str, Any]) -> Reply:
        results = tool_results(api, body)
        if len(results) < len(steps):
            return Reply(calls=[steps[len(results)]])
        return Reply(text=f"{ANSWER}: {results[-1][1][:400]}")

    return script


class PluginHostTestCase(unittest.TestCase):
    executable: Path | None = None

    def script(self, api: str, body: dict[str, Any]) -> Reply:
        raise NotImplementedError

    def setUp(self) -> None:
        super().setUp()
        python, reason = clean_python(minimum=(3, 10))
        if python is None:
            self.skipTest(reason)
        self.home = Path(tempfile.mkdtemp(prefix="plugin-host-"))
        self.addCleanup(shutil.rmtree, self.home, True)
        self.api = FakeModelAPI(lambda api, body: self.script(api, body)).start()
        self.addCleanup(self.api.stop)
        self.bin = self.home / "bin"
        self.bin.mkdir()
        (self.bin / "python3").symlink_to(python)
        self.markers = self.home / "markers"
        self.work = make_shadow_project(self.home / "work" / PROJECT, self.markers)
        self.clone = make_clone(self.home / "clone")
        proxy = f"http://127.0.0.1:{unused_port()}"
        self.env = clean_env(self.home, QMEM_GATEWAY_API_KEY="gw-key", NO_PROXY="127.0.0.1,localhost",
                             no_proxy="127.0.0.1,localhost", HTTP_PROXY=proxy, HTTPS_PROXY=proxy, ALL_PROXY=proxy,
                             http_proxy=proxy, https_proxy=proxy, all_proxy=proxy)
        for name in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT",
                     "CLAUDE_PROJECT_DIR", "CODEX_HOME", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
            self.env.pop(name, None)
        self.env["PATH"] = f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}"
        config = self.home / ".config" / "qmem" / "config.json"
        config.parent.mkdir(parents=True)
        config.write_text(json.dumps({"url": refused_url(), "connectTimeoutMs": 2000, "timeoutMs": 2000}))

    def git_source(self) -> str:
        """An HTTPS Git URL for a committed clone, offline: git's insteadOf (in this HOME's ``.gitconfig``)
        sends it to a local bare repository."""
        clone = make_clone(self.home / "src" / "qmem", commit=True)
        bare = self.home / "bare" / "qmem.git"
        subprocess.run(["git", "clone", "-q", "--bare", str(clone), str(bare)], check=True, capture_output=True,
                       timeout=60)
        url = "https://github.com/example/qmem.git"
        (self.home / ".gitconfig").write_text(f'[url "file://{bare}"]\n\tinsteadOf = {url}\n'
                                              '[protocol "file"]\n\tallow = always\n')
        self.env.update(GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0")
        return url

    def configure_recall(self) -> None:
        """Recall against a fake Qdrant (one curated point for ``host=pi``) and embeddings service; the lane
        comes from ``QMEM_HOST`` in the host's environment (the config names no ``recall.host``)."""
        qdrant = FakeQdrant(keys={"read-key": "r"}).start()
        embeddings = FakeEmbeddings(models={"bge-m3": DIM}).start()
        for fake in (qdrant, embeddings):
            self.addCleanup(fake.stop)
        qdrant.create_collection("qmem_memories", size=DIM)
        qdrant.add_point("qmem_memories", 1, embed_text(RECALLED, DIM), {
            "host": "pi", "status": "active", "secret_scan": "passed", "text": RECALLED, "project": PROJECT,
            "source_type": "hermes", "source_collection": "hermes_memories", "source_id": "1",
            "import_run_id": "cd" * 32, "transform_version": "hermes-v1", "created_at": "2026-01-01T00:00:00Z"})
        config = self.home / ".config" / "qmem" / "config.json"
        document = json.loads(config.read_text())
        document["recall"] = {"qdrantUrl": qdrant.url, "embeddingsUrl": embeddings.base_url, "dimension": DIM,
                              "timeoutMs": 5000}
        config.write_text(json.dumps(document))
        self.env.update(QMEM_HOST="pi", QMEM_QDRANT_API_KEY="read-key")

    def host(self, *args: str, cwd: Path | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
        assert self.executable is not None
        proc = subprocess.run([str(self.executable), *args], cwd=str(cwd or self.work), env=self.env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
        return proc

    def host_ok(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
        proc = self.host(*args, cwd=cwd)
        self.assertEqual(proc.returncode, 0, f"{args}: {proc.stdout}\n{proc.stderr}")
        return proc

    def local(self, *args: str) -> str:
        """``python3 -m qmem.local ARGS`` with the test's HOME (the qmem of this checkout)."""
        env = clean_env(self.home, PATH=self.env["PATH"])
        env.update({name: self.env[name] for name in ("CODEX_HOME",) if name in self.env})
        proc = subprocess.run([sys.executable, "-m", "qmem.local", *args], cwd=str(self.home), env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        self.assertIn(proc.returncode, (0, 1) if args[0] == "doctor" else (0,), proc.stderr)  # doctor: the gateway
        return proc.stdout

    def clone_local(self, *args: str) -> subprocess.CompletedProcess:
        """``python3 -m qmem.local ARGS`` of the clone, with the host's executable on PATH."""
        assert self.executable is not None
        env = dict(self.env, PATH=f"{self.executable.parent}{os.pathsep}{self.env['PATH']}")
        return subprocess.run([sys.executable, "-m", "qmem.local", *args], cwd=str(self.clone), env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)

    def assert_local_install_and_uninstall(self, host: str, root: Path) -> None:
        """``install HOST`` runs the host's commands and checks the server starts; ``uninstall HOST`` leaves
        no qmem file in the host's directory."""
        proc = self.clone_local("install", host, "--json")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        installed = json.loads(proc.stdout)
        self.assertEqual(installed["action"], "installed")
        self.assertEqual(len(installed["copies"]), 1, installed)
        self.assertEqual(self.clone_local("install", host).returncode, 0)  # again: nothing breaks
        proc = self.clone_local("uninstall", host, "--json")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(json.loads(proc.stdout)["action"], "removed")
        self.assertEqual(self.paths_named_qmem(root), [])
        self.assertEqual(self.files_mentioning(root, "qmem"), [])
        proc = self.clone_local("uninstall", host, "--json")
        self.assertEqual((proc.returncode, json.loads(proc.stdout)["action"]), (0, "not installed"), proc.stderr)

    def assert_doctor_sees(self, host: str) -> None:
        """doctor finds the host's install and its entry starts from the host's copy."""
        report = json.loads(self.local("doctor", "--json"))["plugins"][host]
        self.assertTrue(report["installed"], report)
        self.assertEqual([copy.get("starts") for copy in report["copies"]], [True], report)

    def assert_queued_locally(self) -> None:
        queue = self.local("queue", "--json")
        self.assertIn(STORED, queue)
        found = self.local("find", QUERY)
        self.assertIn(STORED, found)

    def assert_nothing_from_the_project(self) -> None:
        self.assertEqual(markers(self.markers), {})

    def paths_named_qmem(self, root: Path) -> list[str]:
        return sorted(str(path.relative_to(self.home)) for path in root.rglob("*")
                      if "qmem" in path.name.lower())

    def files_mentioning(self, root: Path, text: str) -> list[str]:
        found = []
        for path in root.rglob("*"):
            try:
                if path.is_file() and not path.is_symlink() and text in path.read_text(errors="replace"):
                    found.append(str(path.relative_to(self.home)))
            except OSError:
                continue
        return sorted(found)
