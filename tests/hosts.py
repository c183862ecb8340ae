"""Where the real hosts for end-to-end tests live, which tests need each, and why a test skips without one.

``.ci/run`` installs the pinned hosts into ``.cache/hosts/`` (``$QMEM_TEST_HOSTS`` moves that
directory; npm and pip need the network, which tests themselves never use) and marks each
complete install with an ``.installed`` file.  Under ``CI=true`` a host whose marker exists
must run its tests: :mod:`tests.hostguard` turns a skip in them into a failure.

Environment overrides, each naming an executable: ``QMEM_TEST_PI`` (``pi``), ``QMEM_TEST_PRIME``
(``prime-agent``; Node ≥ 22.8 must then be the first ``node`` on PATH), ``QMEM_TEST_PRIME_KERNEL``
(a Python with Prime's kernel runtime), ``QMEM_TEST_MCP_PYTHON`` (a Python with the ``mcp``
2.x SDK), ``QMEM_TEST_MCP1_PYTHON`` (a Python with the 1.x SDK), ``QMEM_TEST_INSPECTOR``
(``mcp-inspector``), ``QMEM_TEST_HERMES_PYTHON`` (a Python with ``hermes-agent``), ``QMEM_TEST_CLAUDE``
(``claude``), ``QMEM_TEST_CODEX`` (``codex``).  A host named by its override counts as installed.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .support import REPO

HOSTS = Path(os.environ.get("QMEM_TEST_HOSTS") or REPO / ".cache" / "hosts")
PI_VERSION = "0.73.1"
PRIME_VERSION = "0.8.0"
MCP_VERSION = "2.3.0"
INSPECTOR_VERSION = "0.15.0"  # @modelcontextprotocol/inspector (npm), whose --cli is a third MCP client
MCP1_VERSION = "1.30.0"  # the last 1.x line: a handshake-only client, as most MCP clients in use are
HERMES_VERSION = "0.19.0"
CLAUDE_VERSION = "2.1.332"
CODEX_VERSION = "0.171.0"

PI_INSTALL = (f"npm install --prefix .cache/hosts/pi-{PI_VERSION} "
              f"@mariozechner/pi-coding-agent@{PI_VERSION}")
CLAUDE_INSTALL = (f"npm install --prefix .cache/hosts/claude-code-{CLAUDE_VERSION} "
                  f"@anthropic-ai/claude-code@{CLAUDE_VERSION}")
CODEX_INSTALL = f"npm install --prefix .cache/hosts/codex-{CODEX_VERSION} @openai/codex@{CODEX_VERSION}"
PRIME_INSTALL = f"../shared/hosts/prime-agent-{PRIME_VERSION}/install.sh .cache/hosts/prime-agent-{PRIME_VERSION}"


@dataclass(frozen=True)
class Host:
    """A real host that ``.ci/run`` installs, and the tests that need it.

    ``tests`` are test id prefixes (a module, or ``module.Class``); a test belongs to the host
    with the longest matching prefix.
    """

    directory: str  # under root
    override: str  # environment variable naming the host's executable
    tests: tuple[str, ...]
    root: Path = HOSTS

    @property
    def marker(self) -> Path:
        return self.root / self.directory / ".installed"

    def installed(self, env: Mapping[str, str] | None = None) -> bool:
        env = os.environ if env is None else env
        return bool(env.get(self.override)) or self.marker.exists()


PI = Host(f"pi-{PI_VERSION}", "QMEM_TEST_PI", ("tests.test_pi_host", "tests.test_pi_shim",
                                               "tests.test_doctor_hosts.PiDoctorTests"))
PRIME = Host(f"prime-agent-{PRIME_VERSION}", "QMEM_TEST_PRIME", ("tests.test_prime_host",))
PRIME_KERNEL = Host(f"prime-kernel-{PRIME_VERSION}", "QMEM_TEST_PRIME_KERNEL",
                    ("tests.test_prime_host.PrimeKernelTests",))
MCP = Host("mcp-venv", "QMEM_TEST_MCP_PYTHON", ("tests.test_mcp", "tests.test_shadowing.McpEntryTests"))
MCP1 = Host("mcp1-venv", "QMEM_TEST_MCP1_PYTHON", ("tests.test_mcp.Sdk1ClientTests",))
INSPECTOR = Host(f"inspector-{INSPECTOR_VERSION}", "QMEM_TEST_INSPECTOR", ("tests.test_mcp.InspectorCliTests",))
HERMES = Host("hermes-venv", "QMEM_TEST_HERMES_PYTHON", ("tests.test_hermes", "tests.test_hermes_host",
                                                         "tests.test_hermes_installer",
                                                         "tests.test_shadowing.HermesEntryTests",
                                                         "tests.test_doctor_hosts.HermesDoctorTests"))
CLAUDE = Host(f"claude-code-{CLAUDE_VERSION}", "QMEM_TEST_CLAUDE", ("tests.test_claude_code",))
CODEX = Host(f"codex-{CODEX_VERSION}", "QMEM_TEST_CODEX", ("tests.test_codex",))
REAL_HOSTS = (PI, PRIME, PRIME_KERNEL, MCP, MCP1, INSPECTOR, HERMES, CLAUDE, CODEX)


def _override(host: Host) -> tuple[Path | None, str] | None:
    value = os.environ.get(host.override)
    if not value:
        return None
    return (Path(value), "") if Path(value).exists() else (None, f"{host.override}={value} does not exist")


def pi_executable() -> tuple[Path | None, str]:
    """(path to pi, reason when None)."""
    override = _override(PI)
    if override:
        return override
    if shutil.which("node") is None:
        return None, "node is not installed, so pi cannot run"
    path = HOSTS / PI.directory / "node_modules" / ".bin" / "pi"
    if not path.exists() or not PI.marker.exists():
        return None, f"pi {PI_VERSION} is not installed for the tests: run .ci/run or `{PI_INSTALL}`"
    return path, ""


def npm_executable(host: Host, name: str, install: str) -> tuple[Path | None, str]:
    """(path to an npm-installed host's executable, reason when None)."""
    override = _override(host)
    if override:
        return override
    if shutil.which("node") is None:
        return None, f"node is not installed, so {name} cannot run"
    path = HOSTS / host.directory / "node_modules" / ".bin" / name
    if not path.exists() or not host.marker.exists():
        return None, f"{host.directory} is not installed for the tests: run .ci/run or `{install}`"
    return path, ""


def claude_executable() -> tuple[Path | None, str]:
    """(path to Claude Code's ``claude``, reason when None)."""
    return npm_executable(CLAUDE, "claude", CLAUDE_INSTALL)


def codex_executable() -> tuple[Path | None, str]:
    """(path to Codex's ``codex``, reason when None)."""
    return npm_executable(CODEX, "codex", CODEX_INSTALL)


@dataclass(frozen=True)
class PrimeInstall:
    node: Path  # the Node that runs Prime: its directory goes first on PATH
    prime: Path  # the prime-agent executable (a `#!/usr/bin/env node` script)


def prime_executable() -> tuple[PrimeInstall | None, str]:
    """(node and prime-agent, reason when None)."""
    override = _override(PRIME)
    if override:
        path, reason = override
        node = shutil.which("node")
        if path is None or node is None:
            return None, reason or "QMEM_TEST_PRIME is set but no node is on PATH"
        return PrimeInstall(Path(node), path), ""
    root = HOSTS / PRIME.directory
    install = PrimeInstall(root / "node" / "bin" / "node", root / "prime" / "node_modules" / ".bin" / "prime-agent")
    if not (install.node.exists() and install.prime.exists() and PRIME.marker.exists()):
        return None, f"prime-agent {PRIME_VERSION} is not installed for the tests: run .ci/run or `{PRIME_INSTALL}`"
    return install, ""


def venv_python(host: Host, install: str) -> tuple[Path | None, str]:
    override = _override(host)
    if override:
        return override
    path = HOSTS / host.directory / "bin" / "python"
    if not path.exists() or not host.marker.exists():
        return None, f"{host.directory} is not installed for the tests: run .ci/run ({install})"
    return path, ""


def prime_kernel_python() -> tuple[Path | None, str]:
    """Prime's IPython kernel (``PRIME_AGENT_KERNEL_PYTHON``), which runs ``rlm(...)`` sub-agents."""
    return venv_python(PRIME_KERNEL, "a venv with ipykernel, Prime's prime-agent-runtime and its default packages")


def mcp_python() -> tuple[Path | None, str]:
    return venv_python(MCP, f"pip install mcp=={MCP_VERSION}")


def inspector_executable() -> tuple[Path | None, str]:
    """The MCP Inspector's ``mcp-inspector`` (run with ``--cli``); Node must be on PATH."""
    override = _override(INSPECTOR)
    if override:
        return override
    if shutil.which("node") is None:
        return None, "node is not installed, so the MCP Inspector cannot run"
    path = HOSTS / INSPECTOR.directory / "node_modules" / ".bin" / "mcp-inspector"
    if not path.exists() or not INSPECTOR.marker.exists():
        return None, (f"the MCP Inspector {INSPECTOR_VERSION} is not installed for the tests: run .ci/run "
                      f"(npm install @modelcontextprotocol/inspector@{INSPECTOR_VERSION})")
    return path, ""


def mcp1_python() -> tuple[Path | None, str]:
    return venv_python(MCP1, f"pip install mcp=={MCP1_VERSION}")


def hermes_python() -> tuple[Path | None, str]:
    return venv_python(HERMES, f"pip install hermes-agent=={HERMES_VERSION}")
