"""What ``install`` created for a host, remembered so that ``uninstall`` removes it and nothing else.

``install`` may have to create the host's extensions directory (and its parents: a fresh
machine has no ``~/.pi``) and, for Hermes, ``config.yaml``.  Once qmem is gone again those
would be left behind holding nothing, or holding only what qmem put there.  The record —
``installed.json`` in qmem's data directory (``$XDG_DATA_HOME/qmem``, not the config or
the host's own directories), written atomically — lists per host the directories install
created and the bytes of a file it created.  ``uninstall`` then removes:

* a recorded file only while it still holds exactly the bytes install wrote (anything the
  user or the host changed in it keeps it);
* a recorded directory only when it is empty, deepest first — and only one that is the
  host's current directory or one of its parents, so a record made with another
  ``PI_CODING_AGENT_DIR`` never reaches elsewhere.

No record is an empty one.  A record that is there but cannot be read (read the safe way,
:mod:`qmem.files.smallfile`: a regular file of at most 1 MiB, opened without blocking, any JSON
survived) raises :class:`~qmem.files.smallfile.UnreadableFile` from :func:`load`, :func:`remember`
and :func:`forget`: nothing is removed on its word, and it is never overwritten with a record
that would forget what it held.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..config import resolve_paths
from ..files.atomicfile import write_atomic
from ..files.smallfile import MIB, read_json_file
from ..valueclass import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = []

VERSION = 1
#: A record lists a few directories and a config.yaml install wrote; a file over this is not one.
MAX_RECORD_BYTES = MIB


@dataclass
class HostRecord:
    """What install created for one host."""

    directories: list[str] = field(default_factory=list)  # absolute paths, in the order they were made
    files: dict[str, str] = field(default_factory=dict)  # absolute path -> the text install wrote


def record_path(env: Mapping[str, str]) -> Path:
    return resolve_paths(None, env).data_dir / "installed.json"


def missing_directories(directory: Path) -> list[Path]:
    """``directory`` and each missing parent, outermost first: what ``mkdir(parents=True)`` will create."""
    missing = []
    for candidate in (directory, *directory.parents):
        if os.path.lexists(candidate):
            break
        missing.append(candidate)
    return list(reversed(missing))


def _read(env: Mapping[str, str]) -> dict[str, HostRecord]:
    """The record's entries, per host (raises UnreadableFile)."""
    document = read_json_file(record_path(env), MAX_RECORD_BYTES)
    hosts = document.get("hosts") if isinstance(document, dict) else None
    records = {}
    for host, entry in (hosts.items() if isinstance(hosts, dict) else ()):
        if not isinstance(entry, dict):
            continue
        listed, written = entry.get("directories"), entry.get("files")
        directories = [d for d in listed if isinstance(d, str) and os.path.isabs(d)] \
            if isinstance(listed, list) else []
        files = {p: t for p, t in written.items() if isinstance(p, str) and os.path.isabs(p) and isinstance(t, str)} \
            if isinstance(written, dict) else {}
        records[host] = HostRecord(directories, files)
    return records


def _write(env: Mapping[str, str], records: dict[str, HostRecord]) -> None:
    path = record_path(env)
    kept = {host: record for host, record in records.items() if record.directories or record.files}
    if not kept:
        if path.exists():
            path.unlink()
        return
    document = {"version": VERSION, "hosts": {host: {"directories": record.directories, "files": record.files}
                                              for host, record in kept.items()}}
    write_atomic(path, (json.dumps(document, indent=2) + "\n").encode("utf-8"))


def check_readable(env: Mapping[str, str]) -> None:
    """Raise UnreadableFile when the record is there but cannot be read (for ``doctor``)."""
    _read(env)


def load(env: Mapping[str, str], host: str) -> HostRecord:
    """What install created for ``host`` (raises UnreadableFile)."""
    return _read(env).get(host, HostRecord())


def remember(env: Mapping[str, str], host: str, *, directories: Sequence[Path] = (),
             files: Mapping[Path, str] | None = None) -> None:
    """Add what install just created for ``host`` to the record (raises OSError, UnreadableFile)."""
    files = files or {}
    if not directories and not files:
        return
    records = _read(env)
    record = records.setdefault(host, HostRecord())
    for directory in directories:
        if str(directory) not in record.directories:
            record.directories.append(str(directory))
    record.files.update({str(path): text for path, text in files.items()})
    _write(env, records)


def forget(env: Mapping[str, str], host: str, *, directories: Sequence[str] = (), files: Sequence[str] = ()) -> None:
    """Drop entries of ``host``'s record (they were removed, or are no longer install's to remove).

    Raises OSError, UnreadableFile.
    """
    records = _read(env)
    record = records.get(host)
    if record is None:
        return
    record.directories = [d for d in record.directories if d not in directories]
    record.files = {p: t for p, t in record.files.items() if p not in files}
    _write(env, records)
