"""``doctor``'s view of the Claude Code and Codex plugin installs, and whether their MCP entry would start.

Where each host records the plugin ``qmem@qmem`` (read the safe way, :mod:`qmem.files.smallfile`):

* **Claude Code** (``$CLAUDE_CONFIG_DIR``, default ``~/.claude``): ``plugins/installed_plugins.json``
  names each install's copy (``installPath``, under ``plugins/cache/qmem/qmem/<version>``);
  ``settings.json``'s ``enabledPlugins`` says whether it is on.  A copy that holds ``.orphaned_at``
  is one Claude Code uninstalled and keeps until a later start deletes it.
* **Codex** (``$CODEX_HOME``, default ``~/.codex``): the copy is
  ``plugins/cache/qmem/qmem/<version>``; ``config.toml`` holds a ``[plugins."qmem@qmem"]`` table
  while it is installed (looked for as text: Python 3.10 has no TOML reader).

For each copy, :func:`entry_starts` starts the copy's own ``.mcp.json`` entry the way that host does
(:func:`qmem.setup.pluginentry.expand_for_host`: Claude Code expands ``${CLAUDE_PLUGIN_ROOT}`` and
passes its environment; Codex expands nothing, starts it in the copy and passes only a few variables
and the entry's ``env_vars``), with ``--version``, and checks that it answers with this copy's
version.  A copy whose entry would not start is a problem (one line, the entry's own first line of
error); an orphaned copy is a warning.  Nothing is written.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ..files.smallfile import UnreadableFile, read_json_file, read_small_file
from ..hostdirs import agent_directory
from ..valueclass import dataclass, field
from .pluginentry import MARKET, PLUGIN

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__: list[str] = []

PLUGIN_ID = f"{PLUGIN}@{MARKET}"
LABELS = {"claude": "Claude Code", "codex": "Codex"}
#: What Codex 0.171.0 passes a stdio MCP server besides its env_vars (measured: the server's environment).
CODEX_PASSED = ("HOME", "LOGNAME", "PATH", "SHELL", "USER", "LANG", "LC_ALL", "TERM", "TMPDIR", "TZ")
START_TIMEOUT_S = 30.0

@dataclass
class PluginCheck:
    document: dict[str, Any]
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _copies(cache: Path) -> list[Path]:
    try:
        return sorted(path for path in cache.iterdir() if path.is_dir())
    except OSError:
        return []


def entry_starts(host: str, copy: Path, env: Mapping[str, str]) -> str | None:
    """None when the copy's MCP entry, started as ``host`` starts it, answers ``--version`` with the
    copy's version; else why not, in one line."""
    from .pluginentry import expand_for_host

    try:
        document = read_json_file(copy / ".mcp.json")
        manifest = read_json_file(copy / ".codex-plugin" / "plugin.json")
    except UnreadableFile as exc:
        return exc.message
    entry = document.get("mcpServers", {}).get("qmem") if isinstance(document, dict) else None
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        return f"{copy / '.mcp.json'} names no qmem server"
    version = manifest.get("version") if isinstance(manifest, dict) else None
    argv, cwd = expand_for_host(entry, host, str(copy))
    command = shutil.which(argv[0], path=env.get("PATH")) if os.sep not in argv[0] else argv[0]
    if command is None:
        return f"{argv[0]} is not on PATH"
    if host == "codex":
        names = (*CODEX_PASSED, *(str(name) for name in entry.get("env_vars") or []))
        child_env = {name: env[name] for name in names if name in env}
    else:
        child_env = dict(env)
    try:
        proc = subprocess.run([command, *argv[1:], "--version"], cwd=cwd or str(copy.parent), env=child_env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace",
                              timeout=START_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"it could not be run ({exc.__class__.__name__})"
    if proc.returncode == 0 and proc.stdout.strip() == f"qmem-mcp {version}":
        return None
    said = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no output"])[-1]
    return f"exit {proc.returncode}: {said[:200]}"


def _read_json(path: Path, unread: list[str]) -> Any:
    try:
        return read_json_file(path)
    except UnreadableFile as exc:
        unread.append(exc.message)
        return None


def _claude(env: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """(the report, files that could not be read)."""
    root = agent_directory("claude", env).path
    report: dict[str, Any] = {"host": "claude", "directory": str(root) if root else None, "copies": []}
    unread: list[str] = []
    if root is None:
        return report, unread
    installed = _read_json(root / "plugins" / "installed_plugins.json", unread)
    settings = _read_json(root / "settings.json", unread)
    plugins = installed.get("plugins") if isinstance(installed, dict) else None
    records = plugins.get(PLUGIN_ID) if isinstance(plugins, dict) else None
    paths = {str(r.get("installPath")) for r in records or [] if isinstance(r, dict) and r.get("installPath")}
    report["installed"] = bool(paths)
    enabled = settings.get("enabledPlugins") if isinstance(settings, dict) else None
    report["enabled"] = enabled.get(PLUGIN_ID) is True if isinstance(enabled, dict) else None
    for copy in _copies(root / "plugins" / "cache" / MARKET / PLUGIN):
        report["copies"].append({"path": str(copy), "installed": str(copy) in paths,
                                 "orphaned": (copy / ".orphaned_at").exists()})
    return report, unread


def _codex(env: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    root = agent_directory("codex", env).path
    report: dict[str, Any] = {"host": "codex", "directory": str(root) if root else None, "copies": []}
    unread: list[str] = []
    if root is None:
        return report, unread
    try:
        config = (read_small_file(root / "config.toml", 1 << 20) or b"").decode("utf-8", "replace")
    except UnreadableFile as exc:
        config = ""
        unread.append(exc.message)
    report["installed"] = report["enabled"] = f'[plugins."{PLUGIN_ID}"]' in config
    for copy in _copies(root / "plugins" / "cache" / MARKET / PLUGIN):
        report["copies"].append({"path": str(copy), "installed": report["installed"], "orphaned": False})
    return report, unread


def check_plugins(env: Mapping[str, str]) -> PluginCheck:
    """Both hosts' installs of ``qmem@qmem``; see the module docstring."""
    check = PluginCheck({})
    for host, find in (("claude", _claude), ("codex", _codex)):
        report, unread = find(env)
        label = LABELS[host]
        check.warnings += [f"{label}: {message}" for message in unread]
        for copy in report["copies"]:
            if copy["orphaned"] or not copy["installed"]:
                check.warnings.append(f"{label}: {copy['path']} is left from an uninstall (`python3 -m qmem.local "
                                      f"uninstall {host}` removes it)")
                continue
            why = entry_starts(host, Path(copy["path"]), env)
            copy["starts"] = why is None
            if why:
                check.problems.append(f"{label} plugin {PLUGIN_ID}: its MCP server would not start from "
                                      f"{copy['path']} ({why})")
        if report.get("installed") and report.get("enabled") is False:
            check.warnings.append(f"{label}: the plugin {PLUGIN_ID} is installed but not enabled")
        check.document[host] = report
    return check


def plugin_words(report: Mapping[str, Any]) -> str:
    """One host's part of doctor's ``plugins`` line."""
    live = [copy for copy in report.get("copies") or [] if copy.get("installed") and not copy.get("orphaned")]
    if not report.get("installed") and not live:
        return "not installed" + (" (an old copy is left)" if report.get("copies") else "")
    words = [f"{PLUGIN_ID} installed" + {True: ", enabled", False: ", ✗ NOT enabled", None: ""}[report.get("enabled")]]
    for copy in live:
        words.append(f"{copy['path']} {'starts' if copy.get('starts') else '✗ would not start'}")
    return "; ".join(words)
