"""A clean interpreter: this Python in a ``venv --without-pip``, made once under ``.cache/``.

Some machines' base interpreter imports dozens of modules at every start from a ``.pth`` file
in its site-packages (this one: about 80, for a sandbox's certificate set-up), which a user's
Python does not.  Timing qmem's processes on such an interpreter hides qmem's own import cost
and adds tens of milliseconds to each of the suite's child processes.  A venv made from the same
Python has the same standard library and none of the base site-packages, so it starts as a
user's interpreter does.  Used by the test runner's workers (so the processes tests start run on
it too) and by the benchmarks under ``scripts/``.

:func:`clean_interpreter` returns its path, making it when needed, or ``None`` when it cannot be
made (no ``venv`` module, a read-only checkout): callers then use ``sys.executable``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["clean_interpreter", "describe"]

REPO = Path(__file__).resolve().parents[1]


def _venv_dir() -> Path:
    return REPO / ".cache" / f"python{sys.version_info[0]}.{sys.version_info[1]}-clean"


def clean_interpreter() -> str | None:
    """The clean interpreter's path, or ``None``; see the module docstring."""
    if sys.prefix != sys.base_prefix and not _has_site_pth():
        return sys.executable  # already a venv without site-packages of its own
    venv = _venv_dir()
    python = venv / "bin" / "python3"
    marker = venv / ".made"
    if marker.is_file() and python.exists():
        return str(python)
    base = getattr(sys, "_base_executable", None) or sys.executable
    try:
        subprocess.run([base, "-m", "venv", "--without-pip", "--clear", str(venv)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
        done = subprocess.run([str(python), "-c", "import sqlite3, json, venv"], timeout=60,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if done.returncode != 0:
            return None
        marker.write_text("made by tests/cleanpython.py\n", encoding="utf-8")
    except (OSError, subprocess.SubprocessError):
        return None
    return str(python)


def _has_site_pth() -> bool:
    return any(name.endswith(".pth") for path in sys.path if path.endswith("site-packages")
               for name in _listdir(path))


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def describe(python: str) -> str:
    """One line: which interpreter, and how many modules it holds after starting."""
    done = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0], len(sys.modules))"],
                          capture_output=True, text=True, timeout=60)
    version, _, count = done.stdout.strip().partition(" ")
    return f"interpreter: {python} (Python {version}, {count} modules at start)"
