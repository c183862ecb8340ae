"""A real, tiny file system to fill: a tmpfs mounted in a private mount namespace.

:func:`run_on_small_disk` runs a plan of steps inside ``unshare -m`` (as root) or
``unshare -rm`` (otherwise, where user namespaces allow it), with a tmpfs of the given size
mounted on a directory for that process tree only: nothing is mounted for anyone else, and
the mount goes away with the process, whatever happens to the test.  Each step either sets
how many bytes stay free (a filler file grows or shrinks: tmpfs counts whole pages, so the
figure is exact) or runs ``python3 -m qmem.local …`` as a real subprocess.  The answers come
back as JSON.  :func:`small_disk_unavailable` says why a test must skip, or None.

Run as a script, this module is the plan's driver inside the namespace.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FILLER = "filler"
_MOUNT = 'mount -t tmpfs -o size="$1"k tmpfs "$2" && shift 2 && exec "$@"'


def _unshare() -> list[str] | None:
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    return [unshare, "-m", "--propagation", "private"] if os.geteuid() == 0 else [unshare, "-r", "-m"]


@functools.lru_cache(maxsize=1)
def small_disk_unavailable() -> str | None:
    """Why no small file system can be made here (a skip reason), or None."""
    command = _unshare()
    if command is None:
        return "unshare(1) is not installed, so no private tmpfs can be mounted"
    with tempfile.TemporaryDirectory(prefix="qmem-smalldisk-") as directory:
        try:
            probe = subprocess.run([*command, "sh", "-c", _MOUNT, "sh", "64", directory, "true"],
                                   capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"cannot run unshare: {exc}"
    if probe.returncode != 0:
        return f"cannot mount a tmpfs in a private mount namespace here ({probe.stderr.strip()[:120]})"
    return None


def run_on_small_disk(directory: Path, size_kb: int, steps: list[dict[str, Any]],
                      env: dict[str, str]) -> list[dict[str, Any]]:
    """Run ``steps`` with a tmpfs of ``size_kb`` on ``directory``; one answer per step.

    Steps: ``{"leave_free": bytes}`` (answer: the bytes free after); ``{"qmem": [args…]}``
    or ``{"python": code}`` (run with the directory as its argument) — answer: ``code``,
    ``stdout``, ``stderr``, ``free`` after it and the files on the disk.
    """
    command = _unshare()
    assert command is not None, small_disk_unavailable()
    proc = subprocess.run(
        [*command, "sh", "-c", _MOUNT, "sh", str(size_kb), str(directory),
         sys.executable, str(Path(__file__).resolve()), str(directory)],
        input=json.dumps(steps), capture_output=True, text=True, timeout=600, env=env, cwd=str(REPO))
    if proc.returncode != 0:
        raise AssertionError(f"the small-disk driver failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def _free(directory: Path) -> int:
    stat = os.statvfs(directory)
    return stat.f_bavail * stat.f_frsize


def _leave_free(directory: Path, wanted: int) -> int:
    filler = directory / FILLER
    size = filler.stat().st_size if filler.exists() else 0
    target = max(size + _free(directory) - wanted, 0)
    with open(filler, "ab") as handle:
        if target < size:
            handle.truncate(target)
        else:
            handle.write(b"\0" * (target - size))  # written, not sparse: tmpfs counts the pages
    return _free(directory)


def _drive(directory: Path, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    answers: list[dict[str, Any]] = []
    for step in steps:
        if "leave_free" in step:
            answers.append({"free": _leave_free(directory, int(step["leave_free"]))})
            continue
        argv = ["-m", "qmem.local", *step["qmem"]] if "qmem" in step else ["-c", step["python"], str(directory)]
        proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=120,
                              cwd=os.environ.get("HOME"))
        answers.append({"code": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr,
                         "free": _free(directory), "files": sorted(os.listdir(directory))})
    return answers


if __name__ == "__main__":
    print(json.dumps(_drive(Path(sys.argv[1]), json.loads(sys.stdin.read()))))
