"""Where the real hosts for end-to-end tests live, and why a test skips without them.

``.ci/run`` installs the pinned hosts into ``.cache/hosts/`` (npm and pip need the
network, which tests themselves never use) and marks each complete install with an
``.installed`` file.  Environment overrides: ``QMEM_TEST_PI``
(a ``pi`` executable), ``QMEM_TEST_MCP_PYTHON`` (a Python with the ``mcp`` SDK),
``QMEM_TEST_HERMES_PYTHON`` (a Python with ``hermes-agent``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .support import REPO

HOSTS = REPO / ".cache" / "hosts"
PI_VERSION = "0.73.1"
MCP_VERSION = "2.3.0"
HERMES_VERSION = "0.19.0"

PI_INSTALL = (f"npm install --prefix .cache/hosts/pi-{PI_VERSION} "
              f"@mariozechner/pi-coding-agent@{PI_VERSION}")


def pi_executable() -> tuple[Path | None, str]:
    """(path to pi, reason when None)."""
    override = os.environ.get("QMEM_TEST_PI")
    if override:
        return (Path(override), "") if Path(override).exists() else (None, f"QMEM_TEST_PI={override} does not exist")
    if shutil.which("node") is None:
        return None, "node is not installed, so pi cannot run"
    path = HOSTS / f"pi-{PI_VERSION}" / "node_modules" / ".bin" / "pi"
    if not path.exists() or not (HOSTS / f"pi-{PI_VERSION}" / ".installed").exists():
        return None, f"pi {PI_VERSION} is not installed for the tests: run .ci/run or `{PI_INSTALL}`"
    return path, ""


def venv_python(name: str, env_var: str, install: str) -> tuple[Path | None, str]:
    override = os.environ.get(env_var)
    if override:
        return (Path(override), "") if Path(override).exists() else (None, f"{env_var}={override} does not exist")
    path = HOSTS / name / "bin" / "python"
    if not path.exists() or not (HOSTS / name / ".installed").exists():
        return None, f"{name} is not installed for the tests: run .ci/run ({install})"
    return path, ""


def mcp_python() -> tuple[Path | None, str]:
    return venv_python("mcp-venv", "QMEM_TEST_MCP_PYTHON", f"pip install mcp=={MCP_VERSION}")


def hermes_python() -> tuple[Path | None, str]:
    return venv_python("hermes-venv", "QMEM_TEST_HERMES_PYTHON", f"pip install hermes-agent=={HERMES_VERSION}")
