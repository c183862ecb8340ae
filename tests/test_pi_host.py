"""End to end with the real pi: the qmem folder in the extensions directory, fake services.

pi runs in print mode (``pi -p … < /dev/null``) with a throwaway HOME, a custom provider
pointing at a scripted fake LLM on 127.0.0.1, and qmem configured against fake gateway,
Qdrant and embeddings servers.  The assertions read the fake LLM's request log, pi's
session file, pi's stderr and the fakes' state.
"""

import json
import subprocess
import sys
import unittest
import uuid

from qmem.localindex import LocalIndex

from .fakes import refused_url
from .hostbench import GREETING, QMEM_TOOLS, RECALLED, AgentHostTestCase, recall_blocks
from .hosts import pi_executable


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

    def prime_session(self, depth):
        """A Prime-style session file (Prime's header carries rlmDepth), and its folder under ~/.prime/agent."""
        extension = self.install(self.home / ".prime" / "agent")
        header = {"type": "session", "version": 3, "id": str(uuid.uuid4()), "timestamp": "2026-11-29T10:00:00.000Z",
                  "cwd": str(self.work)}
        if depth is not None:
            header["rlmDepth"] = depth
        session = self.home / "prime-session.jsonl"
        session.write_text(json.dumps(header) + "\n")
        return ["-e", str(extension / "index.js"), "--session", str(session)]

    def test_prime_subagent_gets_no_recall_but_keeps_the_tool(self):
        proc = self.run_pi("hello", *self.prime_session(depth=1))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        [request] = self.llm.chat_requests
        self.assertEqual(self.blocks(request), 0)
        self.assertIn("memory_search", {tool["function"]["name"] for tool in request["tools"]})
        self.assertEqual(self.embeddings.inputs, [])

    def test_prime_root_session_recalls_prime_memories(self):
        proc = self.run_pi("how do blue green deploys work here", *self.prime_session(depth=0))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        [request] = self.llm.chat_requests
        self.assertEqual(self.blocks(request), 1)
        text = json.dumps(request)
        self.assertIn("(prime)", text)
        self.assertNotIn("(pi)", text)

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

    def test_local_command_in_print_mode(self):
        self.install()
        self.run_pi("STORE Findable from the slash command")
        calls = len(self.llm.chat_requests)
        proc = self.run_pi("/qmem:local find slash command")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        # Outside the interactive TUI, pi sends everything an extension writes to stdout to stderr.
        self.assertIn("Findable from the slash command", proc.stderr)
        self.assertEqual(len(self.llm.chat_requests), calls)  # a command is not a prompt: no LLM call
