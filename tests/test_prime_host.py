"""End to end with the real Prime Agent 0.8.0: the qmem folder in ``~/.prime/agent/extensions``.

Prime (``prime-agent``, a pi fork built from its MIT source; see ``tests/hosts.py``) runs on
its own Node, in print mode (``-p … < /dev/null``) or as an RPC client (``--mode rpc``: JSON
lines on stdin/stdout, the protocol Prime's own UIs use).  Every run gets this test's HOME,
``TMPDIR`` and ``--daemon-socket``: Prime hands each prompt to a background daemon that
outlives the command and by default is shared by every HOME of the user.  Cleanup ends every
process whose environment carries this test's HOME, each by its pid.

What Prime 0.8.0 does that pi does not, and these tests rely on:

* the extension runs inside a daemon *worker*: its stdout and stderr go to the daemon's log,
  never to the print client, and ``ctx.hasUI`` is true even in print mode, where the print
  client drops every notification — so command output and warnings are checked over RPC;
* a notification sent during ``session_start`` is lost (no client is attached yet);
* a sub-agent made by ``await rlm(...)`` in the ``ipython`` tool is a separate session in the
  same worker, with its own extension instance and a header ``{"rlmDepth": 1,
  "parentSession": …}``, written to ``session-artifacts/<root id>/sub-<8 hex>/<id>.jsonl``; its
  task arrives as a ``custom_message`` (``agent_message``), not as a user message, and so does
  the parent's notice that the child finished (``rlm_child_terminal_notice``);
* MCP servers added with ``prime-agent mcp add`` are reached from the kernel
  (``await mcp.call_tool(...)``), with only a small ambient environment plus ``--env`` references.

Prime's kernel (``PRIME_AGENT_KERNEL_PYTHON``) is installed by ``.ci/run`` as its own host, so
only :class:`PrimeKernelTests` needs it.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
import unittest
from pathlib import Path
from typing import Any

from .fakes import refused_url
from .fakes.llm import Reply, after_last_assistant, text_of
from .hostbench import (
    EVERY_DONE, EVERY_TOOL, GREETING, QMEM_TOOLS, RECALLED, SLOW_PROMPT, AgentHostTestCase, assert_every_tool_answered,
    make_clone, prompt_of, recall_blocks, recording_python, script,
)
from .hosts import prime_executable, prime_kernel_python
from .shadowing import clean_python, make_shadow_project, markers
from .support import REPO

BRIDGE_STOPPED = "the memory bridge stopped"
RUN_TIMEOUT = 120


# --- processes -----------------------------------------------------------------------------

def processes_of(home: Path) -> list[int]:
    """Pids of the processes whose environment has HOME = ``home`` (Prime's daemon, workers, kernels, bridges)."""
    marker = b"HOME=" + os.fsencode(home)
    found = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                variables = handle.read().split(b"\0")
        except OSError:
            continue  # gone, or not ours to read
        if marker in variables:
            found.append(int(entry))
    return found


def end_processes(home: Path) -> None:
    """End every process of this test's HOME by its pid, and wait until each has exited.

    A killed supervisor can be replaced by a worker that is still alive (and the other way
    round), so the sweep repeats until nothing is left.
    """
    for _ in range(5):
        pids = processes_of(home)
        if not pids:
            return
        handles = []
        for pid in pids:
            try:
                handles.append(os.pidfd_open(pid))  # opened first: it then cannot name a reused pid
            except OSError:
                pass  # already gone
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for handle in handles:
            select.select([handle], [], [], 10)  # readable once the process has exited
            os.close(handle)
    left = processes_of(home)
    if left:
        raise AssertionError(f"processes of {home} survived SIGKILL: {left}")


# --- an RPC client -------------------------------------------------------------------------

class PrimeRpc:
    """``prime-agent --mode rpc``: commands as JSON lines on stdin, events as JSON lines on stdout."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.events: list[dict[str, Any]] = []
        self.stderr: str | None = None
        self._buffer = b""

    def send(self, **command: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command).encode() + b"\n")
        self.proc.stdin.flush()

    def until(self, predicate, timeout: float = RUN_TIMEOUT) -> dict[str, Any]:
        """Read events until one satisfies ``predicate``; every event read is kept in ``events``."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                event = json.loads(line)
                self.events.append(event)
                if predicate(event):
                    return event
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no matching RPC event within {timeout} s; last: {self.events[-3:]}")
            ready, _, _ = select.select([self.proc.stdout], [], [], remaining)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    raise AssertionError(f"prime-agent --mode rpc ended early: {self.close()}")
                self._buffer += chunk

    def prompt(self, message: str) -> dict[str, Any]:
        """Send a prompt and wait for the end of the agent's run."""
        self.send(type="prompt", message=message)
        return self.until(lambda e: e.get("type") == "agent_end")

    def command(self, message: str) -> dict[str, Any]:
        """Send an extension command and wait for the notification it shows."""
        self.send(type="prompt", message=message)
        return self.until(is_notify)

    def close(self) -> str:
        """End the session (EOF on stdin) and return its stderr; later calls return the same."""
        if self.stderr is None:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
                self.proc.stdin = None
            try:
                rest, stderr = self.proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                rest, stderr = self.proc.communicate()
            self._buffer += rest
            self.stderr = stderr.decode("utf-8", "replace")
        return self.stderr


def is_notify(event: dict[str, Any]) -> bool:
    return event.get("type") == "extension_ui_request" and event.get("method") == "notify"


# --- the bench -----------------------------------------------------------------------------

class PrimeHostTestCase(AgentHostTestCase):
    HOST = "prime"
    AGENT_DIR = ".prime/agent"
    AGENT_VARIABLE = "PRIME_AGENT_CODING_AGENT_DIR"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.prime, reason = prime_executable()
        if cls.prime is None:
            raise unittest.SkipTest(reason)

    def setUp(self):
        super().setUp()
        self.addCleanup(end_processes, self.home)  # runs before the HOME is removed
        tmp = self.home / "tmp"  # Prime's worker sockets and kernel files, kept inside the test
        tmp.mkdir()
        self.env.update(PATH=f"{self.prime.node.parent}{os.pathsep}{self.env.get('PATH', '')}", TMPDIR=str(tmp))
        self.socket = self.home / "daemon.sock"

    def argv(self, *args: str) -> list[str]:
        return [str(self.prime.prime), "--offline", "--daemon-socket", str(self.socket), *args]

    def run_prime(self, prompt: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return self.run_prime_with(["-p", prompt], env)

    def run_prime_with(self, args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        proc = subprocess.run(self.argv(*args), cwd=self.work, env=env or self.env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=RUN_TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertNotIn("Extension error", proc.stderr)
        self.assertNotIn("Traceback", proc.stderr + proc.stdout)
        return proc

    def rpc(self, env: dict[str, str] | None = None) -> PrimeRpc:
        session = PrimeRpc(self.argv("--mode", "rpc"), env or self.env, self.work)
        self.addCleanup(session.close)
        return session

    def sessions(self, agent: Path | None = None) -> list[Path]:
        """Root session files: Prime keeps them flat, ``sessions/<uuid>.jsonl``."""
        return sorted(((agent or self.agent) / "sessions").glob("*.jsonl"))

    def child_sessions(self) -> list[Path]:
        return sorted((self.agent / "session-artifacts").glob("*/sub-*/*.jsonl"))

    def qmem_local(self, *args: str, env: dict[str, str] | None = None, fresh: bool = True) -> Any:
        """``python -m qmem.local … --json``; ``fresh``: on a new index (``rebuilt.sqlite``), as after losing the old one."""
        env = dict(env or self.env, PYTHONPATH=str(REPO))
        if fresh:
            env["QMEM_SQLITE"] = str(self.home / "rebuilt.sqlite")
        proc = subprocess.run([sys.executable, "-m", "qmem.local", *args, "--json"], cwd=self.home, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return json.loads(proc.stdout)

    def assertRecalledOnce(self, request: dict[str, Any]) -> None:
        """Exactly one untrusted block, holding Prime's curated record and not pi's."""
        blocks = recall_blocks(request)
        self.assertEqual(len(blocks), 1, blocks)
        self.assertIn(f"{RECALLED} (prime)", blocks[0])
        self.assertNotIn("(pi)", blocks[0])

    def assertNoRecallPersisted(self, session: Path) -> None:
        """No recall block in the session file: only a tool's answer (memory_search) may hold recalled text."""
        entries = [json.loads(line) for line in session.read_text().splitlines()]
        self.assertIn("message", {entry.get("type") for entry in entries})
        written = [entry for entry in entries
                   if not (entry.get("type") == "message" and entry["message"].get("role") == "toolResult")]
        self.assertNotIn("memory-context", json.dumps(written))
        self.assertNotIn(RECALLED, json.dumps(written))


def header(session: Path) -> dict[str, Any]:
    with open(session) as handle:
        return json.loads(handle.readline())


def hung_python(directory: Path) -> Path:
    """An interpreter that notes each start in ``hung-python.starts``, then sleeps forever without a word."""
    path = directory / "hung-python"
    starts = directory / "hung-python.starts"
    path.write_text(f"#!{sys.executable}\nimport time\nopen({str(starts)!r}, 'a').write('started\\n')\n"
                    f"time.sleep(1e6)\n")
    path.chmod(0o755)
    return path


class PrimeHostTests(PrimeHostTestCase):
    def test_tools_rules_store_and_recall(self):
        self.install()
        proc = self.run_prime("STORE The e2e gateway listens on port 8443")
        self.assertIn("done: Stored", proc.stdout)
        requests = self.llm.chat_requests
        self.assertEqual(len(requests), 2)  # the tool call, then the answer after its result
        offered = {tool["function"]["name"] for tool in requests[0]["tools"]}
        self.assertTrue(QMEM_TOOLS | {"ipython"} <= offered, offered)
        system = requests[0]["messages"][0]["content"]
        self.assertIn("qmem rules", system)
        self.assertIn("Machine identification", system)
        self.assertIn("project_id is mandatory", system)
        for request in requests:
            self.assertRecalledOnce(request)  # one block per LLM call, never stacked
        self.assertEqual(self.embeddings.inputs, ["STORE The e2e gateway listens on port 8443"])
        self.assertEqual(self.gateway.count_by_text(), {"The e2e gateway listens on port 8443": 1})
        [session] = self.sessions()
        self.assertEqual(header(session)["rlmDepth"], 0)
        self.assertNoRecallPersisted(session)
        self.assertNotIn("memory-context", session.read_text())
        result = [json.loads(line)["message"] for line in session.read_text().splitlines()
                  if '"toolResult"' in line and "qmem_store" in line][0]
        self.assertEqual((result["details"]["qmem"], result["details"]["shared"]), (1, True))

    def test_store_is_queued_while_the_gateway_is_down_and_flushed_at_the_next_session(self):
        self.install()
        self.configure(refused_url())
        proc = self.run_prime("STORE Written while the gateway is away")
        self.assertIn("NOT yet shared", proc.stdout)
        self.assertEqual(self.gateway.count_by_text(), {})
        self.configure(self.gateway.url)
        self.run_prime("hello")  # session_start flushes the outbox in the background
        self.assertEqual(self.gateway.count_by_text(), {"Written while the gateway is away": 1})
        queue = self.qmem_local("queue", fresh=False)
        self.assertEqual([(r["text"], r["state"]) for r in queue["records"]],
                         [("Written while the gateway is away", "synced")])

    def test_no_recall_section_means_nothing_is_sent_for_recall(self):
        self.install()
        self.configure(self.gateway.url, recall=False)
        proc = self.run_prime("how do blue green deploys work here")
        self.assertIn(GREETING, proc.stdout)
        [request] = self.llm.chat_requests
        self.assertEqual(recall_blocks(request), [])
        self.assertEqual((self.embeddings.requests, self.qdrant.requests), ([], []))

    def test_agent_directory_from_the_environment(self):
        agent = self.home / "elsewhere" / "prime-agent"  # no ".prime" in the path: only the variable says Prime
        self.write_models(agent)
        self.install(agent, copy=True)  # the one copy: every other test runs the link `install prime` makes
        env = dict(self.env, PRIME_AGENT_CODING_AGENT_DIR=str(agent))
        self.run_prime("how do blue green deploys work here", env=env)
        [request] = self.llm.chat_requests
        self.assertRecalledOnce(request)
        [session] = self.sessions(agent)
        self.assertNoRecallPersisted(session)
        report = self.qmem_local("import", "--host", "prime", env=env)
        self.assertEqual(report["by_host"], {"prime": 1})

    def test_import_learns_what_prime_wrote(self):
        self.install()
        self.run_prime("STORE Shared from a Prime session")
        self.configure(refused_url())
        self.run_prime("STORE Queued in a Prime session")
        self.assertEqual(len(self.sessions()), 2)
        report = self.qmem_local("import", "--host", "prime")
        self.assertEqual((report["by_host"], report["records_added"], report["queued_restored"]),
                         ({"prime": 2}, 1, 1))
        self.assertEqual((report["malformed_lines"], report["unknown_entries"]), (0, 0))
        found = self.qmem_local("find", "Shared", "Prime", "session")
        [shared] = found["results"][:found["complete"]]  # the one with every word; the rest fill the list
        self.assertEqual((shared["coverage"], shared["state"]), ("full", "observed"))
        [queued] = self.qmem_local("queue")["records"]
        self.assertEqual((queued["text"], queued["state"]), ("Queued in a Prime session", "pending"))

    def test_commands_over_rpc_and_in_print_mode(self):
        self.install()
        session = self.rpc()
        status = session.command("/qmem:local status")
        self.assertIn("queue        pending 0", status["message"])
        shown = json.loads(session.command("/qmem:config show")["message"])
        self.assertEqual(shown["url"], self.gateway.url)
        self.assertEqual(shown["credentials (environment)"]["QMEM_GATEWAY_API_KEY"], "set")
        session.send(type="prompt", message="/qmem:config")  # the menu: a select dialog, then the answer
        menu = session.until(lambda e: e.get("method") == "select")
        self.assertIn("Show configuration", menu["options"])
        session.send(type="extension_ui_response", id=menu["id"], value="Show configuration")
        self.assertEqual(json.loads(session.until(is_notify)["message"])["url"], self.gateway.url)
        session.close()
        # Prime's print client shows no extension output at all (it drops notifications); it still runs the command.
        proc = self.run_prime("/qmem:local status")
        self.assertEqual(proc.stdout.strip(), "")
        self.assertEqual(self.llm.chat_requests, [])  # a command is not a prompt: no LLM call


class PrimeInstallTests(PrimeHostTestCase):
    """The README's `install prime` (a link) over RPC, Prime's own installer, and a project full of shadows."""

    def test_an_rpc_session_gets_one_block_per_request(self):
        self.install()
        session = self.rpc()
        session.prompt("STORE Recalled over RPC")
        session.prompt("how do blue green deploys work here")
        session.close()
        requests = self.llm.chat_requests
        self.assertEqual(len(requests), 3)  # the store's tool call and its answer, then the question
        for request in requests:
            self.assertRecalledOnce(request)
        self.assertEqual(self.gateway.count_by_text(), {"Recalled over RPC": 1})

    def test_prime_package_install_of_a_clone(self):
        """`prime-agent package install <clone>`: no path says Prime, the process and the header do."""
        clone = make_clone(self.home / "src" / "qmem")
        added = subprocess.run([str(self.prime.prime), "package", "install", str(clone)], cwd=self.work, env=self.env,
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=RUN_TIMEOUT)
        self.assertEqual(added.returncode, 0, added.stderr)
        self.assertEqual(json.loads((self.agent / "settings.json").read_text())["packages"],
                         [os.path.relpath(clone, self.agent)])
        self.run_prime("how do blue green deploys work here")
        [request] = self.llm.chat_requests
        self.assertTrue(QMEM_TOOLS <= {tool["function"]["name"] for tool in request["tools"]})
        self.assertRecalledOnce(request)

    def test_nothing_from_the_project_is_imported(self):
        """Prime's worker runs in the session's directory, which holds json.py, uuid.py… and a qmem package."""
        self.install()
        imported = self.home / "markers"
        make_shadow_project(self.work, imported)
        python, reason = clean_python(exactly=(3, 10))
        python = python or clean_python()[0]
        if python is None:
            self.skipTest(reason)
        env = dict(self.env, QMEM_PYTHON=str(recording_python(self.home, python)))
        proc = self.run_prime(EVERY_TOOL, env=env)
        self.assertEqual(markers(imported), {})
        self.assertIn(EVERY_DONE, proc.stdout)
        [session] = self.sessions()
        assert_every_tool_answered(self, session, f"{RECALLED} (prime)")
        for request in self.llm.chat_requests:
            self.assertRecalledOnce(request)
        started = json.loads((self.home / "bridge-start.json").read_text())
        self.assertEqual(started["cwd"], str(REPO))
        self.assertEqual([name for name in started["env"] if name.startswith("PRIME_AGENT_INTERNAL")], [])


class PrimeWithoutPythonTests(PrimeHostTestCase):
    """QMEM_PYTHON missing, exiting at once, or never answering: Prime answers, and says so once."""

    def interpreters(self) -> dict[str, str]:
        return {"missing": str(self.home / "no-such-python"), "crashing": "/bin/false",
                "hanging": str(hung_python(self.home))}

    def env_with(self, kind: str) -> dict[str, str]:
        return dict(self.env, QMEM_PYTHON=self.interpreters()[kind], QMEM_HOOK_TIMEOUT_MS="1500")

    def test_prime_answers_without_a_working_python(self):
        self.install()
        for kind in ("missing", "crashing", "hanging"):
            with self.subTest(kind):
                proc = self.run_prime("hello", env=self.env_with(kind))
                self.assertIn(GREETING, proc.stdout)

    def warnings_over_two_prompts(self, kind: str) -> list[str]:
        self.install()
        session = self.rpc(self.env_with(kind))
        for _ in range(2):
            end = session.prompt("hello")
            self.assertEqual(text_of(end["messages"][-1]["content"]), GREETING)
        session.close()
        return [e["message"] for e in session.events if is_notify(e) and BRIDGE_STOPPED in e["message"]]

    def test_one_warning_when_python_hangs(self):
        self.assertEqual(len(self.warnings_over_two_prompts("hanging")), 1)
        # Dropped once, not started again by every later hook: one timeout per session, not per hook.
        self.assertEqual((self.home / "hung-python.starts").read_text().count("started"), 1)

    # A warning raised while Prime has no client attached (during session_start, when the bridge fails to
    # spawn or exits at once) would be lost: the shim holds it until the first prompt.
    def test_one_warning_when_python_is_missing(self):
        self.assertEqual(len(self.warnings_over_two_prompts("missing")), 1)

    def test_one_warning_when_python_crashes(self):
        self.assertEqual(len(self.warnings_over_two_prompts("crashing")), 1)


# --- sub-agents ----------------------------------------------------------------------------

TASK_PREFIX = "[task from parent]"  # how Prime 0.8.0 hands a child its task
CHILD_TASK = "CHILD find how deploys work"
CHILD_QUERY = "blue green deploys"
CHILD_STORE = "A child session stored this fact"
# The parent's ipython cell: spawn one child and wait (inside Prime's kernel) until it has finished,
# so that the print command does not end the child before it has run.  rlm offers nothing to await
# a child with, so the cell polls its status, under a watchdog that leaves the run time to finish.
CHILD_WATCHDOG_S = RUN_TIMEOUT - 30
SPAWN_CELL = f"""import asyncio
handle = await rlm({CHILD_TASK!r}, name="deploy-reader")
loop = asyncio.get_running_loop()
deadline = loop.time() + {CHILD_WATCHDOG_S}
while loop.time() < deadline:
    children = await rlm.list_subagents()
    if children and all(child.status != "running" for child in children):
        break
    await asyncio.sleep(0.05)
print("children:", [(child.session_name, child.status) for child in children])
"""


# The parent's cell for qmem as Prime's MCP server: each tool in turn, its answer or its error printed.
MCP_CELL = """import json
for name, arguments in [("qmem_store", {"text": "Stored through Prime's MCP client", "project_id": "e2eproj"}),
                        ("qmem_search", {"query": "stored through prime"}), ("qmem_meta", {}),
                        ("memory_search", {"query": "blue green deploys"})]:
    try:
        print(name, "ANSWERED", json.dumps(await mcp.call_tool("qmem", name, arguments), default=str))
    except Exception as exc:
        print(name, "FAILED", exc)
"""


def is_child_request(body: dict[str, Any]) -> bool:
    first = next((m for m in body.get("messages") or [] if m.get("role") == "user"), {})
    return text_of(first.get("content")).startswith(TASK_PREFIX)


def kernel_script(body: dict[str, Any]) -> Reply:
    """Parent: SPAWN → the spawning cell; MCP STORE → a cell calling qmem over MCP.  Child: memory_search,
    then qmem_store, then a last word."""
    if is_child_request(body):
        steps = [m for m in body["messages"] if m.get("role") == "tool"]
        if not steps:
            return Reply(tool_calls=[("memory_search", {"query": CHILD_QUERY})])
        if len(steps) == 1:
            return Reply(tool_calls=[("qmem_store", {"text": CHILD_STORE, "project_id": "e2eproj", "kind": "fact"})])
        return Reply(text="child done")
    results = [m for m in after_last_assistant(body) if m.get("role") == "tool"]
    if prompt_of(body).startswith("SPAWN") and not results:
        return Reply(tool_calls=[("ipython", {"code": SPAWN_CELL})])
    if prompt_of(body).startswith("MCP EVERY TOOL") and not results:
        return Reply(tool_calls=[("ipython", {"code": MCP_CELL})])
    return script(body)


class PrimeKernelTests(PrimeHostTestCase):
    """What needs Prime's IPython kernel: rlm(...) sub-agents, and MCP servers (Prime calls them from Python)."""

    def script(self, body):
        return kernel_script(body)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.kernel, reason = prime_kernel_python()
        if cls.kernel is None:
            raise unittest.SkipTest(reason)

    def setUp(self):
        super().setUp()
        self.env["PRIME_AGENT_KERNEL_PYTHON"] = str(self.kernel)

    def test_subagent_gets_no_recall_but_memory_search_answers(self):
        """On the README's install (a link), in an RPC session: the prompt's run, then the run of the child's notice."""
        self.install()
        session = self.rpc()
        session.prompt("SPAWN a sub-agent")
        session.until(lambda e: e.get("type") == "agent_end")  # the parent's turn for the child's completion notice
        session.close()
        self.assertIn("('deploy-reader', 'completed')", json.dumps(self.llm.chat_requests))
        [root] = self.sessions()
        [child] = self.child_sessions()
        self.assertEqual(header(root)["rlmDepth"], 0)
        self.assertEqual((header(child)["rlmDepth"], header(child)["parentSession"]), (1, str(root)))
        self.assertEqual(child.parent.parent.name, header(root)["id"])
        requests = self.llm.chat_requests
        children = [r for r in requests if is_child_request(r)]
        parents = [r for r in requests if not is_child_request(r)]
        self.assertEqual(len(children), 3)  # memory_search, qmem_store, last word
        for request in children:
            self.assertEqual(recall_blocks(request), [])
        for request in parents:  # the prompt's turn, and the turn of the child's completion notice
            self.assertRecalledOnce(request)
        searched = [m for m in children[1]["messages"] if m.get("role") == "tool"][-1]
        self.assertIn(f"{RECALLED} (prime)", text_of(searched["content"]))  # memory_search answers in the child
        self.assertNotIn("(pi)", text_of(searched["content"]))
        # One embedding for the user's prompt (the notice is not a prompt) and one for the child's search.
        self.assertEqual(self.embeddings.inputs, ["SPAWN a sub-agent", CHILD_QUERY])
        self.assertEqual(self.gateway.count_by_text(), {CHILD_STORE: 1})
        for session in (root, child):
            self.assertNoRecallPersisted(session)
        self.assertNotIn(RECALLED, root.read_text())

        # A child's task arrives as a custom message, not a user prompt, so the run above would get no recall
        # even without the depth gate.  A user prompt typed into the child session itself (resumed by path)
        # isolates the gate: rlmDepth 1 → no block, no embedding; the same prompt in the root session recalls.
        question = "how do blue green deploys work here"
        before = len(self.llm.chat_requests)
        self.run_prime_resumed(child, question)
        [request] = self.llm.chat_requests[before:]
        self.assertEqual(prompt_of(request), question)
        self.assertEqual(recall_blocks(request), [])
        self.assertEqual(self.embeddings.inputs, ["SPAWN a sub-agent", CHILD_QUERY])
        self.run_prime_resumed(root, question)
        self.assertRecalledOnce(self.llm.chat_requests[-1])
        self.assertEqual(self.embeddings.inputs[2:], [question])

        report = self.qmem_local("import", "--host", "prime")
        self.assertEqual((report["by_host"], report["records_added"]), ({"prime": 2}, 1))
        [learned] = self.qmem_local("find", "child", "session", "stored")["results"]
        self.assertEqual((learned["text"], learned["coverage"]), (CHILD_STORE, "full"))
        self.assertIn("/sub-", learned["provenance"]["session_file"])

    def test_prime_linked_from_a_clone_under_pis_git_directory(self):
        """`pi install git:…` keeps its clone under ~/.pi/agent/git; `install prime` run from that clone links
        Prime to it.  The resolved path says pi; Prime's process, header and loaded path say Prime, and win:
        one block at depth 0, none at depth 1.  install warns at once, and the copy it suggests works too."""
        clone = make_clone(self.home / ".pi" / "agent" / "git" / "github.com" / "example" / "qmem")
        env = {key: value for key, value in self.env.items() if key != "PYTHONPATH"}
        installed = subprocess.run([sys.executable, "-m", "qmem.local", "install", "prime"], cwd=clone, env=env,
                                   stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        self.assertEqual(installed.returncode, 0, installed.stderr)
        said = installed.stdout + installed.stderr
        self.assertIn(f"warning: this clone ({clone / 'qmem'}) lies in pi's directory", said)
        self.assertEqual(os.path.realpath(self.agent / "extensions" / "qmem"), str(clone / "qmem"))
        session = self.rpc()
        session.prompt("SPAWN a sub-agent")
        session.until(lambda e: e.get("type") == "agent_end")
        session.close()
        self.assertIn("('deploy-reader', 'completed')", json.dumps(self.llm.chat_requests))
        [root] = self.sessions()
        [child] = self.child_sessions()
        self.assertEqual((header(root)["rlmDepth"], header(child)["rlmDepth"]), (0, 1))
        children = [r for r in self.llm.chat_requests if is_child_request(r)]
        parents = [r for r in self.llm.chat_requests if not is_child_request(r)]
        self.assertTrue(children and parents)
        for request in parents:
            self.assertRecalledOnce(request)  # Prime's lane: "(prime)", never "(pi)"
        for request in children:
            self.assertEqual(recall_blocks(request), [])
        fix = said.split("To keep Prime apart from it: `", 1)[1].split("`", 1)[0]
        done = subprocess.run(["bash", "-c", fix], cwd=clone, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertFalse((self.agent / "extensions" / "qmem").is_symlink())
        before = len(self.llm.chat_requests)
        self.run_prime("how do blue green deploys work here")
        [request] = self.llm.chat_requests[before:]
        self.assertRecalledOnce(request)

    def run_prime_resumed(self, session: Path, prompt: str) -> None:
        self.run_prime_with(["-r", str(session), "-p", prompt])

    def test_qmem_as_an_mcp_server_of_prime(self):
        """The line `mcp-config prime` prints, run as printed; the kernel starts the server in the session's
        directory, a project full of shadows; every tool answers and nothing of the project is imported."""
        python = clean_python(exactly=(3, 10))[0] or clean_python()[0] or Path(sys.executable)
        printed = subprocess.run([str(python), "-m", "qmem.local", "mcp-config", "prime"], cwd=REPO, env=self.env,
                                 stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        self.assertEqual(printed.returncode, 0, printed.stderr)
        env = dict(self.env, PATH=f"{self.prime.prime.parent}{os.pathsep}{self.env['PATH']}")
        added = subprocess.run(["bash", "-c", printed.stdout], cwd=self.work, env=env, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=RUN_TIMEOUT)
        self.assertEqual(added.returncode, 0, added.stderr)
        entry = json.loads((self.agent / "settings.json").read_text())["mcpServers"]["qmem"]
        self.assertEqual(entry["env"], {name: {"env": name} for name in ("QMEM_GATEWAY_API_KEY", "QMEM_QDRANT_API_KEY")})
        imported = self.home / "markers"
        make_shadow_project(self.work, imported)
        proc = self.run_prime("MCP EVERY TOOL")
        # Only qmem's server counts: Prime's own kernel (another interpreter) imports from there too.
        self.assertEqual(markers(imported, by=python), {})
        output = text_of([m for m in self.llm.chat_requests[-1]["messages"] if m.get("role") == "tool"][-1]["content"])
        for name in ("qmem_store", "qmem_search", "qmem_meta", "memory_search"):
            self.assertIn(f"{name} ANSWERED", output)
        self.assertNotIn("FAILED", output)
        self.assertIn('"recall": [{"id": "2"', output)  # point 2: the host=prime record
        self.assertIn("done: ", proc.stdout)
        self.assertEqual(self.gateway.count_by_text(), {"Stored through Prime's MCP client": 1})


class PrimeSlowRecallTests(PrimeHostTestCase):
    """Issue 27, through the shim: a slow Qdrant never holds up a turn; its block joins the request after
    the tool call; nothing of it is written; the recall log says late, then skipped."""

    def test_a_slow_qdrant_block_lands_on_the_request_after_the_tool_call(self):
        self.install()
        self.configure_slow_recall()
        proc = self.run_prime(SLOW_PROMPT)
        self.assertIn("done: Stored", proc.stdout)
        first, second = self.llm.chat_requests
        self.assertEqual(recall_blocks(first), [])  # not ready in time: the request went on without it
        self.assertRecalledOnce(second)
        [session] = self.sessions()
        self.assertNoRecallPersisted(session)
        self.assertEqual([e["outcome"] for e in self.recall_log()], ["late"])
        self.llm.clear()
        self.run_prime("hello")  # Qdrant's breaker opened on three slow calls: this turn skips it
        [request] = self.llm.chat_requests
        self.assertEqual(recall_blocks(request), [])
        self.assertEqual([e["outcome"] for e in self.recall_log()], ["skipped", "late"])
        self.assertEqual(len(self.embeddings.inputs), 1)


if __name__ == "__main__":
    unittest.main()
