"""What ``doctor`` says against what the real host then does, in the same test (issue 30).

For each state where doctor used to say "overall ok" while the host got no qmem or no recall, a
test sets the state up with real files and a real interpreter, runs ``python3 -m qmem.local
doctor`` (exit 1, one line naming the cause and the command that fixes it, absolute paths), runs
a real session of the host (the tools it offered, the rules in its system prompt, a recall
block), then runs the command doctor named, exactly as printed, and checks that doctor exits 0
and the next real session has qmem's tools, rules and one recall block:

* pi: ``settings.json`` lists the package with pi's own filter ``"extensions": []``;
* pi: ``QMEM_PYTHON`` is a Python 3.9 — pyenv's real 3.9 where one is installed, else a stand-in
  that answers the way qmem's entry guard makes a 3.9 answer (its one line on stderr, exit 1);
* Hermes: recall configured, neither ``recall.host`` nor ``QMEM_HOST``: no lane;
* Hermes: ``config.yaml`` in flow style (``plugins: {enabled: [foo]}``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import unittest
from pathlib import Path

from .hostbench import QMEM_TOOLS, RECALLED, AgentHostTestCase, make_clone, recall_blocks
from .hosts import pi_executable
from .support import REPO
from .test_hermes_host import HermesHostTestCase, tool_names, user_blocks

QMEM_TOOL_NAMES = QMEM_TOOLS  # qmem_store … memory_search


def doctor(env: dict[str, str], cwd: Path = REPO) -> tuple[int, dict, str]:
    """(exit code, the --json document, the text report) of a real ``python3 -m qmem.local doctor``."""
    env = {key: value for key, value in env.items() if key != "PYTHONPATH"}
    text = subprocess.run([sys.executable, "-m", "qmem.local", "doctor"], cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    document = subprocess.run([sys.executable, "-m", "qmem.local", "doctor", "--json"], cwd=cwd, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in text.stderr + document.stderr, text.stderr + document.stderr
    assert text.returncode == document.returncode, (text.stdout, document.stdout)
    return text.returncode, json.loads(document.stdout), text.stdout


def fix_command(problem: str) -> str:
    """The command a problem line names: its last `backquoted` part."""
    commands = re.findall(r"`([^`]+)`", problem)
    assert commands, problem
    return commands[-1]


def run_fix(command: str, env: dict[str, str], cwd: Path) -> None:
    proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"{command}: {proc.stdout}{proc.stderr}"


def python39(directory: Path) -> tuple[Path, bool]:
    """A Python 3.9: (its path, whether it is a real interpreter)."""
    for candidate in (shutil.which("python3.9"), "/root/.pyenv/versions/3.9.18/bin/python3",
                      *sorted(str(p) for p in Path(os.path.expanduser("~/.pyenv/versions")).glob("3.9.*/bin/python3"))):
        if candidate and os.access(candidate, os.X_OK):
            probe = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                                   text=True, timeout=60)
            if probe.stdout.strip() == "(3, 9)":
                return Path(candidate), True
    stand_in = directory / "python3.9"  # what qmem's entry guard makes a Python 3.9 say
    stand_in.write_text("#!/bin/sh\necho 'qmem needs Python ≥ 3.10, found 3.9 (set QMEM_PYTHON)' >&2\nexit 1\n")
    stand_in.chmod(0o755)
    return stand_in, False


class PiDoctorTests(AgentHostTestCase):
    AGENT_DIR = ".pi/agent"

    @classmethod
    def setUpClass(cls):
        cls.pi, reason = pi_executable()
        if cls.pi is None:
            raise unittest.SkipTest(reason)

    def setUp(self):
        super().setUp()
        # `pi` on PATH, as for a user who runs the command doctor prints.
        self.env.update(PI_OFFLINE="1", PI_SKIP_VERSION_CHECK="1",
                        PATH=f"{self.pi.parent}{os.pathsep}{self.env.get('PATH', '')}")

    def run_pi(self, prompt: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        before = len(self.llm.chat_requests)
        proc = subprocess.run([str(self.pi), "-p", prompt], cwd=self.work, env=env or self.env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        proc.requests = self.llm.chat_requests[before:]
        return proc

    def assertFullQmem(self, proc) -> None:
        """A real pi session with qmem as doctor's "ok" promises: tools, rules, one recall block."""
        [request] = proc.requests
        self.assertTrue(QMEM_TOOL_NAMES <= {tool["function"]["name"] for tool in request["tools"]})
        self.assertIn("qmem rules", request["messages"][0]["content"])
        [recalled] = recall_blocks(request)
        self.assertIn(f"{RECALLED} (pi)", recalled)

    def pi_problems(self, document: dict) -> list[str]:
        return [problem for problem in document["problems"] if problem.startswith("pi:")]

    def test_a_package_filter_that_leaves_qmem_out(self):
        clone = make_clone(self.home / "src" / "qmem")
        installed = subprocess.run([str(self.pi), "install", str(clone)], cwd=self.work, env=self.env,
                                   stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        self.assertEqual(installed.returncode, 0, installed.stderr)
        settings_file = self.agent / "settings.json"
        settings = json.loads(settings_file.read_text())
        [source] = settings["packages"]
        settings["packages"] = [{"source": source, "extensions": []}]  # pi's own format: no extension of it
        settings_file.write_text(json.dumps(settings))

        code, document, text = doctor(self.env)
        self.assertEqual(code, 1, text)
        [problem] = self.pi_problems(document)
        self.assertIn(f"{settings_file} lists the package {clone} with the filter \"extensions\": [], which leaves "
                      f"out {clone / 'qmem' / 'index.js'}: pi loads no qmem from it", problem)
        self.assertIn(f"✗ left out by its filter", text)
        self.assertNotIn("../", text)
        proc = self.run_pi("how do blue green deploys work here")  # what pi really does: no qmem at all
        [request] = proc.requests
        self.assertEqual({tool["function"]["name"] for tool in request["tools"]} & QMEM_TOOL_NAMES, set())
        self.assertNotIn("qmem rules", request["messages"][0]["content"])
        self.assertEqual(recall_blocks(request), [])

        run_fix(fix_command(problem), self.env, self.work)
        code, document, text = doctor(self.env)
        self.assertEqual((code, self.pi_problems(document)), (0, []), text)
        self.assertIn(f"the package {clone} (by `pi install`, qmem ", text)
        self.assertIn("), runs as pi", text)
        self.assertFullQmem(self.run_pi("how do blue green deploys work here"))

    def test_qmem_python_is_a_python_3_9(self):
        self.install()
        old, real = python39(self.home)
        env = dict(self.env, QMEM_PYTHON=str(old))
        code, document, text = doctor(env)
        self.assertEqual(code, 1, text)
        [problem] = self.pi_problems(document)
        self.assertIn(f"pi: the bridge cannot start (QMEM_PYTHON: {old} says \"qmem needs Python ≥ 3.10, found 3.9 "
                      f"(set QMEM_PYTHON)\")", problem)
        proc = self.run_pi("how do blue green deploys work here", env=env)  # pi: the line, and no qmem at all
        self.assertIn("qmem needs Python ≥ 3.10", proc.stderr)
        [request] = proc.requests
        self.assertEqual({tool["function"]["name"] for tool in request["tools"]} & QMEM_TOOL_NAMES, set())
        self.assertNotIn("qmem rules", request["messages"][0]["content"])
        self.assertEqual(recall_blocks(request), [])

        command = fix_command(problem)
        self.assertEqual(command, f"export QMEM_PYTHON={shlex.quote(sys.executable)}")
        fixed = dict(env, QMEM_PYTHON=sys.executable)  # what the export does for the shell that starts pi
        code, document, text = doctor(fixed)
        self.assertEqual((code, self.pi_problems(document)), (0, []), text)
        self.assertFullQmem(self.run_pi("how do blue green deploys work here", env=fixed))
        if not real:  # said, not skipped: the stand-in still checks doctor and pi against each other
            sys.stderr.write("(no real Python 3.9 here: a stand-in answered as qmem on 3.9 does) ")


class HermesDoctorTests(HermesHostTestCase):
    def hermes_problems(self, document: dict) -> list[str]:
        return [problem for problem in document["problems"] if problem.startswith("hermes:")]

    def path_with_hermes(self) -> dict[str, str]:
        """The environment with ``hermes`` on PATH (the venv's console script), for the fix doctor names."""
        return dict(self.env, PATH=f"{Path(self.python).parent}{os.pathsep}{self.env.get('PATH', '')}")

    def test_recall_configured_without_a_lane(self):
        self.configure()
        path = self.home / ".config" / "qmem" / "config.json"
        document = json.loads(path.read_text())
        del document["recall"]["host"]  # recall configured, no lane named
        path.write_text(json.dumps(document))
        self.assertNotIn("QMEM_HOST", self.env)
        code, document, text = doctor(self.env)
        self.assertEqual(code, 1, text)
        [problem] = self.hermes_problems(document)
        self.assertIn("Hermes has no recall lane", problem)
        self.assertIn(f"`echo QMEM_HOST=pi >> {self.hermes_home / '.env'}`", problem)
        proc = self.chat("ONE: how do blue green deploys work here")  # what Hermes really does: no block
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        [request, *_] = self.main_requests()
        self.assertIn("## qmem rules", json.dumps(request))
        self.assertEqual(user_blocks(request), [])
        self.assertNotIn("memory_search", tool_names(request))

        run_fix(fix_command(problem), self.env, self.work)
        code, document, text = doctor(self.env)
        self.assertEqual((code, self.hermes_problems(document)), (0, []), text)
        self.llm.clear()
        proc = self.chat("ONE: how do blue green deploys work here")
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        [request, *_] = self.main_requests()
        self.assertRecalledOnce(request)
        self.assertIn("memory_search", tool_names(request))

    def test_a_flow_style_config_yaml(self):
        config = self.hermes_home / "config.yaml"
        kept = config.read_text().split("plugins:")[0]  # the bench's settings, without the block install wrote
        config.write_text(kept + "plugins: {enabled: [foo]}\n")
        code, document, text = doctor(self.env)
        self.assertEqual(code, 1, text)
        [problem] = self.hermes_problems(document)
        self.assertIn(f"qmem does not read {config} with certainty", problem)
        self.assertIn("whether Hermes loads qmem is not known", problem)
        proc = self.chat("ONE: how do blue green deploys work here")  # what Hermes really does: no qmem
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        requests = [r for r in self.llm.chat_requests if r.get("tools")]
        self.assertTrue(requests)
        self.assertEqual(tool_names(requests[0]) & QMEM_TOOL_NAMES, set())
        self.assertNotIn("## qmem rules", json.dumps(requests[0]))

        env = self.path_with_hermes()
        run_fix(fix_command(problem), env, self.work)
        code, document, text = doctor(env)
        self.assertEqual((code, self.hermes_problems(document)), (0, []), text)
        self.llm.clear()
        proc = self.chat("ONE: how do blue green deploys work here")
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        [request, *_] = self.main_requests()
        self.assertTrue({"qmem_store", "qmem_search"} <= tool_names(request))
        self.assertRulesOnce(request)
        self.assertRecalledOnce(request)


if __name__ == "__main__":
    unittest.main()
