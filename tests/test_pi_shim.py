"""The pi shim (``index.js``) with the real pi: set up by ``install``, tools by recall, how the bridge is started,
an old Python's one line."""

import json
import sys

from . import test_pi_host  # the module, not its class: its tests run once, in their own module
from .hostbench import GREETING, QMEM_TOOLS, AgentHostTestCase, recording_python
from .support import REPO
from .test_entrypoints import OLD_PYTHON


class PiShimTests(AgentHostTestCase):
    AGENT_DIR = ".pi/agent"
    # The real pi, found and run the way the pi host tests do it.
    setUpClass = test_pi_host.PiHostTests.__dict__["setUpClass"]
    run_pi = test_pi_host.PiHostTests.run_pi

    def setUp(self):
        super().setUp()
        self.env.update(PI_OFFLINE="1", PI_SKIP_VERSION_CHECK="1")

    def offered(self, request):
        return {tool["function"]["name"] for tool in request["tools"]}

    def test_installed_by_the_cli_and_memory_search_only_with_recall(self):
        self.install()
        self.configure(self.gateway.url, recall=False)
        proc = self.run_pi("hello")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn(GREETING, proc.stdout)
        [request] = self.llm.chat_requests
        self.assertEqual(self.offered(request) & QMEM_TOOLS, QMEM_TOOLS - {"memory_search"})
        self.assertIn("qmem rules", request["messages"][0]["content"])
        self.assertEqual(self.embeddings.inputs, [])  # no recall configured: nothing sent
        self.configure(self.gateway.url, recall=True)
        proc = self.run_pi("hello again")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        request = self.llm.chat_requests[-1]
        self.assertTrue(QMEM_TOOLS <= self.offered(request))  # offered from the very first prompt
        self.assertIn("memory_search searches the curated collection", request["messages"][0]["content"])

    def test_a_copy_installed_by_the_cli_answers_the_local_command(self):
        self.install(copy=True)  # the one copy install of the pi tests
        self.configure(self.gateway.url, recall=False)
        proc = self.run_pi("/qmem:local status")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("schema", proc.stderr)  # print mode sends an extension's output to stderr

    def test_the_bridge_runs_in_qmems_parent_with_only_what_it_needs(self):
        """Started outside the session's directory, the session's cwd as data, no provider key, no PYTHONPATH of the host's."""
        self.install()
        env = dict(self.env, QMEM_PYTHON=str(recording_python(self.home, sys.executable)),
                   OPENAI_API_KEY="sk-provider-key-of-the-host", PYTHONPATH="/somewhere/else", PYTHONSTARTUP="/x.py",
                   LC_ALL="C.UTF-8", HTTPS_PROXY="", PRIME_AGENT_INTERNAL_DAEMON_WORKER_TOKEN="daemon-secret",
                   PYTHONHOME=sys.base_prefix, LD_LIBRARY_PATH=str(self.home))  # what a QMEM_PYTHON may need
        proc = self.run_pi("hello", env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        started = json.loads((self.home / "bridge-start.json").read_text())
        self.assertEqual(started["cwd"], str(REPO))  # the parent of the linked qmem folder
        self.assertEqual(started["argv"][0], "-c")
        bridge_env = started["env"]
        self.assertEqual((bridge_env["PYTHONPATH"], bridge_env["PYTHONSAFEPATH"]), (str(REPO), "1"))
        for name in ("HOME", "PATH", "QMEM_GATEWAY_API_KEY", "QMEM_QDRANT_API_KEY", "LC_ALL", "HTTPS_PROXY",
                     "PYTHONHOME", "LD_LIBRARY_PATH"):
            self.assertIn(name, bridge_env)
        for name in ("OPENAI_API_KEY", "PYTHONSTARTUP", "PRIME_AGENT_INTERNAL_DAEMON_WORKER_TOKEN", "PI_CODING_AGENT"):
            self.assertNotIn(name, bridge_env)
        [request] = self.llm.chat_requests
        self.assertIn('for this repository use "e2eproj"', request["messages"][0]["content"])  # the cwd, as data

    def test_an_old_python_is_the_one_warning(self):
        if not OLD_PYTHON.exists():
            self.skipTest(f"no Python 3.9 at {OLD_PYTHON} to start the bridge with")
        self.install()
        proc = self.run_pi("hello", env=dict(self.env, QMEM_PYTHON=str(OLD_PYTHON)))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn(GREETING, proc.stdout)  # pi goes on without memory
        self.assertEqual(proc.stderr.count("qmem needs Python ≥ 3.10, found 3.9 (set QMEM_PYTHON)"), 1, proc.stderr)
        self.assertNotIn("memory bridge stopped", proc.stderr)
        # The bridge never answered session_start, so no qmem tool is offered (none would work this session).
        [request] = self.llm.chat_requests
        self.assertEqual(self.offered(request) & QMEM_TOOLS, set())
        self.configure(self.gateway.url, recall=False)
        proc = self.run_pi("hello again")  # a later session with a working Python offers them again
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(self.offered(self.llm.chat_requests[-1]) & QMEM_TOOLS, QMEM_TOOLS - {"memory_search"})
