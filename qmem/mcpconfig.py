"""Ready-to-paste MCP server entries for qmem (``python3 -m qmem.local mcp-config CLIENT``).

Promises:

* The entry runs ``python3 -m qmem.mcp`` with **this** interpreter, by its absolute path
  (``sys.executable``): the one that has just run, so it is ≥ 3.10 and finds this qmem.
* ``PYTHONPATH`` is the directory that contains this ``qmem`` package, unless the package is
  installed in that interpreter's site-packages (then it needs none).
* The Memory Gateway key is never printed: shell commands reference ``$QMEM_GATEWAY_API_KEY``
  (the shell fills it in when the line is run; Prime resolves it from its own environment),
  files get the placeholder :data:`KEY_PLACEHOLDER`.
* Clients: ``claude`` (a ``claude mcp add`` command), ``codex`` (a ``config.toml`` table),
  ``hermes`` (a ``config.yaml`` ``mcp_servers`` entry), ``prime`` (a ``prime-agent mcp add``
  command) and ``json`` (the common ``{"mcpServers": …}`` document).  Strings are written
  as JSON strings, which are valid TOML and YAML too.
"""

from __future__ import annotations

import json
import shlex
import site
import sys
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ServerEntry", "server_entry", "render", "CLIENTS", "KEY_PLACEHOLDER", "KEY_VARIABLE"]

CLIENTS = ("claude", "codex", "hermes", "prime", "json")
KEY_VARIABLE = "QMEM_GATEWAY_API_KEY"
KEY_PLACEHOLDER = f"<your {KEY_VARIABLE}>"


@dataclass(frozen=True)
class ServerEntry:
    command: str
    args: tuple[str, ...]
    pythonpath: str | None  # None: qmem is installed in the interpreter
    recall: bool = False  # recall is configured: memory_search needs QMEM_HOST
    env: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"command": self.command, "args": list(self.args), "env": dict(self.env)}


def _site_directories() -> set[Path]:
    paths = {sysconfig.get_paths().get(name) for name in ("purelib", "platlib")}
    try:
        paths.update(site.getsitepackages())
    except AttributeError:  # some virtualenvs' site module
        pass
    paths.add(site.getusersitepackages())
    return {Path(p).resolve() for p in paths if p}


def server_entry(env: Mapping[str, str] | None = None) -> ServerEntry:
    """The entry for this interpreter and this qmem (``env`` decides only the recall note)."""
    root = Path(__file__).resolve().parent.parent
    pythonpath = None if root in _site_directories() else str(root)
    recall = False
    try:
        from .config import load_config

        recall = load_config(env).recall.active
    except Exception:  # a broken config is doctor's business, not this entry's
        recall = False
    entry_env = {"PYTHONPATH": pythonpath} if pythonpath else {}
    entry_env[KEY_VARIABLE] = KEY_PLACEHOLDER
    return ServerEntry(command=str(Path(sys.executable).absolute()), args=("-m", "qmem.mcp"), pythonpath=pythonpath,
                       recall=recall, env=entry_env)


def _q(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _notes(entry: ServerEntry, key_line: str) -> list[str]:
    notes = [f"# {key_line}"]
    if entry.recall:
        notes.append("# memory_search: add QMEM_HOST=pi (or prime) to the server's environment to search that "
                     "host's curated memories")
    return notes


def render(client: str, entry: ServerEntry) -> str:
    """The text to paste for ``client`` (one of :data:`CLIENTS`)."""
    if client == "json":
        return json.dumps({"mcpServers": {"qmem": entry.to_json()}}, indent=2, ensure_ascii=False)
    if client == "claude":
        parts = ["claude", "mcp", "add", "qmem", "--scope", "user", "-e", f'{KEY_VARIABLE}="${KEY_VARIABLE}"']
        if entry.pythonpath:
            parts += ["-e", shlex.quote(f"PYTHONPATH={entry.pythonpath}")]
        parts += ["--", shlex.quote(entry.command), *entry.args]
        return "\n".join(_notes(entry, f"the shell fills in ${KEY_VARIABLE} from your environment when you run "
                                       f"this") + [" ".join(parts)])
    if client == "prime":
        if entry.pythonpath:
            # Prime's --env only maps variables (CHILD=SOURCE), so the path goes into the command itself.
            bootstrap = (f"import runpy, sys; sys.path.insert(0, {json.dumps(entry.pythonpath)}); "
                         f'runpy.run_module("qmem.mcp", run_name="__main__", alter_sys=True)')
            command = [shlex.quote(entry.command), "-c", shlex.quote(bootstrap)]
        else:
            command = [shlex.quote(entry.command), *entry.args]
        line = " ".join(["prime-agent", "mcp", "add", "qmem", "--env", f"{KEY_VARIABLE}={KEY_VARIABLE}", "--",
                         *command])
        return "\n".join(_notes(entry, f"Prime passes its own ${KEY_VARIABLE} to the server; in Prime the extension "
                                       f"(python3 -m qmem.local install prime) is the better fit: it adds recall")
                         + [line])
    env_pairs = [(name, value) for name, value in entry.env.items()]
    if client == "codex":
        table = ", ".join(f"{name} = {_q(value)}" for name, value in env_pairs)
        return "\n".join(_notes(entry, f"in ~/.codex/config.toml; replace {KEY_PLACEHOLDER} with your key") + [
            "[mcp_servers.qmem]",
            f"command = {_q(entry.command)}",
            f"args = [{', '.join(_q(arg) for arg in entry.args)}]",
            f"env = {{ {table} }}",
        ])
    if client == "hermes":
        return "\n".join(_notes(entry, f"in $HERMES_HOME/config.yaml (default ~/.hermes); replace {KEY_PLACEHOLDER} "
                                       f"with your key. `python3 -m qmem.local install hermes` installs the plugin "
                                       f"instead") + [
            "mcp_servers:",
            "  qmem:",
            f"    command: {_q(entry.command)}",
            f"    args: [{', '.join(_q(arg) for arg in entry.args)}]",
            "    env:",
            *(f"      {name}: {_q(value)}" for name, value in env_pairs),
        ])
    raise ValueError(f"unknown MCP client {client!r}")
