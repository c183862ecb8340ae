"""qmem's package as the static guards read it: its modules, and what each one imports.

Names are dotted and relative to the package: ``"localindex"``, ``"localdb.rows"``, and a folder's
own ``__init__`` as the folder's name (``"secretscan"``); the package's ``__init__`` is ``""``.
An import is followed wherever it is written (inside functions too), relative ones resolved
from the importing module's folder; ``from . import x`` names the module ``x`` when there is one.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

from .support import REPO

PACKAGE = REPO / "qmem"


@lru_cache(maxsize=None)
def modules() -> dict[str, Path]:
    """Every module of qmem by dotted name (``__init__`` files named for their folder)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def folder_of(name: str) -> str:
    """The folder a module lives in: ``""`` for the root, ``"localdb"`` for ``localdb.rows``; a
    folder's ``__init__`` belongs to that folder."""
    path = modules()[name]
    return ".".join(path.parent.relative_to(PACKAGE).parts)


def _package_of(name: str) -> str:
    """The package relative imports in ``name`` start from."""
    path = modules()[name]
    return ".".join(path.parent.relative_to(PACKAGE).parts)


@lru_cache(maxsize=None)
def tree(name: str) -> ast.Module:
    return ast.parse(modules()[name].read_text(encoding="utf-8"))


def _resolve(name: str, node: ast.ImportFrom) -> str | None:
    """The qmem module an ImportFrom reads from (None: not qmem)."""
    if node.level:
        base = _package_of(name).split(".") if _package_of(name) else []
        if node.level > 1:
            base = base[:len(base) - (node.level - 1)]
        target = base + (node.module.split(".") if node.module else [])
        return ".".join(target)
    module = node.module or ""
    if module == "qmem":
        return ""
    if module.startswith("qmem."):
        return module[len("qmem."):]
    return None


def import_sites(name: str, *, top_level_only: bool = False) -> list[tuple[int, str, str | None]]:
    """(line, module, imported name) for every qmem import in ``name``: ``imported name`` is the
    attribute taken (``from x import y``), or None for a module imported whole."""
    nodes = tree(name).body if top_level_only else list(ast.walk(tree(name)))
    sites = []
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            source = _resolve(name, node)
            if source is None:
                continue
            for alias in node.names:
                submodule = f"{source}.{alias.name}" if source else alias.name
                if submodule in modules():
                    sites.append((node.lineno, submodule, None))
                else:
                    sites.append((node.lineno, source, alias.name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("qmem."):
                    sites.append((node.lineno, alias.name[len("qmem."):], None))
    return sites


def names_used(name: str) -> list[tuple[int, str, str]]:
    """(line, module, name) for every name ``name`` takes from another qmem module: imported
    (``from x import y``) or read through a module it imported (``import_module.y``)."""
    used = [(line, module, attribute) for line, module, attribute in import_sites(name) if attribute is not None]
    aliases: dict[str, str] = {}
    for node in ast.walk(tree(name)):
        if isinstance(node, ast.ImportFrom) and _resolve(name, node) is not None:
            source = _resolve(name, node)
            for alias in node.names:
                submodule = f"{source}.{alias.name}" if source else alias.name
                if submodule in modules():
                    aliases[alias.asname or alias.name] = submodule
    for node in ast.walk(tree(name)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            used.append((node.lineno, aliases[node.value.id], node.attr))
    return used


def imports_of(name: str) -> set[str]:
    """The qmem modules ``name`` imports, anywhere in it, with the folders' ``__init__`` each import
    runs (importing ``localdb.rows`` runs ``localdb``).  The package's own ``__init__`` runs its one
    import only inside Hermes' ``register``, so only its module-level imports count."""
    found = set()
    for _, module, _ in import_sites(name, top_level_only=(name == "")):
        found.add(module)
        parts = module.split(".")
        found.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return found & set(modules())


def import_closure(roots) -> set[str]:
    """Every qmem module reachable from ``roots`` through :func:`imports_of`."""
    seen: set[str] = set()
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name not in seen:
            seen.add(name)
            pending += imports_of(name)
    return seen


def declared_all(name: str) -> list[str] | None:
    """The names in the module's ``__all__`` (None when it has none)."""
    for node in tree(name).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return [elt.value for elt in node.value.elts if isinstance(elt, ast.Constant)]
    return None
