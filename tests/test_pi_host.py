"""End to end with the real pi: qmem installed as the README says, fake services.

``python3 -m qmem.local install pi`` (a link into this checkout) for most tests, ``pi install
<clone>`` and ``pi install git:…`` (pi's own installer, through the root ``package.json``) for
two; the copy install is in ``tests/test_pi_shim.py``.

pi runs in print mode (``pi -p … < /dev/null``) with a throwaway HOME, a custom provider
pointing at a scripted fake LLM on 127.0.0.1, and qmem configured against fake gateway,
Qdrant and embeddings servers.  The assertions read the fake LLM's request log, pi's
session file, pi's stderr and the fakes' state.
"""

import json
import os
import subprocess
import sys
import unittest
import uuid

from qmem.diagnostics import SENTENCES
from qmem.localindex import LocalIndex

from .fakes import refused_url
from .hostbench import (
    EVERY_DONE, EVERY_TOOL, GREETING, QMEM_TOOLS, RECALLED, SLOW_PROMPT, AgentHostTestCase, assert_every_tool_answered,
    make_clone, recall_blocks,
)
from .hosts import pi_executable
from .shadowing import clean_python, make_shadow_project, markers


class PiHostTests(AgentHostTestCase):
    AGENT_DIR = ".pi/agent"

    @classmethod
    def setUpClass(cls):
        cls.pi, reason = pi_executable()
        if cls.pi is None:
            raise unittest.SkipTest(reason)

    def setUp(self):
        super().setUp()
        self.env.update(PI_OFFLINE="1", PI_SKIP_VERSION_CHECK="1")

    def run_pi(self, prompt, *args, env=None):
        proc = subprocess.run([str(self.pi), *args, "-p", prompt], cwd=self.work, env=env or self.env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        self.assertNotIn("Extension error", proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        return proc

    def sessions(self):
        return list((self.home / ".pi" / "agent" / "sessions").rglob("*.jsonl"))

    def blocks(self, request):
        return len(recall_blocks(request))

    def test_tools_store_and_recall(self):
        self.install()
        proc = self.run_pi("STORE The e2e gateway listens on port 8443")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("done: Stored", proc.stdout)
        requests = self.llm.chat_requests
        self.assertEqual(len(requests), 2)  # the tool call, then the answer after its result
        offered = {tool["function"]["name"] for tool in requests[0]["tools"]}
        self.assertTrue(QMEM_TOOLS <= offered, offered)
        system = requests[0]["messages"][0]["content"]
        self.assertIn("qmem rules", system)
        self.assertIn("Machine identification", system)
        self.assertIn("project_id is mandatory", system)
        for request in requests:
            self.assertEqual(self.blocks(request), 1)  # one block per LLM call, never stacked
            [recalled] = recall_blocks(request)
            self.assertIn(f"{RECALLED} (pi)", recalled)
            self.assertNotIn("(prime)", recalled)
        self.assertEqual(len(self.embeddings.inputs), 1)  # cached across the tool loop
        self.assertEqual(self.gateway.count_by_text(), {"The e2e gateway listens on port 8443": 1})
        [session] = self.sessions()
        content = session.read_text()
        self.assertNotIn("memory-context", content)
        self.assertNotIn(RECALLED, content)
        result = [json.loads(line)["message"] for line in content.splitlines()
                  if '"toolResult"' in line and "qmem_store" in line][0]
        self.assertEqual((result["details"]["qmem"], result["details"]["shared"]), (1, True))

    def test_gateway_down_goes_to_the_outbox(self):
        self.install()
        self.configure(refused_url())
        proc = self.run_pi("STORE Written while the gateway is away")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("NOT yet shared", proc.stdout)
        with LocalIndex(self.home / ".local" / "share" / "qmem" / "qmem.sqlite") as index:
            [record] = index.find("gateway away").records
            self.assertEqual(record.state, "pending")

    def test_pi_running_primes_folder_is_ambiguous_and_gets_no_recall(self):
        """pi loading the folder `install prime` made, on a Prime-style session: the facts disagree, so recall is off."""
        prime = self.install(self.home / ".prime" / "agent")  # made by `install pi` with the agent dir moved there
        header = {"type": "session", "version": 3, "id": str(uuid.uuid4()), "timestamp": "2026-11-29T10:00:00.000Z",
                  "cwd": str(self.work), "rlmDepth": 0}
        session = self.home / "prime-session.jsonl"
        session.write_text(json.dumps(header) + "\n")
        proc = self.run_pi("how do blue green deploys work here", "-e", str(prime / "index.js"), "--session",
                           str(session))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        [request] = self.llm.chat_requests
        self.assertEqual(self.blocks(request), 0)
        offered = {tool["function"]["name"] for tool in request["tools"]}
        self.assertEqual(offered & QMEM_TOOLS, QMEM_TOOLS - {"memory_search"})  # no lane: no curated search
        self.assertEqual(self.embeddings.inputs, [])
        self.assertIn(SENTENCES["host"], proc.stderr)
        # The fixes the warning names turn recall on.  Here (a Prime header, rlmDepth 0) QMEM_HOST=prime does:
        # a header with rlmDepth is never pi's, so QMEM_HOST=pi could not make it one.
        fixed = self.run_pi("how do blue green deploys work here", "-e", str(prime / "index.js"), "--session",
                            str(session), env=dict(self.env, QMEM_HOST="prime"))
        self.assertEqual(fixed.returncode, 0, fixed.stderr)
        [recalled] = recall_blocks(self.llm.chat_requests[-1])
        self.assertIn(f"{RECALLED} (prime)", recalled)
        self.assertNotIn(SENTENCES["host"], fixed.stderr)
        # A pi session of its own (no header) loading Prime's folder: ambiguous too, and QMEM_HOST=pi settles it.
        before = len(self.llm.chat_requests)
        plain = self.run_pi("how do blue green deploys work here", "-e", str(prime / "index.js"))
        self.assertIn(SENTENCES["host"], plain.stderr)
        self.assertEqual(recall_blocks(self.llm.chat_requests[before]), [])
        fixed = self.run_pi("how do blue green deploys work here", "-e", str(prime / "index.js"),
                            env=dict(self.env, QMEM_HOST="pi"))
        self.assertNotIn(SENTENCES["host"], fixed.stderr)
        [recalled] = recall_blocks(self.llm.chat_requests[-1])
        self.assertIn(f"{RECALLED} (pi)", recalled)

    def test_pi_still_answers_without_python(self):
        self.install()
        env = dict(self.env, QMEM_PYTHON=str(self.home / "no-such-python"))
        proc = self.run_pi("hello", env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn(GREETING, proc.stdout)
        self.assertEqual(proc.stderr.count("memory bridge stopped"), 1)  # one warning, not one per event

    def test_pi_still_answers_when_the_bridge_crashes_or_hangs(self):
        self.install()
        hung = self.home / "hung-python"
        hung.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import sys\nfor _ in sys.stdin: pass'\n")
        hung.chmod(0o755)
        for interpreter in ("/bin/false", str(hung)):
            with self.subTest(interpreter=interpreter):
                env = dict(self.env, QMEM_PYTHON=interpreter, QMEM_HOOK_TIMEOUT_MS="1500")
                proc = self.run_pi("hello", env=env)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertIn(GREETING, proc.stdout)
                self.assertEqual(proc.stderr.count("memory bridge stopped"), 1)

    def assertRecallsAsPi(self, proc):
        self.assertEqual(proc.returncode, 0, proc.stderr)
        [request] = self.llm.chat_requests
        self.assertTrue(QMEM_TOOLS <= {tool["function"]["name"] for tool in request["tools"]})
        [recalled] = recall_blocks(request)
        self.assertIn(f"{RECALLED} (pi)", recalled)
        self.assertNotIn("(prime)", recalled)
        self.assertNotIn("Failed to load", proc.stderr)

    def test_pi_install_of_a_clone(self):
        """pi's own installer: `pi install <clone>` reads the root package.json's pi manifest (nothing is copied)."""
        clone = make_clone(self.home / "src" / "qmem")
        proc = subprocess.run([str(self.pi), "install", str(clone)], cwd=self.work, env=self.env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        settings = json.loads((self.agent / "settings.json").read_text())
        self.assertEqual(settings["packages"], [os.path.relpath(clone, self.agent)])
        self.assertFalse((self.agent / "extensions").exists())
        self.assertRecallsAsPi(self.run_pi("how do blue green deploys work here"))

    def test_pi_install_from_git(self):
        """`pi install git:github.com/…`, offline: git's insteadOf sends the URL to a local bare repository."""
        clone = make_clone(self.home / "src" / "qmem", commit=True)
        bare = self.home / "bare" / "qmem.git"
        subprocess.run(["git", "clone", "-q", "--bare", str(clone), str(bare)], check=True, capture_output=True,
                       timeout=60)
        (self.home / ".gitconfig").write_text(f'[url "file://{bare}"]\n\tinsteadOf = https://github.com/example/qmem\n')
        env = dict(self.env, GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0", npm_config_offline="true",
                   npm_config_audit="false", npm_config_fund="false", npm_config_update_notifier="false")
        proc = subprocess.run([str(self.pi), "install", "git:github.com/example/qmem"], cwd=self.work, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        installed = self.agent / "git" / "github.com" / "example" / "qmem"
        self.assertTrue((installed / "qmem" / "index.js").is_file())
        self.assertEqual(json.loads((self.agent / "settings.json").read_text())["packages"],
                         ["git:github.com/example/qmem"])
        self.assertRecallsAsPi(self.run_pi("how do blue green deploys work here"))

    def test_nothing_from_the_project_is_imported(self):
        """The session's directory holds json.py, uuid.py… and a qmem package: the bridge imports none, on 3.11+ and 3.10."""
        self.install()
        imported = self.home / "markers"
        make_shadow_project(self.work, imported)
        for label, wanted in (("3.11+", {"minimum": (3, 11)}), ("3.10", {"exactly": (3, 10)})):
            python, reason = clean_python(**wanted)
            if python is None:
                self.skipTest(reason)
            with self.subTest(python=label):
                for old in self.sessions():
                    old.unlink()
                before = len(self.llm.chat_requests)
                proc = self.run_pi(EVERY_TOOL, env=dict(self.env, QMEM_PYTHON=str(python)))
                self.assertEqual(markers(imported), {})
                self.assertIn(EVERY_DONE, proc.stdout)
                [session] = self.sessions()
                assert_every_tool_answered(self, session, f"{RECALLED} (pi)")
                for request in self.llm.chat_requests[before:]:
                    self.assertEqual(self.blocks(request), 1)

    def test_local_command_in_print_mode(self):
        self.install()
        self.run_pi("STORE Findable from the slash command")
        calls = len(self.llm.chat_requests)
        proc = self.run_pi("/qmem:local find slash command")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        # Outside the interactive TUI, pi sends everything an extension writes to stdout to stderr.
        self.assertIn("Findable from the slash command", proc.stderr)
        self.assertEqual(len(self.llm.chat_requests), calls)  # a command is not a prompt: no LLM call

    def test_a_slow_qdrant_block_lands_on_the_request_after_the_tool_call(self):
        """Issue 27: the turn goes on without waiting; the block joins the request after the tool call;
        nothing of it is written; the recall log says late, then skipped once the breaker opened."""
        self.install()
        self.configure_slow_recall()
        proc = self.run_pi(SLOW_PROMPT)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("done: Stored", proc.stdout)
        first, second = self.llm.chat_requests
        self.assertEqual(self.blocks(first), 0)  # not ready in time: the request went on without it
        [recalled] = recall_blocks(second)
        self.assertIn(f"{RECALLED} (pi)", recalled)
        [session] = self.sessions()
        self.assertNotIn("memory-context", session.read_text())
        self.assertNotIn(RECALLED, session.read_text())
        self.assertEqual([e["outcome"] for e in self.recall_log()], ["late"])
        self.llm.clear()
        self.assertEqual(self.run_pi("hello").returncode, 0)
        [request] = self.llm.chat_requests
        self.assertEqual(self.blocks(request), 0)
        self.assertEqual([e["outcome"] for e in self.recall_log()], ["skipped", "late"])
        self.assertEqual(len(self.embeddings.inputs), 1)

