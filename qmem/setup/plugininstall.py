"""``install claude|codex`` and ``uninstall claude|codex``: the hosts' own commands, then what they leave undone.

What it adds over typing the hosts' commands:

* **install** runs ``claude plugin marketplace add <this repository>`` and ``claude plugin install
  qmem@qmem`` (Codex: ``codex plugin marketplace add`` and ``codex plugin add``) — both are safe to
  run again — and then *verifies* the result as ``doctor`` does (:mod:`qmem.setup.plugincheck`):
  the host recorded the plugin, and its MCP server starts from the host's copy the way the host
  starts it.  An install whose server would not start is an error, not a success line.  The
  marketplace is the repository that holds this qmem (its ``.claude-plugin/marketplace.json``); a
  qmem that is not in one (a copy) is refused, naming the commands to use with a clone instead.
* **uninstall** runs ``claude plugin uninstall qmem@qmem`` (Codex: ``codex plugin remove``) when the
  plugin is installed and ``… plugin marketplace remove qmem`` when that marketplace is known, then
  removes what the hosts leave (measured with Claude Code 2.1.332 and Codex 0.171.0): Claude Code
  keeps the uninstalled copy under ``plugins/cache/qmem/qmem/<version>``, marked ``.orphaned_at``,
  for a later start to delete; Codex leaves the empty ``plugins/cache/qmem`` folder.  Only folders
  that are qmem plugin copies (they hold ``mcp.py`` and ``.codex-plugin/plugin.json`` naming qmem)
  are removed.  Memories are never touched.

The host's executable is ``claude`` / ``codex`` on ``PATH``.  A host command that fails stops
everything after it, with one line naming the command and the host's last line of error.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from .. import __version__
from ..errors import QmemError
from ..files.smallfile import MIB, UnreadableFile, read_json_file, read_small_file
from ..hostdirs import agent_directory
from ..valueclass import dataclass, field
from .plugincheck import LABELS, PLUGIN_ID, check_plugins
from .pluginentry import MARKET, PLUGIN

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["install_plugin", "uninstall_plugin"]

HOSTS = ("claude", "codex")
COMMAND_TIMEOUT_S = 120.0
_ADD = {"claude": ["plugin", "install", PLUGIN_ID], "codex": ["plugin", "add", PLUGIN_ID]}
_REMOVE = {"claude": ["plugin", "uninstall", PLUGIN_ID], "codex": ["plugin", "remove", PLUGIN_ID]}


#: How a headless run gets to call qmem's tools (each host asks first; a headless run cannot ask).
_APPROVAL = {
    "claude": "claude -p calls qmem's tools only when --allowedTools names them, e.g. --allowedTools "
              "mcp__plugin_qmem_qmem__qmem_search,mcp__plugin_qmem_qmem__qmem_store",
    "codex": f"codex exec refuses MCP tool calls it cannot ask about; to approve qmem's, add to config.toml: "
             f"[plugins.\"{PLUGIN_ID}\".mcp_servers.qmem] default_tools_approval_mode = \"approve\"",
}


class PluginSetupError(QmemError):
    category = "setup"


@dataclass
class PluginResult:
    host: str
    action: str  # installed | removed | not installed
    commands: list[str] = field(default_factory=list)  # what was run, in order
    removed: list[str] = field(default_factory=list)  # what the host left and qmem removed
    copies: list[str] = field(default_factory=list)  # installed: the copies whose server starts

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "plugin": PLUGIN_ID, "action": self.action, "version": __version__,
                "commands": list(self.commands), "removed": list(self.removed), "copies": list(self.copies)}

    def describe(self) -> str:
        label = LABELS[self.host]
        lines = [f"ran: {command}" for command in self.commands]
        if self.action == "installed":
            lines.append(f"qmem {__version__} installed in {label} as the plugin {PLUGIN_ID}; its MCP server starts "
                         f"from {', '.join(self.copies)}")
            lines.append(_APPROVAL[self.host])
        elif self.action == "removed":
            lines += [f"removed what {label} left: {path}" for path in self.removed]
            lines.append(f"the plugin {PLUGIN_ID} is removed from {label}; your memories stay in the data directory")
        else:
            lines.append(f"the plugin {PLUGIN_ID} is not installed in {label}; nothing to remove")
        return "\n".join(lines)


def marketplace_root() -> Path | None:
    """The repository holding this qmem, when it is a marketplace (a clone), else None."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / ".claude-plugin" / "marketplace.json").is_file() else None


def _executable(host: str, env: Mapping[str, str]) -> str:
    found = shutil.which(host, path=env.get("PATH"))
    if found is None:
        raise PluginSetupError(f"{host} is not on PATH: install {LABELS[host]} first (or put its bin folder on PATH)")
    return found


def _run(executable: str, args: list[str], env: Mapping[str, str], result: PluginResult) -> None:
    shown = " ".join([Path(executable).name, *args])
    try:
        proc = subprocess.run([executable, *args], env=dict(env), stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, errors="replace", timeout=COMMAND_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        raise PluginSetupError(f"`{shown}` could not be run ({exc.__class__.__name__})") from None
    result.commands.append(shown)
    if proc.returncode != 0:
        said = [line for line in (proc.stderr + proc.stdout).splitlines() if line.strip()
                and not line.startswith("WARNING: proceeding")]
        raise PluginSetupError(f"`{shown}` failed (exit {proc.returncode}): {(said or ['no output'])[-1][:200]}")


def install_plugin(host: str, env: Mapping[str, str]) -> PluginResult:
    """Install through the host's commands, then check the install; see the module docstring."""
    root = marketplace_root()
    if root is None:
        raise PluginSetupError(f"this qmem ({Path(__file__).resolve().parents[1]}) is not in a clone of the qmem "
                               f"repository, which is the marketplace: in a clone run `{host} plugin marketplace add "
                               f"<clone>` and `{' '.join([host, *_ADD[host]])}`")
    executable = _executable(host, env)
    result = PluginResult(host, "installed")
    _run(executable, ["plugin", "marketplace", "add", str(root)], env, result)
    _run(executable, _ADD[host], env, result)
    check = check_plugins(env)
    report = check.document[host]
    problems = [problem for problem in check.problems if problem.startswith(LABELS[host])]
    if problems:
        raise PluginSetupError("; ".join(problems))
    result.copies = [copy["path"] for copy in report["copies"] if copy.get("starts")]
    if not report.get("installed") or not result.copies:
        raise PluginSetupError(f"{LABELS[host]} reported success but doctor finds no installed copy of {PLUGIN_ID} "
                               f"under {report.get('directory')}")
    return result


def _is_qmem_copy(folder: Path) -> bool:
    try:
        manifest = read_json_file(folder / ".codex-plugin" / "plugin.json")
    except UnreadableFile:
        return False
    return (folder / "mcp.py").is_file() and isinstance(manifest, dict) and manifest.get("name") == PLUGIN


def _known_marketplace(host: str, root: Path) -> bool:
    if host == "codex":
        try:
            text = (read_small_file(root / "config.toml", MIB) or b"").decode("utf-8", "replace")
        except UnreadableFile:
            return False
        return f"[marketplaces.{MARKET}]" in text
    try:
        known = read_json_file(root / "plugins" / "known_marketplaces.json")
    except UnreadableFile:
        return False
    return isinstance(known, dict) and MARKET in known


def uninstall_plugin(host: str, env: Mapping[str, str]) -> PluginResult:
    """Uninstall through the host's commands, then remove what they leave; see the module docstring."""
    root = agent_directory(host, env).path
    if root is None:
        raise PluginSetupError(agent_directory(host, env).problem or f"{LABELS[host]}'s directory is unknown")
    before = check_plugins(env).document[host]
    result = PluginResult(host, "removed")
    if before.get("installed"):
        _run(_executable(host, env), _REMOVE[host], env, result)
    if _known_marketplace(host, root):
        _run(_executable(host, env), ["plugin", "marketplace", "remove", MARKET], env, result)
    cache = root / "plugins" / "cache" / MARKET
    for copy in sorted((cache / PLUGIN).glob("*")) if (cache / PLUGIN).is_dir() else []:
        if copy.is_dir() and not copy.is_symlink() and _is_qmem_copy(copy):
            shutil.rmtree(copy)
            result.removed.append(str(copy))
    for folder in (cache / PLUGIN, cache):
        try:
            folder.rmdir()  # only when empty
            result.removed.append(str(folder))
        except OSError:
            pass
    if not result.commands and not result.removed:
        result.action = "not installed"
    after = check_plugins(env).document[host]
    if after.get("installed") or after.get("copies"):
        raise PluginSetupError(f"{LABELS[host]} still has {PLUGIN_ID} after the uninstall: "
                               f"{', '.join(c['path'] for c in after.get('copies') or []) or 'see doctor'}")
    return result
