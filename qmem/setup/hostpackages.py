"""qmem installed by pi's or Prime's own installer (``pi install``, ``prime-agent package install``).

Those installers write a *source* into ``<agent dir>/settings.json`` ``packages`` and load the
package from there at every start: a local path (kept relative to the agent directory, the
clone itself is used) or a git source (cloned to ``<agent dir>/git/<host>/<path>``).  The
package's ``package.json`` ``pi`` manifest names its extensions; qmem's root manifest names
``qmem/index.js``.  :func:`installed_packages` reads only — it lists each package whose
manifest leads to a qmem folder, for ``doctor``.  npm sources and sources it cannot place are
left out (qmem is not published on npm).  ``settings.json`` and each ``package.json`` are read
the safe way (:mod:`qmem.files.smallfile`, 1 MiB at most); one that is there but cannot be read is
handed back with the packages (:attr:`PackageScan.unread`), never taken for "no packages".
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

from ..files.smallfile import MIB, UnreadableFile, read_json_file
from ..valueclass import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = []

#: settings.json and package.json are a few kilobytes; a file over this is not one.
MAX_MANIFEST_BYTES = MIB

_REF = re.compile(r"[@#][^/@#]*$")


@dataclass(frozen=True)
class Package:
    """A settings ``packages`` entry that holds qmem."""

    source: str  # as written in settings.json
    root: Path  # the package directory the host reads
    extension: Path  # the qmem folder its manifest names
    version: str  # the qmem version found there (what ``qmem_version`` answered)


@dataclass
class PackageScan:
    """The packages that hold qmem, and the files that could not be read to tell."""

    packages: list[Package] = field(default_factory=list)
    unread: list[UnreadableFile] = field(default_factory=list)


def git_install_path(agent_dir: Path, source: str) -> Path | None:
    """Where the host clones a git ``source`` (``git:host/owner/repo[@ref]``, ``https://host/owner/repo``…)."""
    text = source.strip()
    prefixed = text.startswith("git:")
    text = text[4:].strip() if prefixed else text
    if "://" in text:
        try:
            parts = urlsplit(text)
            host, path = (parts.hostname or ""), parts.path
        except ValueError:  # "https://[…" and the like: no URL, so no clone either
            return None
    elif not prefixed:
        return None
    elif re.match(r"^[^/@]+@[^/:]+:", text):  # git@host:owner/repo
        host, path = text.split("@", 1)[1].split(":", 1)
    else:
        host, _, path = text.partition("/")
    path = _REF.sub("", path).strip("/")
    path = path[:-4] if path.endswith(".git") else path
    if not host or len(path.split("/")) < 2 or ".." in path.split("/"):
        return None
    return agent_dir / "git" / host / path


def _manifest_extensions(root: Path) -> list[Path]:
    """The extension folders ``root``'s ``package.json`` names (raises UnreadableFile)."""
    manifest = read_json_file(root / "package.json", MAX_MANIFEST_BYTES)
    pi = manifest.get("pi") if isinstance(manifest, dict) else None
    entries = pi.get("extensions") if isinstance(pi, dict) else None
    found = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, str) and entry and not any(ch in entry for ch in "*?[!\x00"):
            # realpath, not Path.resolve: a loop of links is left as written instead of raising
            path = Path(os.path.realpath(root / entry)) if not os.path.isabs(entry) else Path(entry)
            found.append(path.parent if path.suffix in (".js", ".ts") else path)
    return found


def _qmem_extension(root: Path, qmem_version: Callable[[Path], str | None],
                    scan: PackageScan) -> tuple[Path, str] | None:
    try:
        folders = _manifest_extensions(root)
    except UnreadableFile as exc:
        scan.unread.append(exc)
        return None
    for folder in folders:
        try:
            version = qmem_version(folder)
        except UnreadableFile as exc:
            scan.unread.append(exc)
            continue
        if version:
            return folder, version
    return None


def installed_packages(agent_dir: Path, env: Mapping[str, str],
                       qmem_version: Callable[[Path], str | None]) -> PackageScan:
    """The ``packages`` of ``agent_dir/settings.json`` that hold a folder ``qmem_version`` finds a
    version in (None: not qmem).

    ``qmem_version`` may raise :class:`UnreadableFile`; that file joins the scan's ``unread``.
    """
    scan = PackageScan()
    try:
        settings = read_json_file(agent_dir / "settings.json", MAX_MANIFEST_BYTES)
    except UnreadableFile as exc:
        scan.unread.append(exc)
        return scan
    entries = settings.get("packages") if isinstance(settings, dict) else None
    home = env.get("HOME") or str(Path.home())
    for entry in entries if isinstance(entries, list) else []:
        source = entry if isinstance(entry, str) else entry.get("source") if isinstance(entry, dict) else None
        if not isinstance(source, str) or not source.strip() or source.startswith("npm:"):
            continue
        if source.startswith(("git:", "http://", "https://", "ssh://", "git://")):
            root = git_install_path(agent_dir, source)
        else:
            local = source[2:] if source.startswith("~/") else source
            root = Path(home) / local if source.startswith("~/") else agent_dir / local
            root = Path(os.path.normpath(root))
        if root is None or not root.is_dir():
            continue
        found = _qmem_extension(root, qmem_version, scan)
        if found is not None:
            scan.packages.append(Package(source, root, *found))
    return scan
