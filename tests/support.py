"""Test support: a throwaway HOME and real subprocess runs of qmem's CLIs."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

# Variables that would let the developer's own setup leak into a test.
_SCRUBBED_PREFIXES = ("QMEM_", "PI_QDRANT_MEMORY_", "XDG_", "PI_CODING_AGENT_DIR", "PRIME_AGENT_CODING_AGENT_DIR")


@functools.lru_cache(maxsize=None)
def compile_qmem() -> None:
    """Compile qmem's modules once for this run, where Python keeps them (``qmem/__pycache__``).

    Children never write bytecode (``PYTHONDONTWRITEBYTECODE``: nothing lands in a HOME, an
    installed copy or a project), so without this each of the suite's hundreds of processes
    would compile every module it imports.  It is what any first run of qmem leaves, and git
    ignores it.  A checkout that cannot be written only makes the children slower.
    """
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "qmem")],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300, check=False)


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """The current environment minus qmem's and XDG variables, with HOME = ``home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED_PREFIXES)}
    env["HOME"] = str(home)
    env["PYTHONPATH"] = str(REPO)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    compile_qmem()
    env.update(extra)
    return env


@dataclass
class Completed:
    code: int
    stdout: str
    stderr: str


class TempHomeTestCase(unittest.TestCase):
    """A test case with a fresh HOME directory, removed afterwards."""

    def setUp(self) -> None:
        super().setUp()
        self.home = Path(tempfile.mkdtemp(prefix="qmem-test-"))
        self.addCleanup(shutil.rmtree, self.home, True)
        self.env = clean_env(self.home)

    def run_module(self, module: str, *args: str, input: str | None = None, env: dict[str, str] | None = None,
                   timeout: float = 60) -> Completed:
        """Run ``python -m <module> args…`` as a real subprocess."""
        proc = subprocess.run(
            [sys.executable, "-m", module, *args], cwd=str(self.home), env=env or self.env,
            input=input if input is not None else "", capture_output=True, text=True, timeout=timeout,
        )
        return Completed(proc.returncode, proc.stdout, proc.stderr)

    def assertNoTraceback(self, result: Completed) -> None:
        self.assertNotIn("Traceback", result.stderr)
        self.assertNotIn("Traceback", result.stdout)


def write_config(env: dict[str, str], document: dict) -> Path:
    """Write ``document`` as the config file of the HOME in ``env``."""
    import json

    path = Path(env["HOME"]) / ".config" / "qmem" / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


class GatewayTestCase(TempHomeTestCase):
    """A temp HOME whose config points at a fresh fake Memory Gateway.

    Timeouts are short (the fakes answer on loopback) and the breaker window is long,
    so a test sees it open until it resets it.
    """

    API_KEY = "test-gateway-key"
    CONFIG: dict = {}

    def setUp(self) -> None:
        super().setUp()
        from .fakes import FakeGateway

        self.gateway = FakeGateway(api_key=self.API_KEY).start()
        self.addCleanup(self.gateway.stop)
        self.env["QMEM_GATEWAY_API_KEY"] = self.API_KEY
        self.configure()

    def configure(self, url: str | None = "fake", **overrides: object) -> None:
        """Write the config; ``url`` defaults to the fake gateway, None means no gateway."""
        document = {"url": self.gateway.url if url == "fake" else url, "connectTimeoutMs": 2000, "timeoutMs": 2000,
                    "breakerBaseMs": 60_000, "breakerMaxMs": 600_000, "breakerTripAfter": 3,
                    **self.CONFIG, **overrides}
        write_config(self.env, document)

    def runtime(self):
        from qmem.runtime import Runtime

        rt = Runtime(self.env)
        self.addCleanup(rt.close)
        return rt


def unprivileged_runner(env: dict[str, str]) -> tuple[list[str], str | None]:
    """(the command prefix that runs a program as ``nobody``, None), or ([], why it cannot).

    For tests that need file modes to count while the suite runs as root, who ignores them.
    The checkout may sit where only root can read it (a clone in a private temporary
    directory): then no unprivileged Python can import qmem, and the test must skip, saying so.
    """
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return [], "running as root and setpriv is unavailable to drop privileges"
    runner = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    probe = subprocess.run([*runner, sys.executable, "-c", "import qmem"], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        said = (probe.stderr.strip().splitlines() or ["no message"])[-1]
        return [], f"an unprivileged user cannot run this Python on this checkout ({said})"
    return runner, None
