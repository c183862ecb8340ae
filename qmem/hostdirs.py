"""Where each agent host keeps its files: one rule for everything that looks there (``install``,
``doctor``, host identity, session ``import``).

A host's agent directory is the value of its variable when that is set (``PI_CODING_AGENT_DIR``,
``PRIME_AGENT_CODING_AGENT_DIR``, ``HERMES_HOME``, Claude Code's ``CLAUDE_CONFIG_DIR``, Codex's
``CODEX_HOME``), with a leading ``~`` expanded as the hosts expand it, and otherwise its default
under HOME (``~/.pi/agent``, ``~/.prime/agent``, ``~/.hermes``, ``~/.claude``, ``~/.codex``).  pi's own ``PI_CODING_AGENT_SESSION_DIR`` follows the same rule.

A relative value names a place relative to wherever the host was started, which qmem cannot
know (the bridge runs in qmem's folder, a CLI wherever the user is): it is refused, never
resolved against qmem's own working directory.  :attr:`AgentDirectory.path` is then None and
:attr:`AgentDirectory.problem` says why, in one line naming the variable.  HOME is the
environment's ``HOME``, else the user's home directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from .valueclass import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["agent_directory", "session_directory"]

#: host -> (the variable that moves its directory, the default's components under HOME)
_HOSTS = {
    "pi": ("PI_CODING_AGENT_DIR", (".pi", "agent")),
    "prime": ("PRIME_AGENT_CODING_AGENT_DIR", (".prime", "agent")),
    "hermes": ("HERMES_HOME", (".hermes",)),
    "claude": ("CLAUDE_CONFIG_DIR", (".claude",)),
    "codex": ("CODEX_HOME", (".codex",)),
}
SESSION_DIR_VARIABLE = "PI_CODING_AGENT_SESSION_DIR"


@dataclass(frozen=True)
class AgentDirectory:
    """A host's agent directory: ``path`` where the host will look (None when its variable holds
    a relative path, ``problem`` then says so), ``default`` where it is when the variable is not
    set, and ``marker``, the components that mark such a directory in any path
    (``.pi/agent``)."""

    host: str
    variable: str
    path: Path | None
    default: Path
    marker: tuple[str, ...]
    problem: str | None = None

    @property
    def moved(self) -> bool:
        """Whether the variable names another place than the default."""
        return self.path != self.default


def home_directory(env: Mapping[str, str]) -> Path:
    """The HOME the hosts use: the environment's, else the user's home directory."""
    return Path((env.get("HOME") or "").strip() or Path.home())


def _from_variable(env: Mapping[str, str], variable: str) -> tuple[Path | None, str | None, bool]:
    """(path, problem, set) for a directory variable, by the rule of the module docstring."""
    value = (env.get(variable) or "").strip()
    if not value:
        return None, None, False
    if value == "~" or value.startswith("~/"):
        return home_directory(env) / value[2:], None, True
    if not os.path.isabs(value):
        return None, (f"{variable} is a relative path ({value[:80]}); qmem cannot tell where the host "
                      f"resolves it: set it to an absolute path"), True
    return Path(value), None, True


def agent_directory(host: str, env: Mapping[str, str]) -> AgentDirectory:
    """Where ``host`` (pi, prime or hermes) keeps its files under ``env``."""
    variable, marker = _HOSTS[host]
    default = home_directory(env).joinpath(*marker)
    path, problem, is_set = _from_variable(env, variable)
    return AgentDirectory(host, variable, path if is_set else default, default, marker, problem)


def session_directory(env: Mapping[str, str]) -> tuple[Path | None, str | None]:
    """pi's ``PI_CODING_AGENT_SESSION_DIR``: (its path, or None when unset or refused; why refused)."""
    path, problem, _ = _from_variable(env, SESSION_DIR_VARIABLE)
    return path, problem
