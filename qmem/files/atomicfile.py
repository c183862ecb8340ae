"""Crash-safe replacement of small files (config.json, breaker.json).

``write_atomic`` promises that a reader sees either the old content or the new
content, never a mixture or a truncated file: the bytes go to a private temporary
file in the same directory (created with the requested mode, so a secret-adjacent
file is never world-readable even for an instant), are flushed to disk, and then
replace the target with ``os.replace``.  If anything fails, the target is left as
it was and the temporary file is removed.

A symbolic link is written through, not replaced: the file it points to gets the new
content (its temporary file in *that* file's directory, so the rename stays on one file
system), and the link — a dotfiles checkout's, say — stays a link.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

__all__ = ["write_atomic", "ensure_private_dir"]


def ensure_private_dir(directory: Path) -> None:
    """Create ``directory`` (and parents) readable by the owner only, if missing."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)


def write_atomic(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` atomically; the file ends up with ``mode``.

    When ``path`` is a symbolic link, the file it points to is replaced and the link kept.
    Raises ``OSError`` (disk full, read-only file system, permission denied, a link loop)
    with the target untouched.
    """
    path = _link_target(Path(path))
    directory = path.parent
    ensure_private_dir(directory)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        # mkstemp creates the file 0600 already; chmod covers a caller asking for less.
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            fd = -1
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        if fd != -1:
            os.close(fd)
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        raise
    _fsync_directory(directory)


def _link_target(path: Path) -> Path:
    """``path``, or the file its chain of symbolic links ends at (which may not exist yet)."""
    if not path.is_symlink():
        return path
    target = Path(os.path.realpath(path))
    if target.is_symlink():  # realpath gives up on a loop and returns a link
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path.name)
    return target


def _fsync_directory(directory: Path) -> None:
    # The rename is durable only once the directory entry is on disk; some file
    # systems refuse to open a directory for this, which costs durability, not safety.
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
