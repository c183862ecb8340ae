"""Ready-to-paste MCP server entries for qmem (``python3 -m qmem.local mcp-config CLIENT``).

Promises:

* **This interpreter**, by its absolute path (``sys.executable``): the one that has just run,
  so it is ≥ 3.10 and finds this qmem.  ``PYTHONPATH`` is the directory that contains this
  ``qmem`` package, unless the package is installed in that interpreter's site-packages.
* **Nothing from the client's working directory.**  Clients start a server in the project
  (or wherever they run), and ``python3 -m`` would import a project's ``json.py`` before
  qmem's first line.  So the entry is ``-P -m qmem.mcp`` on 3.11+ (no path entry is made) and
  on 3.10 a ``-c`` bootstrap whose first statement, using only ``sys``, drops the ``''``
  entry before anything is imported (:func:`bootstrap`).  Prime, which cannot pass
  ``PYTHONPATH``, gets the bootstrap with the path inside.
* **Every credential the server will need, by name, never by value**: the Memory Gateway
  key, and with recall configured the Qdrant and embeddings keys and ``QMEM_HOST`` (whose
  curated memories ``memory_search`` searches: ``recall.host`` if the config names one,
  else ``pi`` — ``prime`` in Prime's entry —, said in a comment).  Each client gets them its own way: shell references in
  ``claude mcp add -e``, Codex's ``env_vars`` (forwarded by name), Hermes' ``${VAR}``
  (filled from its environment or ``~/.hermes/.env``), Prime's ``--env VAR=VAR`` (for
  variables set where ``mcp-config`` runs: Prime refuses a reference to an unset one), and
  in a JSON document the placeholder ``<your VAR>``.
* Clients: ``claude``, ``codex`` (a ``config.toml`` table), ``hermes`` (a ``config.yaml``
  ``mcp_servers`` entry), ``prime`` (a ``prime-agent mcp add`` command) and ``json`` (the
  common ``{"mcpServers": …}`` document).  Strings are written as JSON strings, which are
  valid TOML and YAML too.
"""

from __future__ import annotations

import json
import os
import shlex
import site
import sys
import sysconfig
from pathlib import Path

from ..config import CREDENTIAL_VARIABLES, HOST_LANES
from ..valueclass import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["server_entry", "render"]

CLIENTS = ("claude", "codex", "hermes", "prime", "json")
KEY_VARIABLE = "QMEM_GATEWAY_API_KEY"
KEY_PLACEHOLDER = f"<your {KEY_VARIABLE}>"
RECALL_VARIABLES = (CREDENTIAL_VARIABLES["qdrant"][0], CREDENTIAL_VARIABLES["embedding"][0])
MODULE = "qmem.mcp"


def placeholder(variable: str) -> str:
    return f"<your {variable}>"


def bootstrap(pythonpath: str | None = None) -> str:
    """The ``-c`` code that starts the server with nothing from the working directory on
    ``sys.path``: its first statement uses only ``sys`` (loaded before any path exists)."""
    insert = f"sys.path.insert(0, {json.dumps(pythonpath)}); " if pythonpath else ""
    return f"import sys; sys.path[:] = [p for p in sys.path if p]; {insert}from {MODULE} import main; sys.exit(main())"


@dataclass(frozen=True)
class ServerEntry:
    command: str  # the interpreter, absolute
    pythonpath: str | None  # None: qmem is installed in the interpreter
    safe_path_flag: bool  # the interpreter has -P (3.11+)
    credentials: tuple[str, ...]  # variables the server reads, to be passed from the client's environment
    host: str | None = None  # QMEM_HOST, with recall configured
    host_configured: bool = False  # recall.host names it (else the default lane is shown)
    available: tuple[str, ...] = ()  # the credentials set where mcp-config ran (names only)

    @property
    def recall(self) -> bool:
        return self.host is not None

    @property
    def args(self) -> tuple[str, ...]:
        """For clients that pass ``PYTHONPATH`` in the environment."""
        return ("-P", "-m", MODULE) if self.safe_path_flag else ("-c", bootstrap())

    @property
    def literal_env(self) -> dict[str, str]:
        """Environment values the entry states outright (no credential among them)."""
        env = {"PYTHONPATH": self.pythonpath} if self.pythonpath else {}
        if self.host:
            env["QMEM_HOST"] = self.host
        return env

    def to_json(self) -> dict[str, Any]:
        """The entry as the common JSON shape: credentials as placeholders."""
        env = {**self.literal_env, **{name: placeholder(name) for name in self.credentials}}
        return {"command": self.command, "args": list(self.args), "env": env, "credentials": list(self.credentials)}


def _site_directories() -> set[Path]:
    paths = {sysconfig.get_paths().get(name) for name in ("purelib", "platlib")}
    try:
        paths.update(site.getsitepackages())
    except AttributeError:  # some virtualenvs' site module
        pass
    paths.add(site.getusersitepackages())
    return {Path(p).resolve() for p in paths if p}


def server_entry(env: Mapping[str, str] | None = None) -> ServerEntry:
    """The entry for this interpreter and this qmem (``env`` decides only what recall needs)."""
    root = Path(__file__).resolve().parents[2]  # the folder that holds qmem/
    pythonpath = None if root in _site_directories() else str(root)
    host: str | None = None
    configured = False
    try:
        from ..config import load_config

        recall = load_config(env).recall
        if recall.active:
            configured = recall.host in HOST_LANES
            host = recall.host if configured else HOST_LANES[0]
    except Exception:  # a broken config is doctor's business, not this entry's
        host = None
    credentials = (KEY_VARIABLE, *RECALL_VARIABLES) if host else (KEY_VARIABLE,)
    environment = os.environ if env is None else env
    available = tuple(name for name in credentials if (environment.get(name) or "").strip())
    return ServerEntry(command=str(Path(sys.executable).absolute()), pythonpath=pythonpath,
                       safe_path_flag=sys.version_info >= (3, 11), credentials=credentials, host=host,
                       host_configured=configured, available=available)


def _q(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _host_note(entry: ServerEntry, host: str | None = None) -> list[str]:
    if not entry.recall:
        return []
    why = "as recall.host in your config says" if entry.host_configured else "the config names no recall.host"
    return [f"# QMEM_HOST={host or entry.host} ({why}): memory_search searches the curated memories of that host "
            f"({' or '.join(HOST_LANES)})"]


def _claude(entry: ServerEntry) -> str:
    parts = ["claude", "mcp", "add", "qmem", "--scope", "user"]
    parts += [f'-e {name}="${name}"' for name in entry.credentials]
    parts += ["-e " + shlex.quote(f"{name}={value}") for name, value in entry.literal_env.items()]
    parts += ["--", shlex.quote(entry.command), *(shlex.quote(arg) for arg in entry.args)]
    names = ", ".join(f"${name}" for name in entry.credentials)
    return "\n".join([f"# the shell fills in {names} from your environment when you run this", *_host_note(entry),
                      " ".join(parts)])


def _codex(entry: ServerEntry) -> str:
    table = ", ".join(f"{name} = {_q(value)}" for name, value in entry.literal_env.items())
    lines = [f"# in ~/.codex/config.toml; Codex forwards {', '.join(entry.credentials)} from its own environment "
             f"(env_vars)", *_host_note(entry),
             "[mcp_servers.qmem]",
             f"command = {_q(entry.command)}",
             f"args = [{', '.join(_q(arg) for arg in entry.args)}]"]
    if table:
        lines.append(f"env = {{ {table} }}")
    lines.append(f"env_vars = [{', '.join(_q(name) for name in entry.credentials)}]")
    return "\n".join(lines)


def _hermes(entry: ServerEntry) -> str:
    env = {**entry.literal_env, **{name: f"${{{name}}}" for name in entry.credentials}}
    return "\n".join([
        "# in $HERMES_HOME/config.yaml (default ~/.hermes); Hermes fills in each ${…} from its environment or "
        "$HERMES_HOME/.env. `python3 -m qmem.local install hermes` installs the plugin instead (it adds recall)",
        *_host_note(entry),
        "mcp_servers:",
        "  qmem:",
        f"    command: {_q(entry.command)}",
        f"    args: [{', '.join(_q(arg) for arg in entry.args)}]",
        "    env:",
        *(f"      {name}: {_q(value)}" for name, value in env.items()),
    ])


def _prime(entry: ServerEntry) -> str:
    # Prime's --env only maps variables (CHILD=SOURCE) and refuses one that is not set, so the path goes
    # into the -c bootstrap, QMEM_HOST too, and only the credentials set here are referenced.
    code = bootstrap(entry.pythonpath)
    host = (entry.host if entry.host_configured else "prime") if entry.recall else None  # Prime's own lane
    if host:
        code = code.replace(f"from {MODULE} ", f"import os; os.environ.setdefault(\"QMEM_HOST\", {_q(host)}); "
                                               f"from {MODULE} ", 1)
    passed = [name for name in entry.credentials if name in entry.available]
    missing = [name for name in entry.credentials if name not in passed]
    line = ["prime-agent", "mcp", "add", "qmem", *(f"--env {name}={name}" for name in passed), "--",
            shlex.quote(entry.command), "-c", shlex.quote(code)]
    notes = ["# Prime passes the server its own value of each --env variable; in Prime the extension "
             "(python3 -m qmem.local install prime) is the better fit: it adds recall", *_host_note(entry, host)]
    notes += [f"# {name} is not set here: export it and add --env {name}={name} (Prime refuses a reference "
              f"to an unset variable)" for name in missing]
    return "\n".join([*notes, " ".join(line)])


def render(client: str, entry: ServerEntry) -> str:
    """The text to paste for ``client`` (one of :data:`CLIENTS`)."""
    if client == "json":
        document = entry.to_json()
        document.pop("credentials")
        return json.dumps({"mcpServers": {"qmem": document}}, indent=2, ensure_ascii=False)
    if client == "claude":
        return _claude(entry)
    if client == "codex":
        return _codex(entry)
    if client == "hermes":
        return _hermes(entry)
    if client == "prime":
        return _prime(entry)
    raise ValueError(f"unknown MCP client {client!r}")
