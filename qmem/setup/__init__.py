"""Putting qmem into hosts, taking it out, and checking the whole setup (``qmem.local install``,
``uninstall``, ``doctor``, ``mcp-config``).  Only the offline CLI reaches this folder, on use.

``install`` puts qmem into pi, Prime or Hermes and takes it out; ``installrecord`` remembers what
install created; ``hostpackages`` finds qmem installed by pi's or Prime's own installer;
``hostcheck`` is doctor's view of the hosts; ``hermesconfig`` enables qmem in Hermes'
``config.yaml`` where the edit is certain; ``mcpconfig`` prints ready MCP server entries;
``pluginentry`` is the MCP entry of the Claude Code / Codex plugin (``qmem/.mcp.json``),
``plugininstall`` installs that plugin through the hosts' own commands and removes what their
uninstall leaves, ``plugincheck`` is doctor's view of it; ``doctor`` checks every part.
"""
