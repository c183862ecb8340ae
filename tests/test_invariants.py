"""DESIGN §8 invariants that hold across modules: admin isolation, standard library only; and the
house rules of ARCHITECTURE.md that a static read can check (module size, private names)."""

import ast
import json
import subprocess
import sys
import textwrap
import unittest
from pathlib import Path

from .packagemap import declared_all, folder_of, import_closure, import_sites, modules, names_used, tree
from .support import REPO, TempHomeTestCase

PACKAGE = REPO / "qmem"
#: The admin surface: ``python3 -m qmem.admin`` and its folder; nothing at runtime may import it.
ADMIN_MODULES = {"admin"} | {name for name in modules() if folder_of(name) == "curation"}
#: Where a running host, the MCP server, the bridge and ``qmem.local`` start.
RUNTIME_ROOTS = ("", "local", "mcp", "bridge", "hermes.adapter", "hosts.session", "store", "sync", "recall")

#: What one reader holds in mind (issue 21): past it, a module is split along a real seam.
MAX_MODULE_LINES = 650
#: The root shows the product (issue 26): its entries, the design card's modules, a few shared
#: services; every lane is a folder, and a folder one reader can survey.
MAX_ROOT_MODULES, MAX_FOLDER_MODULES = 20, 12
#: Names a module offers without anything in qmem importing them: the console scripts' ``main``
#: (pyproject.toml) and Hermes' ``register``.
ENTRY_NAMES = {("local", "main"), ("admin", "main"), ("mcp", "main"), ("", "register")}


def _same_folder(a: str, b: str) -> bool:
    """Two modules of one lane folder (each module at the root is a lane of its own)."""
    return folder_of(a) == folder_of(b) != ""


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


class StaticTests(unittest.TestCase):
    def test_runtime_code_imports_only_the_standard_library(self):
        allowed = set(sys.stdlib_module_names) | {"__future__"}
        offenders = []
        for name, path in modules().items():
            for node in ast.walk(tree(name)):
                if isinstance(node, ast.Import):
                    offenders += [f"{name}:{node.lineno} {a.name}" for a in node.names
                                  if a.name.split(".")[0] not in allowed | {"qmem"}]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    if (node.module or "").split(".")[0] not in allowed | {"qmem"}:
                        offenders.append(f"{name}:{node.lineno} {node.module}")
        self.assertEqual(offenders, [])

    def test_every_module_fits_in_a_readers_head(self):
        sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules().items()}
        self.assertEqual({name: lines for name, lines in sizes.items() if lines > MAX_MODULE_LINES}, {})

    def test_the_root_shows_the_product_and_every_folder_fits_in_view(self):
        counts: dict[str, int] = {}
        for path in PACKAGE.rglob("*.py"):
            folder = path.parent.relative_to(PACKAGE).as_posix()
            counts[folder] = counts.get(folder, 0) + 1
        self.assertLessEqual(counts["."], MAX_ROOT_MODULES, "Python modules at qmem/")
        self.assertEqual({folder: n for folder, n in counts.items() if folder != "." and n > MAX_FOLDER_MODULES}, {})
        # An entry is a module, never a package: a package would run its __init__ before the entry's guard.
        for entry in ("local", "admin", "mcp", "bridge"):
            self.assertTrue((PACKAGE / f"{entry}.py").is_file(), entry)
        # The design card's five modules stay importable where it names them.
        for card in ("recall", "store", "breaker", "localindex", "admin"):
            self.assertTrue((PACKAGE / f"{card}.py").is_file(), card)

    def test_no_module_reaches_for_another_modules_private_names(self):
        offenders = []
        for name in modules():
            module_aliases = {}
            for node in ast.walk(tree(name)):
                if isinstance(node, ast.ImportFrom):
                    offenders += [f"{name}:{node.lineno} imports {alias.name}" for alias in node.names
                                  if _private(alias.name) and (node.level or (node.module or "").startswith("qmem"))]
            for line, module, attribute in import_sites(name):
                if attribute is None:
                    for node in ast.walk(tree(name)):
                        if isinstance(node, ast.ImportFrom) and node.lineno == line:
                            for alias in node.names:
                                module_aliases[alias.asname or alias.name] = module
            for node in ast.walk(tree(name)):
                if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                        and node.value.id in module_aliases and _private(node.attr)):
                    offenders.append(f"{name}:{node.lineno} uses {node.value.id}.{node.attr}")
        self.assertEqual(offenders, [])

    def test_a_folder_offers_only_what_other_lanes_import(self):
        """Private by default: a name imported from another folder is in its module's ``__all__``,
        and a name in an ``__all__`` is imported by some module of another folder."""
        used_outside: dict[str, set[str]] = {name: set() for name in modules()}
        offenders = []
        for importer in modules():
            for line, module, attribute in names_used(importer):
                if _same_folder(importer, module) or attribute.startswith("__"):  # dunders: never in __all__
                    continue
                used_outside[module].add(attribute)
                offered = declared_all(module)
                if offered is None or attribute not in offered:
                    offenders.append(f"{importer}:{line} imports {attribute} from {module or 'qmem'}, "
                                     f"not in its __all__")
        for name in modules():
            for offered in declared_all(name) or ():
                if offered not in used_outside[name] and (name, offered) not in ENTRY_NAMES:
                    offenders.append(f"{name}.__all__ offers {offered}, which no other folder imports")
        self.assertEqual(offenders, [])

    def test_nothing_outside_the_admin_surface_imports_it(self):
        offenders = [f"{name}:{line} {module}" for name in modules() if name not in ADMIN_MODULES
                     for line, module, _ in import_sites(name) if module in ADMIN_MODULES]
        self.assertEqual(offenders, [])
        reached = import_closure(RUNTIME_ROOTS)
        self.assertIn("setup.doctor", reached)  # the walk really follows imports, function-level ones too
        self.assertEqual(reached & ADMIN_MODULES, set())


RUNTIME_PATHS = textwrap.dedent("""
    import io, json, os, sys
    from pathlib import Path
    home = Path(sys.argv[1])
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "")}
    os.environ.clear(); os.environ.update(env)

    from qmem import local, bridge, mcp, recall, store, sync
    from qmem.hosts import session as plugin
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
