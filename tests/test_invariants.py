"""DESIGN §8 invariants that hold across modules: admin isolation, standard library only; and the
house rules of ARCHITECTURE.md that a static read can check (module size, private names)."""

import ast
import json
import subprocess
import sys
import textwrap
import unittest
from pathlib import Path

from .support import REPO, TempHomeTestCase

PACKAGE = REPO / "qmem"
#: The admin surface: reached only as ``python -m qmem.admin``; nothing at runtime may import it.
ADMIN_MODULES = {"admin", "adminargs", "admincontext", "adminimport", "admininit", "adminqdrant", "adminrender",
                 "adminstatus", "hermesimport", "hermesimportplan"}

#: What one reader holds in mind (issue 21): past it, a module is split along a real seam.
MAX_MODULE_LINES = 650


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import in ``path``, relative ones resolved inside qmem."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = "qmem" + (f".{node.module}" if node.module else "")
                found.append((node.lineno, base))
                if not node.module:
                    found += [(node.lineno, f"qmem.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module or ""))
    return found


class StaticTests(unittest.TestCase):
    def test_runtime_code_imports_only_the_standard_library(self):
        allowed = set(sys.stdlib_module_names) | {"__future__", "qmem"}
        offenders = [f"{path.name}:{line} {module}" for path in sorted(PACKAGE.glob("*.py"))
                     for line, module in _imports(path) if module.split(".")[0] not in allowed]
        self.assertEqual(offenders, [])

    def test_every_module_fits_in_a_readers_head(self):
        sizes = {path.name: len(path.read_text(encoding="utf-8").splitlines()) for path in PACKAGE.glob("*.py")}
        self.assertEqual({name: lines for name, lines in sizes.items() if lines > MAX_MODULE_LINES}, {})

    def test_no_module_reaches_for_another_modules_private_names(self):
        offenders = []
        for path in sorted(PACKAGE.glob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            modules = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                       and (node.level or (node.module or "").startswith("qmem")) and not node.module
                       for alias in node.names}  # from . import config [as config_mod]
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("qmem")):
                    offenders += [f"{path.name}:{node.lineno} imports {alias.name}" for alias in node.names
                                  if alias.name.startswith("_") and not alias.name.startswith("__")]
                elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                      and node.value.id in modules and node.attr.startswith("_") and not node.attr.startswith("__")):
                    offenders.append(f"{path.name}:{node.lineno} uses {node.value.id}.{node.attr}")
        self.assertEqual(offenders, [])

    def test_nothing_outside_the_admin_surface_imports_it(self):
        offenders = [f"{path.name}:{line} {module}" for path in sorted(PACKAGE.glob("*.py"))
                     if path.stem not in ADMIN_MODULES
                     for line, module in _imports(path)
                     if module.startswith("qmem.") and ADMIN_MODULES & set(module.split(".")[1:])]
        self.assertEqual(offenders, [])


RUNTIME_PATHS = textwrap.dedent("""
    import io, json, os, sys
    from pathlib import Path
    home = Path(sys.argv[1])
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "")}
    os.environ.clear(); os.environ.update(env)

    from qmem import local, plugin, bridge, mcp, hermes, recall, store, sync
    assert local.run(["status"], env=env).code == 0
    assert local.run(["store", "--queue-only", "--project", "p", "--text", "isolation"], env=env).code == 0
    assert local.run(["find", "isolation"], env=env).code == 0
    session = plugin.PluginSession(host="pi", cwd=home, env=dict(env))
    session.call_tool("qmem_search", {"query": "isolation"})
    session.command("qmem:local", "queue")
    session.command("qmem:config", "show")
    session.context([{"role": "user", "content": "isolation"}])
    session.system_prompt_addition(None)
    session.close()
    server = mcp.McpServer(plugin.PluginSession(host=None, cwd=home, env=dict(env)),
                           io.BytesIO(b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\\n'), io.BytesIO())
    server.serve()
    class Ctx:
        def register_tool(self, *a, **k): pass
        def register_command(self, *a, **k): pass
    import qmem
    qmem.register(Ctx())
    print(json.dumps(sorted(m for m in sys.modules if m.startswith("qmem"))))
""")


class RuntimeIsolationTests(TempHomeTestCase):
    def test_runtime_paths_never_load_the_admin_modules(self):
        proc = subprocess.run([sys.executable, "-c", RUNTIME_PATHS, str(self.home)], cwd=REPO, env=self.env,
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        loaded = set(json.loads(proc.stdout.strip().splitlines()[-1]))
        self.assertIn("qmem.local", loaded)  # the paths really ran (qmem.local is imported on use)
        self.assertIn("qmem.mcp", loaded)
        self.assertFalse({f"qmem.{name}" for name in ADMIN_MODULES} & loaded, loaded)
