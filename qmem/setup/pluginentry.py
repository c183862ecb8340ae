"""The plugin folder Claude Code and Codex install: its MCP server entry, and where each host put it.

The folder is ``qmem/`` itself (its ``.claude-plugin/plugin.json``, ``.codex-plugin/plugin.json``,
``.mcp.json`` and ``skills/qmem/SKILL.md``), listed by the repository's
``.claude-plugin/marketplace.json``.  Both hosts *copy* it (Claude Code under
``~/.claude/plugins/cache/qmem/qmem/<version>``, or runs a local marketplace's folder in place; Codex
under ``$CODEX_HOME/plugins/cache/qmem/qmem/<version>``), so the package's folder is not named
``qmem`` there and ``-m qmem.mcp`` cannot find it.  Promises of the entry (:func:`mcp_document`, the
text of ``qmem/.mcp.json``):

* **It starts from the copy.**  ``python3 -I -c BOOTSTRAP ${CLAUDE_PLUGIN_ROOT}`` with ``cwd: "."``.
  Claude Code expands ``${CLAUDE_PLUGIN_ROOT}`` and starts the server in the user's project; Codex
  0.171.0 expands nothing, but starts it in the copy (``"."`` is the copy there).  The bootstrap
  takes its argument when it names a qmem plugin folder, else the working directory when that is
  one, and loads the package from that folder under the name ``qmem`` (``importlib``, by path):
  never through ``sys.path``, so never from the project.
* **Nothing from the working directory.**  ``-I`` keeps the working directory, ``PYTHONPATH`` and
  the user's site-packages off ``sys.path`` (and the bootstrap drops any ``''`` entry before its
  first import), so a project's ``json.py`` never runs.
* **Python ≥ 3.10, or one line.**  The bootstrap's first statement compares ``sys.version_info``
  (old syntax only) and exits 1 with ``qmem needs Python ≥ 3.10, found X.Y``.
* **The project.**  Claude Code starts the server in the session's directory: that is the project
  (as for any MCP client).  Codex starts it in the copy and tells the server nothing about the
  session's directory (no MCP roots, no variable, nothing in a tool call's ``_meta``: measured with
  0.171.0), so :func:`qmem.mcp.main` is told the copy (``plugin_root``) and never takes it for a
  project: the rules then suggest ``recall.project`` when it is configured, and otherwise say that
  the host did not tell (the model knows its working directory; Codex tells it).
* **Credentials by name.**  Claude Code passes its whole environment to the server; Codex passes a
  few variables (``HOME``, ``PATH`` …) and those ``env_vars`` names: every credential variable the
  server reads (gateway, Qdrant, embeddings, with their aliases), ``QMEM_HOST`` (whose curated
  memories ``memory_search`` searches) and the variables that move qmem's files.
"""

from __future__ import annotations

import os

from ..config import CREDENTIAL_VARIABLES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__: list[str] = []  # the setup folder uses it; nothing outside does

MARKET = "qmem"  # the marketplace's name in .claude-plugin/marketplace.json
PLUGIN = "qmem"  # the plugin's name: install it as qmem@qmem
SERVER = "qmem"  # the MCP server's name (Claude Code: mcp__plugin_qmem_qmem__*, Codex: namespace mcp__qmem)
ROOT_ARGUMENT = "${CLAUDE_PLUGIN_ROOT}"  # expanded by Claude Code, passed as written by Codex

#: What the server reads from its environment, for a host that forwards variables by name (Codex).
ENV_VARS: tuple[str, ...] = (
    *CREDENTIAL_VARIABLES["gateway"], *CREDENTIAL_VARIABLES["qdrant"], *CREDENTIAL_VARIABLES["embedding"],
    "QMEM_HOST", "QMEM_CONFIG", "QMEM_SQLITE", "QMEM_BREAKER_FILE", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
)

#: The ``-c`` program.  Its first statement uses only ``sys`` and syntax every Python 3 parses, so an
#: old interpreter prints one line; a folder is a qmem plugin folder when it holds ``mcp.py`` and
#: ``.codex-plugin/plugin.json`` (a project that merely holds an ``mcp.py`` is not one).
BOOTSTRAP = (
    "import sys; sys.version_info >= (3, 10) or sys.exit('qmem needs Python \\u2265 3.10, found %d.%d' % "
    "sys.version_info[:2]); sys.path[:] = [p for p in sys.path if p]; import os, importlib.util; "
    "a = sys.argv[1:]; "
    "ok = lambda d: os.path.isfile(os.path.join(d, 'mcp.py')) and "
    "os.path.isfile(os.path.join(d, '.codex-plugin', 'plugin.json')); "
    "r = a[0] if a and ok(a[0]) else os.getcwd(); "
    "ok(r) or sys.exit('qmem: the plugin folder is missing (neither %r nor the working directory is one)' % "
    "(a[:1] or [''])[0]); "
    "s = importlib.util.spec_from_file_location('qmem', os.path.join(r, '__init__.py'), "
    "submodule_search_locations=[r]); m = importlib.util.module_from_spec(s); sys.modules['qmem'] = m; "
    "s.loader.exec_module(m); from qmem.mcp import main; sys.exit(main(a[1:], plugin_root=r))"
)

def server_entry() -> dict[str, Any]:
    """The ``qmem`` server as both hosts read it (Claude Code ignores ``env_vars``)."""
    return {"command": "python3", "args": ["-I", "-c", BOOTSTRAP, ROOT_ARGUMENT], "cwd": ".",
            "env_vars": list(ENV_VARS)}


def mcp_document() -> dict[str, Any]:
    """The whole of ``qmem/.mcp.json``."""
    return {"mcpServers": {SERVER: server_entry()}}


def expand_for_host(entry: Mapping[str, Any], host: str, root: str) -> tuple[list[str], str | None]:
    """(argv, working directory or None: the caller's) as ``host`` ("claude" or "codex") starts ``entry``
    from the copy at ``root``: Claude Code expands ``${CLAUDE_PLUGIN_ROOT}`` and keeps the project as the
    working directory; Codex expands nothing and resolves a relative ``cwd`` against the copy."""
    args = [str(arg) for arg in entry.get("args") or []]
    if host == "claude":
        return [str(entry.get("command")), *(arg.replace(ROOT_ARGUMENT, root) for arg in args)], None
    cwd = entry.get("cwd")
    directory = os.path.normpath(os.path.join(root, cwd)) if isinstance(cwd, str) else None
    return [str(entry.get("command")), *args], directory
