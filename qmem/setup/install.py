"""Putting qmem into pi, Prime or Hermes and taking it out again, and what is installed where.

Promises:

* **Where.** pi loads extensions from ``$PI_CODING_AGENT_DIR/extensions`` (default
  ``~/.pi/agent/extensions``), Prime from ``$PRIME_AGENT_CODING_AGENT_DIR/extensions``
  (``~/.prime/agent/extensions``), Hermes plugins from ``$HERMES_HOME/plugins``
  (``~/.hermes/plugins``).  qmem goes there as ``qmem``.
* **install** creates that directory and links this package folder there (the default: the
  install follows this checkout) or copies it (``copy=True``; a copy carries a
  ``.qmem-install.json`` listing its files).  Running it again changes nothing; installing a
  copy again over an older copy updates it.  Whatever else is there — a folder with files
  qmem does not know, a link to something that is not qmem, a copy when a link was asked
  for — is never replaced: :class:`SetupError` says what is there and what to do.
* **uninstall** removes only what install makes: a link to a qmem folder (or a dangling
  link named ``qmem`` that pointed to one), or a folder holding nothing but qmem's files.
  A folder with any other file is refused, naming the file.  What install had to create
  around it — the extensions directory and its parents, Hermes' ``config.yaml`` — is
  recorded (:mod:`qmem.setup.installrecord`) and removed too once it holds nothing else.
  Memories are never touched: they live in the data directory.
* **Hermes** also needs the plugin enabled in ``$HERMES_HOME/config.yaml``:
  :mod:`qmem.setup.hermesconfig` edits the ``plugins.enabled`` list where it can do so with
  certainty; otherwise nothing is changed and the result carries the exact
  ``hermes plugins …`` command to run.
* :func:`inspect` reports what is installed for a host, for ``doctor``, including whether the
  host can load it (:attr:`Installation.unloadable`); it changes nothing.
* **Files it cannot read stop it.**  Every file read to decide (a folder's ``package.json``,
  ``__init__.py`` and install marker, Hermes' ``config.yaml``, ``installed.json``) is read the
  safe way (:mod:`qmem.files.smallfile`: a regular file, bounded, non-blocking).  One that is there
  but cannot be read makes :func:`inspect` say so (kind ``unreadable``,
  :attr:`Installation.hermes_config_error`), and install and uninstall refuse before they change
  anything, with one line naming the file and why (exit 1): what qmem cannot read it neither
  replaces nor removes.  Refusing, rather than doing the part that does not need the file, is
  deliberate: half an install (linked but not enabled, unlinked but still enabled, directories
  left unrecorded) would be a second thing to find and fix; with the one file named, the user
  fixes or removes it and runs the command again.  pi's and Prime's ``settings.json`` are the
  hosts' own and not read here (only ``doctor`` reads them).
"""

from __future__ import annotations

import filecmp
import json
import os
import re
import shlex
import shutil
from pathlib import Path

from .. import __version__
from ..errors import QmemError
from ..files.smallfile import CONTENT_REASONS, MIB, UnreadableFile, read_file_head, read_json_file, read_small_file
from ..hostdirs import agent_directory
from ..hosts.identity import HostEvidence, host_votes
from . import hermesconfig, installrecord
from ..valueclass import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["install", "uninstall"]

HOSTS = ("pi", "prime", "hermes")
COPY_MARKER = ".qmem-install.json"
_IGNORED_DIRS = {"__pycache__"}
_VERSION = re.compile(r"""__version__\s*=\s*["']([^"']{1,40})["']""")
#: package.json, the install marker and Hermes' config.yaml are kilobytes; a file over this is none of them.
MAX_SETUP_FILE_BYTES = MIB
#: How much of ``__init__.py`` is looked at for ``__version__`` (it is on the first lines).
_VERSION_HEAD_BYTES = 8192


class SetupError(QmemError):
    category = "setup"


def package_dir() -> Path:
    """This qmem package's folder (what install links or copies)."""
    return Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Location:
    host: str
    directory: Path  # the host's extensions (plugins) directory
    variable: str  # the environment variable that moves it

    @property
    def path(self) -> Path:
        return self.directory / "qmem"

    @property
    def hermes_config(self) -> Path | None:
        return self.directory.parent / "config.yaml" if self.host == "hermes" else None


def location(host: str, env: Mapping[str, str]) -> Location:
    """Where ``host`` loads extensions (plugins) from; SetupError when that cannot be told."""
    if host not in HOSTS:
        raise SetupError(f"unknown host {host!r} (pi, prime or hermes)", category="usage")
    directory = agent_directory(host, env)
    if directory.path is None:
        raise SetupError(f"{host}: {directory.problem}", category="usage")
    return Location(host, directory.path / ("plugins" if host == "hermes" else "extensions"), directory.variable)


# --- what is a qmem folder --------------------------------------------------------------------

def qmem_version(folder: Path) -> str | None:
    """The version of the qmem package in ``folder``, or None when it is not one.

    Raises :class:`UnreadableFile` when ``package.json`` or ``__init__.py`` is there but cannot be
    read.  A ``package.json`` that was read and is no JSON manifest (bad JSON, not UTF-8) does tell:
    qmem's own is valid, so that folder is not qmem.
    """
    if not folder.is_dir():
        return None
    try:
        manifest = read_json_file(folder / "package.json", MAX_SETUP_FILE_BYTES)
    except UnreadableFile as exc:
        if exc.reason in CONTENT_REASONS:
            return None
        raise
    if not isinstance(manifest, dict) or manifest.get("name") != "qmem":
        return None
    start = read_file_head(folder / "__init__.py", _VERSION_HEAD_BYTES)
    if start is None:
        return None
    head = start.decode("utf-8", errors="replace")
    match = _VERSION.search(head)
    return match.group(1) if match else (str(manifest.get("version")) if manifest.get("version") else "unknown")


def _files(folder: Path) -> list[str]:
    """Every entry under ``folder`` that is not a directory, relative, caches left out."""
    found = []
    for root, dirs, names in os.walk(folder):
        linked = [d for d in dirs if os.path.islink(os.path.join(root, d))]  # an entry, never followed
        dirs[:] = sorted(d for d in dirs if d not in _IGNORED_DIRS and d not in linked)
        found += [Path(root, name).relative_to(folder).as_posix() for name in names + linked
                  if not name.endswith(".pyc")]
    return sorted(found)


def _marker_files(folder: Path) -> set[str]:
    """The files a copy's install marker lists; none without a marker (raises UnreadableFile)."""
    marker = read_json_file(folder / COPY_MARKER, MAX_SETUP_FILE_BYTES)
    files = marker.get("files") if isinstance(marker, dict) else None
    return {name for name in files if isinstance(name, str)} if isinstance(files, list) else set()


def _unknown_files(folder: Path, verb: str, host: str) -> list[str]:
    """Files in a qmem copy that are neither this package's nor listed by its install marker; a
    marker that cannot be read stops ``verb`` (SetupError)."""
    try:
        marked = _marker_files(folder)
    except UnreadableFile as exc:
        raise _unreadable(verb, host, exc.message) from None
    known = set(_files(package_dir())) | marked | {COPY_MARKER}
    return [name for name in _files(folder) if name not in known]


def _same_content(copy: Path, source: Path) -> bool:
    """Every file of ``source`` is in ``copy`` with the same bytes (files only the copy has are not looked at)."""
    return all((copy / name).is_file() and filecmp.cmp(copy / name, source / name, shallow=False)
               for name in _files(source))


# --- what is installed ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Installation:
    """What is at a host's ``…/qmem``: ``absent``, ``link``, ``broken-link``, ``copy``, ``other``, or
    ``unreadable`` (a file that tells whether it is qmem cannot be read: :attr:`read_error` says which)."""

    host: str
    path: Path
    kind: str
    target: str | None = None  # a link's target, as written
    version: str | None = None
    this_qmem: bool = False  # a link to (or the folder of) the qmem that is running
    hermes_enabled: bool | None = None  # Hermes only; None: config.yaml not read with certainty
    unloadable: str | None = None  # why the host cannot load this link or copy (None: it can)
    read_error: str | None = None  # kind unreadable: the file and why, one line
    hermes_config_error: str | None = None  # Hermes only: config.yaml is there but cannot be read

    @property
    def refusal(self) -> str | None:
        """Why install and uninstall must not act here: a file they would decide by cannot be read."""
        return self.read_error or self.hermes_config_error

    def to_json(self) -> dict[str, Any]:
        out = {"host": self.host, "path": str(self.path), "kind": self.kind, "target": self.target,
               "version": self.version, "this_qmem": self.this_qmem, "unloadable": self.unloadable,
               "read_error": self.read_error}
        if self.host == "hermes":
            out["enabled"] = self.hermes_enabled
            out["config_error"] = self.hermes_config_error
        return out


#: What each host needs in the folder to load qmem (the shim, its tools, the bridge; Hermes' plugin).
#: A tuple of names is one need that any of them meets: the Hermes adapter is ``hermes/adapter.py``
#: since the lanes became folders, ``hermes.py`` in a copy made before.
_NEEDED = {"pi": ("index.js", "package.json", "tools.json", "__init__.py", "bridge.py"),
           "prime": ("index.js", "package.json", "tools.json", "__init__.py", "bridge.py"),
           "hermes": ("plugin.yaml", "__init__.py", ("hermes/adapter.py", "hermes.py"))}


def unloadable(host: str, folder: Path) -> str | None:
    """Why ``host`` could not load qmem from ``folder`` (a qmem folder), or None."""
    missing = [need if isinstance(need, str) else need[0] for need in _NEEDED[host]
               if not any(os.access(folder / name, os.R_OK) for name in ((need,) if isinstance(need, str) else need))]
    if missing:
        return f"{', '.join(missing)} missing or unreadable"
    if host in ("pi", "prime"):
        name = Path(os.path.realpath(folder)).name
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            return f"the folder is named {name!r}; the bridge needs a Python package name (qmem)"
        try:
            manifest = read_json_file(folder / "package.json", MAX_SETUP_FILE_BYTES)
        except UnreadableFile as exc:
            return f"package.json {exc.words}"
        if not isinstance(manifest, dict) or manifest.get("type") != "module":
            return 'package.json does not say "type": "module"'
    return None


def inspect(host: str, env: Mapping[str, str]) -> Installation:
    """What ``host`` has installed as ``qmem`` (reads only)."""
    where = location(host, env)
    path = where.path
    enabled = config_error = None
    if where.hermes_config is not None:
        try:
            enabled = hermesconfig.is_enabled(where.hermes_config)
        except UnreadableFile as exc:
            config_error = exc.message
    hermes = {"hermes_enabled": enabled, "hermes_config_error": config_error}
    target = os.readlink(path) if os.path.islink(path) else None
    if target is not None and not path.exists():
        return Installation(host, path, "broken-link", target=target, **hermes)
    if target is None and not path.exists():
        return Installation(host, path, "absent", **hermes)
    try:
        version = qmem_version(path)
    except UnreadableFile as exc:
        return Installation(host, path, "unreadable", target=target, read_error=exc.message, **hermes)
    if not version:
        return Installation(host, path, "other", target=target, **hermes)
    return Installation(host, path, "link" if target is not None else "copy", target=target, version=version,
                        this_qmem=Path(os.path.realpath(path)) == package_dir(),
                        unloadable=unloadable(host, path), **hermes)


def _describe_other(path: Path) -> str:
    if path.is_dir():
        names = sorted(os.listdir(path))[:3]
        return f"a folder holding {', '.join(names) if names else 'nothing'}{' …' if len(names) == 3 else ''}"
    return "a file"


# --- install / uninstall ------------------------------------------------------------------------

@dataclass
class SetupResult:
    host: str
    path: Path
    action: str  # installed | updated | unchanged | removed | not installed
    mode: str | None = None  # link | copy
    source: Path | None = None
    previous_version: str | None = None
    hermes: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "path": str(self.path), "action": self.action, "mode": self.mode,
                "source": str(self.source) if self.source else None, "version": __version__,
                "previous_version": self.previous_version, "hermes": self.hermes, "notes": list(self.notes)}

    def describe(self) -> str:
        name = {"pi": "pi", "prime": "Prime", "hermes": "Hermes"}[self.host]
        how = f" → {self.source} ({self.mode})" if self.mode == "link" else f" ({self.mode})" if self.mode else ""
        lines = {
            "installed": f"qmem {__version__} installed for {name}: {self.path}{how}",
            "updated": f"qmem updated for {name} from {self.previous_version} to {__version__}: {self.path}{how}",
            "unchanged": f"qmem is already installed for {name}: {self.path}{how}; nothing changed",
            "removed": f"qmem removed from {name}: {self.path} ({self.mode}); your memories stay in the data "
                       f"directory",
            "not installed": f"qmem is not installed for {name} ({self.path} does not exist); nothing to remove",
        }
        return "\n".join([lines[self.action], *self.notes])


def _hermes_command(verb: str, where: Location, env: Mapping[str, str]) -> str:
    prefix = f"HERMES_HOME={shlex.quote(str(where.directory.parent))} " if (env.get("HERMES_HOME") or "").strip() \
        else ""
    suffix = " --no-allow-tool-override" if verb == "enable" else ""
    return f"{prefix}hermes plugins {verb} qmem{suffix}"


def hermes_plugin_command(verb: str, env: Mapping[str, str]) -> str:
    """The ``hermes plugins enable|disable qmem`` command for this environment's Hermes."""
    return _hermes_command(verb, location("hermes", env), env)


def _hermes_enable(where: Location, env: Mapping[str, str], enable: bool) -> tuple[dict[str, Any], str | None]:
    assert where.hermes_config is not None
    edit = hermesconfig.enable(where.hermes_config) if enable else hermesconfig.disable(where.hermes_config)
    verb = "enable" if enable else "disable"
    report: dict[str, Any] = {"config": str(where.hermes_config), "change": edit.state,
                              "enabled": enable if edit.state != "manual" else None}
    if edit.state == "manual":
        command = _hermes_command(verb, where, env)
        report.update(command=command, reason=edit.reason)
        return report, (f"{where.hermes_config} was not edited ({edit.reason}); to {verb} the plugin run:\n"
                        f"  {command}")
    said = {"created": f"created {where.hermes_config} with qmem in plugins.enabled",
            "added": f"qmem added to plugins.enabled in {where.hermes_config}",
            "removed": f"qmem removed from plugins.enabled in {where.hermes_config}",
            "unchanged": f"qmem is {'already' if enable else 'not'} in plugins.enabled of {where.hermes_config}"}
    return report, said[edit.state]


def _copy_into(destination: Path, source: Path) -> None:
    """Copy ``source`` to ``destination`` (which must not exist) through a sibling temporary folder."""
    staging = destination.with_name(f".qmem-install-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        shutil.copytree(source, staging, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), symlinks=True)
        marker = {"qmem": __version__, "source": str(source), "files": _files(staging)}
        (staging / COPY_MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        os.rename(staging, destination)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _replace_copy(destination: Path, source: Path) -> None:
    retired = destination.with_name(f".qmem-old-{os.getpid()}")
    shutil.rmtree(retired, ignore_errors=True)
    staging = destination.with_name(f".qmem-new-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    _copy_into(staging, source)
    os.rename(destination, retired)
    try:
        os.rename(staging, destination)
    except BaseException:
        os.rename(retired, destination)  # put the old copy back
        raise
    shutil.rmtree(retired, ignore_errors=True)


def _os_error(action: str, exc: OSError) -> SetupError:
    return SetupError(f"cannot {action}: {exc.strerror or exc.__class__.__name__}"
                      f"{f' ({exc.filename})' if exc.filename else ''}")


def _unreadable(verb: str, host: str, why: str) -> SetupError:
    name = {"pi": "pi", "prime": "Prime", "hermes": "Hermes"}[host]
    return SetupError(f"cannot {verb} qmem for {name}: {why}; nothing was changed")


def _readable_first(verb: str, found: Installation, env: Mapping[str, str]) -> installrecord.HostRecord:
    """What install created for the host, once every file ``verb`` decides by has been read (raises SetupError)."""
    if found.refusal:
        raise _unreadable(verb, found.host, found.refusal)
    try:
        return installrecord.load(env, found.host)
    except UnreadableFile as exc:
        raise _unreadable(verb, found.host, f"the install record {exc.message}") from None


def install(host: str, env: Mapping[str, str], *, copy: bool = False) -> SetupResult:
    """Install qmem for ``host``; see the module docstring.  Raises SetupError."""
    where = location(host, env)
    source = package_dir()
    mode = "copy" if copy else "link"
    found = inspect(host, env)
    _readable_first("install", found, env)
    path = where.path
    result = SetupResult(host, path, "installed", mode=mode, source=source)
    uninstall_hint = f"`python3 -m qmem.local uninstall {host}`"
    created: list[Path] = []
    try:
        if found.kind == "absent":
            created = installrecord.missing_directories(where.directory)
            where.directory.mkdir(parents=True, exist_ok=True)
            if copy:
                _copy_into(path, source)
            else:
                os.symlink(source, path, target_is_directory=True)
        elif found.kind == "link":
            if not found.this_qmem:
                raise SetupError(f"{path} is a link to another qmem ({found.target}, version {found.version}); "
                                 f"run {uninstall_hint} first to install this one")
            if copy:
                raise SetupError(f"{path} is a link to this qmem; run {uninstall_hint} first to replace it with "
                                 f"a copy")
            result.action = "unchanged"
        elif found.kind == "copy":
            if found.this_qmem:  # running from the installed folder itself
                result.action, result.mode = "unchanged", "copy"
            elif not copy:
                raise SetupError(f"{path} holds a copy of qmem {found.version}; run `python3 -m qmem.local install "
                                 f"{host} --copy` to update it, or {uninstall_hint} first to link instead")
            elif _same_content(path, source):
                result.action = "unchanged"
            else:
                unknown = _unknown_files(path, "update", host)
                if unknown:
                    raise SetupError(f"{path} holds a copy of qmem with files qmem does not know "
                                     f"({', '.join(unknown[:3])}); move them away first")
                _replace_copy(path, source)
                result.action, result.previous_version = "updated", found.version
        elif found.kind == "broken-link":
            raise SetupError(f"{path} is a link to {found.target}, which does not exist; remove the link "
                             f"(or run {uninstall_hint}) and install again")
        else:
            raise SetupError(f"{path} already exists and is not qmem ({_describe_other(path)}); "
                             f"move it away first")
    except OSError as exc:
        raise _os_error(f"install qmem in {where.directory}", exc) from None
    created_files: dict[Path, str] = {}
    if host == "hermes":
        result.hermes, note = _hermes_enable(where, env, True)
        if note:
            result.notes.append(note)
        if result.hermes["change"] == "created" and where.hermes_config is not None:
            written = _text_of(where.hermes_config)
            if written is not None:
                created_files[where.hermes_config] = written
    try:
        installrecord.remember(env, host, directories=created, files=created_files)
    except (OSError, UnreadableFile) as exc:  # qmem is installed; only the tidy-up at uninstall is lost
        why = exc.message if isinstance(exc, UnreadableFile) else exc.strerror or exc.__class__.__name__
        result.notes.append(f"could not record what install created ({why}); "
                            f"uninstall will leave {', '.join(str(p) for p in [*created, *created_files])}")
    if result.mode == "link":
        note = other_hosts_clone(host, source, env)
        if note:
            result.notes.append(note)
    if result.action == "unchanged":
        return result
    result.notes.append({"pi": "next: start pi and run /qmem:local status (or: python3 -m qmem.local doctor)",
                         "prime": "next: start prime-agent and run /qmem:local status (or: python3 -m qmem.local "
                                  "doctor)",
                         "hermes": "next: start hermes and run /qmem:local status (or: python3 -m qmem.local "
                                   "doctor)"}[host])
    return result


def other_hosts_clone(host: str, source: Path, env: Mapping[str, str]) -> str | None:
    """A warning when ``host`` is linked to a clone that lives in the other host's agent directory.

    The link works (identity weighs the host's own facts above the resolved path, see
    :mod:`qmem.hosts.identity`), but that clone is the other host's to manage: its ``update``
    or ``remove`` changes or deletes what this host loads.  A copy does not depend on it.
    """
    if host not in ("pi", "prime"):
        return None
    other = "prime" if host == "pi" else "pi"
    if other not in host_votes(HostEvidence(paths=(str(source),)), env):
        return None
    names = {"pi": ("pi", "pi update` or `pi remove"), "prime": ("Prime", "prime-agent package update` or "
                                                                        "`prime-agent package remove")}
    owner, verbs = names[other]
    return (f"warning: this clone ({source}) lies in {owner}'s directory, which {owner}'s own installer manages: "
            f"`{verbs}` changes or deletes what {names[host][0]} now loads through the link. To keep "
            f"{names[host][0]} apart from it: `python3 -m qmem.local uninstall {host} && python3 -m qmem.local "
            f"install {host} --copy`")


def uninstall(host: str, env: Mapping[str, str]) -> SetupResult:
    """Remove what install put in place for ``host``; see the module docstring.  Raises SetupError."""
    where = location(host, env)
    found = inspect(host, env)
    record = _readable_first("uninstall", found, env)
    path = where.path
    result = SetupResult(host, path, "removed", mode=found.kind if found.kind in ("link", "copy") else None)
    try:
        if found.kind == "absent":
            result.action = "not installed"
        elif found.kind == "link":
            os.unlink(path)
        elif found.kind == "broken-link":
            if Path(found.target or "").name != "qmem":
                raise SetupError(f"{path} is a link to {found.target}, which does not exist and is not a qmem "
                                 f"folder; remove it yourself if you made it")
            os.unlink(path)
            result.mode = "link"
        elif found.kind == "copy":
            unknown = _unknown_files(path, "uninstall", host)
            if unknown:
                raise SetupError(f"{path} holds files qmem does not know ({', '.join(unknown[:3])}); "
                                 f"nothing was removed")
            shutil.rmtree(path)
        else:
            raise SetupError(f"{path} is not qmem ({_describe_other(path)}); nothing was removed")
    except OSError as exc:
        raise _os_error(f"remove {path}", exc) from None
    if host == "hermes":
        removed = _remove_created_config(where, record)
        if removed is not None:
            result.hermes = {"config": str(where.hermes_config), "change": "deleted", "enabled": False}
            result.notes.append(removed)
        else:
            result.hermes, note = _hermes_enable(where, env, False)
            if note and result.hermes.get("change") != "unchanged":
                result.notes.append(note)
    result.notes += _remove_created_directories(where, record, env)
    return result


def _text_of(path: Path) -> str | None:
    """The UTF-8 text of the small regular file at ``path``; None when it is missing or cannot be read."""
    try:
        data = read_small_file(path, MAX_SETUP_FILE_BYTES)
        return None if data is None else data.decode("utf-8")
    except (UnreadableFile, UnicodeDecodeError):
        return None


def _remove_created_config(where: Location, record: installrecord.HostRecord) -> str | None:
    """Delete Hermes' config.yaml if install created it and it still holds exactly what install wrote."""
    config = where.hermes_config
    written = record.files.get(str(config)) if config is not None else None
    if config is None or written is None or _text_of(config) != written:
        return None  # gone, unreadable, or changed since: it holds something else now, keep it
    try:
        config.unlink()
    except OSError:
        return None
    return f"removed {config} (install created it and it held nothing else)"


def _remove_created_directories(where: Location, record: installrecord.HostRecord,
                                env: Mapping[str, str]) -> list[str]:
    """Remove the directories install created for this location, deepest first, each only if empty."""
    ours = {str(where.directory), *(str(parent) for parent in where.directory.parents)}
    settled = sorted((d for d in record.directories if d in ours), key=len, reverse=True)
    removed = []
    for directory in settled:
        try:
            os.rmdir(directory)
        except FileNotFoundError:
            pass
        except OSError:
            break  # not empty (or not ours to remove): its parents are not empty either
        else:
            removed.append(directory)
    # Forgotten either way: qmem is gone, and what holds something else now is no longer install's alone.
    config = str(where.hermes_config) if where.hermes_config is not None else None
    try:
        installrecord.forget(env, where.host, directories=settled,
                             files=[config] if config and config in record.files else [])
    except (OSError, UnreadableFile):
        pass  # the record stays; a later uninstall finds the directories gone or in use
    return [f"removed {', '.join(removed)} (install created {'them' if len(removed) > 1 else 'it'}; "
            f"{'they were' if len(removed) > 1 else 'it was'} empty)"] if removed else []
