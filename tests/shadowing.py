"""A project directory that would run inside qmem if qmem ever imported from the working directory.

:func:`make_shadow_project` fills a directory with modules named like the standard library's
(and a ``qmem`` package), each of which writes a marker file the moment it is imported, naming
the process.  Used as the working directory of a host session, an MCP client or a CLI,
:func:`markers` must stay empty: anything in it names a module taken from the project.

The interpreters matter: a Python that pre-imports modules at start-up (a ``.pth`` file, a
``sitecustomize``) cannot have those shadowed, and would let a test pass for the wrong reason.
:func:`clean_python` finds interpreters that pre-import none of :data:`SHADOWED`, by asking
each candidate (this one, the system's, pyenv's) what it has loaded before any code runs.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import subprocess
import sys
from pathlib import Path

#: Standard-library names a project could hold (modules, ``http`` as a package) and qmem's own name.
SHADOW_MODULES = ("json", "uuid", "queue", "secrets", "random", "types", "signal", "sqlite3", "importlib")
SHADOW_PACKAGES = ("http", "qmem")
SHADOWED = SHADOW_MODULES + SHADOW_PACKAGES
#: What runpy imports through sys.path[0] before any qmem code can act (see qmem/entryguard.py).
BEFORE_QMEM = ("types", "importlib", "qmem")


#: A shadow module: it notes who imported it, then becomes the real module (loaded with the project's
#: directory off sys.path), so the host itself keeps working and the marker alone tells the story.
#: The first statement uses only sys, which is built in and so cannot be shadowed.
SHIM = """import sys
open({marker!r}, "a").write(repr([sys.executable, *sys.argv]) + "\\n")
_saved = sys.path[:]
_project = {project!r}
sys.path[:] = [_entry for _entry in sys.path if _entry and _entry.rstrip("/") != _project]
try:
    del sys.modules[__name__]
    __import__(__name__)  # the real one: it takes this module's place in sys.modules
finally:
    sys.path[:] = _saved
"""


def make_shadow_project(directory: Path, markers: Path, names: tuple[str, ...] = SHADOWED) -> Path:
    """Write the shadow modules into ``directory`` (a git work tree); each marks ``markers/<name>``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / ".git").mkdir(exist_ok=True)
    markers.mkdir(parents=True, exist_ok=True)
    for name in names:
        code = SHIM.format(marker=str(markers / name), project=os.path.realpath(directory))
        if name in SHADOW_PACKAGES:
            (directory / name).mkdir(exist_ok=True)
            (directory / name / "__init__.py").write_text(code)
        else:
            (directory / f"{name}.py").write_text(code)
    return directory


def markers(directory: Path, by: Path | str | None = None) -> dict[str, str]:
    """The shadow modules that were imported, each with the processes that imported it (empty: none);
    ``by``: only imports made by that interpreter."""
    found = {}
    for name in sorted(os.listdir(directory)) if directory.exists() else []:
        lines = (directory / name).read_text().splitlines()
        lines = [line for line in lines if by is None or line.startswith(repr([str(by)])[:-1])]
        if lines:
            found[name] = "\n".join(lines)
    return found


_PROBE = ("import sys; before = sorted(sys.modules); import json, sqlite3; c = sqlite3.connect(':memory:'); "
          "c.execute('CREATE VIRTUAL TABLE t USING fts5(x)'); "
          "print(json.dumps({'version': list(sys.version_info[:2]), 'modules': before}))")


def _candidates() -> list[str]:
    found = [sys.executable]
    for pattern in ("/usr/bin/python3.1[0-9]", "/usr/local/bin/python3.1[0-9]"):
        found += sorted(glob.glob(pattern))
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found += sorted(glob.glob(os.path.join(pyenv, "versions", "3.1[0-9].*", "bin", "python3")))
    return list(dict.fromkeys(path for path in found if os.access(path, os.X_OK)))


@functools.lru_cache(maxsize=None)
def _interpreters() -> tuple[tuple[str, tuple[int, int]], ...]:
    """Every candidate that runs, has SQLite FTS5 and pre-imports none of the shadowed names."""
    clean = []
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/")}
    for path in _candidates():
        try:
            proc = subprocess.run([path, "-c", _PROBE], capture_output=True, text=True, env=env, cwd="/",
                                  timeout=30)
            facts = json.loads(proc.stdout)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            continue
        loaded = {name.split(".")[0] for name in facts["modules"]}
        if not loaded & set(SHADOWED) and tuple(facts["version"]) >= (3, 10):
            clean.append((path, tuple(facts["version"])))
    return tuple(clean)


def clean_python(*, minimum: tuple[int, int] = (3, 11), exactly: tuple[int, int] | None = None
                 ) -> tuple[Path | None, str]:
    """(an interpreter that shadowing can reach, reason when None)."""
    for path, version in _interpreters():
        if (exactly is not None and version == exactly) or (exactly is None and version >= minimum):
            return Path(path), ""
    wanted = f"{exactly[0]}.{exactly[1]}" if exactly else f"≥ {minimum[0]}.{minimum[1]}"
    return None, (f"no Python {wanted} without pre-imported modules on this machine (looked at this interpreter, "
                  f"/usr/bin, /usr/local/bin and pyenv's versions)")
