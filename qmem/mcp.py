"""``python3 -m qmem.mcp``: the qmem tools for any MCP client, over stdio, standard library only.

The entry only: the protocol — framing, both eras (the 2026-07-28 stateless protocol beside the
2024-11-05 … 2025-11-25 ``initialize`` handshake), ids, order, errors — is
:mod:`qmem.hosts.mcpserver`'s, whose docstring states it.  Promises here:

* stdout is the protocol channel: anything printed by mistake goes to stderr, with the logs;
  the server exits when stdin ends, after answering every request it read.
* ``memory_search`` is listed only where it can work: recall configured and on, and a host
  identity, ``QMEM_HOST=pi|prime`` or else the config's ``recall.host``.  MCP clients pass few
  environment variables to a server (the official SDK: HOME, PATH and what the client's
  configuration adds), so credentials must be set in the client's server entry.
* **Instructions** are the plugin core's rules block (:func:`qmem.hosts.rules.rules_block`), the
  same text pi and Prime append to the system prompt, machine identification included.
* ``python3 -m qmem.mcp --version`` prints the version; on a Python older than 3.10 the server
  prints one line and exits 1 before reading anything.
"""

if __name__ == "__main__":  # `python3 -m qmem.mcp`: nothing more from the working directory (see qmem/entryguard.py)
    from .entryguard import drop_working_directory

    drop_working_directory()

from .entryguard import require_supported_python  # noqa: E402

require_supported_python()

import os  # noqa: E402  (after the version check: one line on an old Python, no traceback)
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from . import __version__  # noqa: E402
from .config import recall_host  # noqa: E402
from .diagnostics import Warnings  # noqa: E402
from .hosts.mcpserver import McpServer  # noqa: E402
from .hosts.session import PluginSession  # noqa: E402

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main"]

USAGE = "usage: python3 -m qmem.mcp [--version]  (an MCP server on stdio: run it from an MCP client)"


def session_directory(plugin_root: str | None) -> Path | None:
    """Where the client's session works: this server's working directory — unless the server was
    started from a plugin copy and runs in it (Codex starts a plugin's server in its copy and tells
    it nothing of the session's directory), which is then no project of the user's (None)."""
    cwd = Path.cwd()
    if plugin_root:
        try:
            if cwd.resolve() == Path(plugin_root).resolve():
                return None
        except (OSError, RuntimeError):
            return None
    return cwd


def main(argv: "Sequence[str] | None" = None, *, plugin_root: str | None = None) -> int:
    """The server; ``plugin_root``: the plugin copy this process was started from (the plugin
    entry, :mod:`qmem.setup.pluginentry`), which is never taken for the user's project."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:
        sys.stdout.write(f"qmem-mcp {__version__}\n")
        return 0
    if args in (["--help"], ["-h"]):
        sys.stdout.write(USAGE + "\n")
        return 0
    if args:
        sys.stderr.write(f"qmem-mcp: unexpected arguments (try --help)\n{USAGE}\n")
        return 2
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # stdout is the protocol channel
    warnings = Warnings(lambda sentence: sys.stderr.write(sentence + "\n"))
    session = PluginSession(host=recall_host(os.environ), cwd=session_directory(plugin_root), env=dict(os.environ),
                            warnings=warnings)
    try:
        McpServer(session, sys.stdin.buffer, out).serve()
    except KeyboardInterrupt:
        pass
    finally:
        session.wait_for_flush(timeout=2.0)
        session.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
