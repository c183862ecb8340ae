"""qmem installed by pi's or Prime's own installer (``pi install``, ``prime-agent package install``).

Those installers write a *source* into ``<agent dir>/settings.json`` ``packages`` and load the
package from there at every start: a local path (kept relative to the agent directory, the
clone itself is used) or a git source (cloned to ``<agent dir>/git/<host>/<path>``).  The
package's ``package.json`` ``pi`` manifest names its extensions; qmem's root manifest names
``qmem/index.js``.  :func:`installed_packages` reads only — it lists each package whose
manifest leads to a qmem folder, for ``doctor``.  npm sources and sources it cannot place are
left out (qmem is not published on npm).  A package written as an object may carry pi's resource
filter (``{"source": …, "extensions": [patterns]}``): ``[]`` loads no extension of it, patterns
keep the extensions they match (``!`` excludes, ``+`` / ``-`` force an exact path in or out, as pi's
``applyPatterns`` does, matched like minimatch against the path relative to the package, the
file name and the absolute path).  :attr:`Package.filtered` says whether that filter leaves
qmem's ``index.js`` out (None: a pattern beyond ``*``, ``**``, ``?`` and ``[…]``, not decided
here).  ``settings.json`` and each ``package.json`` are read
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
    filter: list[str] | None = None  # the entry's "extensions" filter as written, None when it has none
    filtered: bool | None = False  # whether that filter leaves qmem's index.js out (None: not decided here)


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


def _glob(pattern: str) -> re.Pattern[str] | None:
    """minimatch's ``*`` (no ``/``), ``**`` (any depth), ``?`` and ``[…]``; None beyond them."""
    if any(ch in pattern for ch in "{}()"):  # braces and extglobs: not decided here
        return None
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[":
            end = pattern.find("]", i + 2)
            if end < 0:
                return None
            body = pattern[i + 1:end]
            out, i = out + "[" + ("^" + body[1:] if body.startswith("!") else body) + "]", end + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def _matches(path: Path, root: Path, patterns: list[str], *, exact: bool) -> bool | None:
    forms = [os.path.relpath(path, root).replace(os.sep, "/"), path.as_posix()]
    if not exact:
        forms.append(path.name)
    for pattern in patterns:
        pattern = pattern.replace("\\", "/")
        if exact:
            if (pattern[2:] if pattern.startswith("./") else pattern) in forms:
                return True
            continue
        compiled = _glob(pattern)
        if compiled is None:
            return None
        if any(compiled.fullmatch(form) for form in forms):
            return True
    return False


def filter_leaves_out(index_js: Path, root: Path, patterns: list[str]) -> bool | None:
    """Whether pi's package filter ``patterns`` disables ``index_js`` (pi's ``applyPatterns``)."""
    if not patterns:
        return True  # an empty list disables every extension of the package
    includes = [p for p in patterns if not p.startswith(("!", "+", "-"))]
    excludes = [p[1:] for p in patterns if p.startswith("!")]
    forced_in = [p[1:] for p in patterns if p.startswith("+")]
    forced_out = [p[1:] for p in patterns if p.startswith("-")]
    enabled: bool | None = True if not includes else _matches(index_js, root, includes, exact=False)
    if enabled and excludes:
        excluded = _matches(index_js, root, excludes, exact=False)
        enabled = None if excluded is None else not excluded
    if forced_in and _matches(index_js, root, forced_in, exact=True):
        enabled = True
    if forced_out and _matches(index_js, root, forced_out, exact=True):
        enabled = False
    return None if enabled is None else not enabled


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
            patterns = entry.get("extensions") if isinstance(entry, dict) else None
            listed = patterns if isinstance(patterns, list) and all(isinstance(p, str) for p in patterns) else None
            filtered = (filter_leaves_out(found[0] / "index.js", root, listed) if listed is not None
                        else None if patterns is not None else False)
            scan.packages.append(Package(source, root, *found, filter=listed, filtered=filtered))
    return scan
