"""``doctor``'s view of the hosts: where qmem is installed, whether the host can load it, as whom it runs.

For each host (pi, Prime, Hermes) :func:`check_hosts` reports what :func:`qmem.install.inspect`
finds at ``…/qmem`` and, for pi and Prime, the packages their own installers added
(:mod:`qmem.setup.hostpackages`), each with the host identity qmem would decide for it
(:func:`qmem.hosts.identity.identify_host`, asked the way the shim will ask it).  Problems — the
CLI exits 1 — are what stops qmem from working as installed:

* a link whose target is gone, or a folder the host cannot load (files missing or
  unreadable, a folder name the bridge cannot import, a ``package.json`` that is not an ES
  module);
* Hermes with qmem installed but not in ``plugins.enabled``, or a ``config.yaml`` in a shape
  qmem cannot read with certainty (flow style, anchors…): whether Hermes loads qmem is then
  unknown, and ``hermes plugins enable qmem`` settles it;
* a package of pi's or Prime's installer whose resource filter (``"extensions": []``…) leaves
  qmem's ``index.js`` out: the host loads no qmem from it;
* pi or Prime where the bridge cannot start: ``QMEM_PYTHON`` not an executable, no ``python3``
  on ``PATH``, or an interpreter that, run the way the shim runs it (``-c``, in the installed
  folder's parent, ``PYTHONPATH`` that parent, the shim's environment), does not import that
  qmem — a Python older than 3.10 says so in one line — while the host would still offer the
  tools, with no rules or recall behind them;
* recall configured but a host without a lane, as that host resolves it: pi or Prime not
  identified (:func:`qmem.hosts.identity.identify_host`, with ``QMEM_HOST`` / ``recall.host``
  settling a true conflict, as the bridge does), or Hermes with neither ``QMEM_HOST`` (its
  environment, overridden by ``$HERMES_HOME/.env``, which Hermes loads) nor ``recall.host``:
  automatic recall and ``memory_search`` would silently be off;
* something at ``…/qmem`` whose ``package.json`` or ``__init__.py`` cannot be read, so that
  neither doctor nor the host can tell what it is.

Every problem line names the cause, with absolute paths, and the command that fixes it.
Warnings are what works but is worth knowing: another qmem version, something else at
``…/qmem``, a host file doctor could not read (pi's or Prime's ``settings.json``, a package's
``package.json``, Hermes' ``config.yaml``: what it would have told is not checked; qmem's own
install record, ``installed.json``: install and uninstall refuse until it is fixed).  Each file
is read the safe way (:mod:`qmem.files.smallfile`), so none hangs or crashes doctor; each one it
cannot read is one line naming its path.  It reads only.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from .. import __version__
from ..config import config_path, recall_host
from ..files.smallfile import UnreadableFile, read_small_file
from ..hostdirs import agent_directory
from ..hosts.identity import identify_host, installed_evidence
from . import hermesconfig, install, installrecord
from ..valueclass import dataclass, field
from .hostpackages import Package, installed_packages

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = []

_NAMES = {"pi": "pi", "prime": "Prime", "hermes": "Hermes"}
_INSTALLERS = {"pi": "pi install", "prime": "prime-agent package install"}
_REMOVERS = {"pi": "pi remove", "prime": "prime-agent package remove"}
_LAUNCHERS = {"pi": "pi", "prime": "prime-agent", "hermes": "hermes"}

#: What the shim passes to the bridge (``BRIDGE_ENV`` in ``index.js``; a test keeps the two equal):
#: the probe runs the interpreter with the same.
BRIDGE_ENV_NAMES = (
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_[A-Z_]+", "TZ", "TMPDIR", "TEMP", "TMP",
    "XDG_[A-Z0-9_]+", "QMEM_[A-Z0-9_]+", "PI_QDRANT_MEMORY_[A-Z0-9_]+", "PI_CODING_AGENT_DIR",
    "PI_CODING_AGENT_SESSION_DIR", "PRIME_AGENT_CODING_AGENT_DIR", "PRIME_AGENT_SESSION_DIR",
    "PRIME_AGENT_CODING_AGENT_SESSION_DIR", "HERMES_HOME", "HTTPS?_PROXY", "ALL_PROXY", "NO_PROXY", "https?_proxy",
    "all_proxy", "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR", "PYENV_VERSION", "PYENV_ROOT",
    "PYTHONDONTWRITEBYTECODE", "PYTHONHOME", "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH")
_BRIDGE_ENV = re.compile("^(" + "|".join(BRIDGE_ENV_NAMES) + ")$")
#: A bridge start is a second or two; an interpreter that takes this long would fail the hooks too.
PROBE_TIMEOUT_S = 20.0
_TOO_OLD = re.compile(r"^qmem needs Python [^\n]*", re.M)


@dataclass
class HostCheck:
    document: dict[str, Any]
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _bridge_python(env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(the absolute path of the interpreter the shim starts, why it cannot be started)."""
    chosen = (env.get("QMEM_PYTHON") or "").strip()
    if chosen:
        found = shutil.which(chosen, path=env.get("PATH")) if os.sep not in chosen else \
            (chosen if os.access(chosen, os.X_OK) and os.path.isfile(chosen) else None)
        if found is None:
            return None, f"QMEM_PYTHON={chosen} is not an executable: the bridge cannot start"
        return os.path.abspath(found), None
    found = shutil.which("python3", path=env.get("PATH"))
    if found is None:
        return None, "no python3 on PATH: the bridge cannot start (set QMEM_PYTHON)"
    return os.path.abspath(found), None


def probe_bridge_python(python: str, extension: Path, env: Mapping[str, str]) -> str | None:
    """Why ``python``, started the way the shim starts the bridge from ``extension``, does not
    import that qmem; None when it does.  Runs ``-c`` in the folder's parent with the shim's
    environment; imports ``<folder>.bridge`` without running it; writes no bytecode."""
    folder = Path(os.path.realpath(extension))
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", folder.name):
        return None  # the folder name is reported as unloadable on its own
    child = {name: value for name, value in env.items() if _BRIDGE_ENV.match(name)}
    child.update(PYTHONPATH=str(folder.parent), PYTHONSAFEPATH="1", PYTHONDONTWRITEBYTECODE="1")
    code = (f"import sys; sys.path[:] = [p for p in sys.path if p]; import {folder.name}.bridge; "
            f"import {folder.name} as q; print('qmem ' + q.__version__)")
    try:
        proc = subprocess.run([python, "-c", code], cwd=folder.parent, env=child, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, errors="replace", timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"{python} did not import qmem within {PROBE_TIMEOUT_S:.0f} s"
    except OSError as exc:
        return f"{python} cannot be started ({exc.strerror or exc.__class__.__name__})"
    said = proc.stdout.strip().splitlines()
    if proc.returncode == 0 and said and said[-1].startswith("qmem "):
        return None
    too_old = _TOO_OLD.search(proc.stderr)
    if too_old:
        return f"{python} says \"{too_old.group(0)}\""
    last = next((line.strip() for line in reversed(proc.stderr.splitlines()) if line.strip()), "no output")
    return f"{python} cannot import qmem from {folder.parent} (exit {proc.returncode}: {last[:200]})"


def hermes_lane(env: Mapping[str, str]) -> str | None:
    """The recall lane Hermes resolves: ``QMEM_HOST`` as Hermes sees it — its environment, overridden
    by ``$HERMES_HOME/.env``, which Hermes loads at start — else the config's ``recall.host``."""
    directory = agent_directory("hermes", env).path
    named = None
    if directory is not None:
        try:
            data = read_small_file(directory / ".env", 1 << 20)  # None: no such file
        except UnreadableFile:
            data = None
        text = data.decode("utf-8", "replace") if data else ""
        for line in text.splitlines():
            match = re.fullmatch(r"\s*(?:export\s+)?QMEM_HOST\s*=\s*(.*?)\s*", line)
            if match:
                value = match.group(1)
                named = value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"" else value
    return recall_host(env if named is None else {**env, "QMEM_HOST": named})


def _package_report(host: str, package: Package, env: Mapping[str, str]) -> dict[str, Any]:
    evidence = installed_evidence(host, package.extension / "index.js", package.root)  # baseDir: the package
    return {"source": package.source, "path": str(package.root), "extension": str(package.extension),
            "version": package.version, "filter": package.filter, "filtered": package.filtered,
            "unloadable": install.unloadable(host, package.extension),
            "identified_as": identify_host(evidence, env, recall_host(env))}


def _package_problems(host: str, agent: Path, packages: list[dict[str, Any]], check: HostCheck) -> None:
    name = _NAMES[host]
    for package in packages:
        if package["unloadable"]:
            check.problems.append(f"{host}: {name} cannot load the package {package['path']}: "
                                  f"{package['unloadable']}")
        if package["filtered"] is not False:
            source = package["source"] if package["source"].startswith(("git:", "http", "ssh:")) else package["path"]
            fix = f"`{_REMOVERS[host]} {shlex.quote(source)} && {_INSTALLERS[host]} {shlex.quote(source)}`"
            shown = json.dumps(package["filter"]) if package["filter"] is not None else "(not a list of patterns)"
            if package["filtered"]:
                check.problems.append(
                    f"{host}: {agent / 'settings.json'} lists the package {package['path']} with the filter "
                    f"\"extensions\": {shown}, which leaves out {Path(package['extension']) / 'index.js'}: "
                    f"{name} loads no qmem from it; {fix} lists it whole")
            else:
                check.warnings.append(
                    f"{host}: the filter \"extensions\": {shown} of the package {package['path']} in "
                    f"{agent / 'settings.json'} is not read here: whether {name} loads qmem from it is not checked")


def _python_problems(host: str, folders: list[Path], env: Mapping[str, str], check: HostCheck) -> None:
    """The bridge's interpreter, run the way the shim runs it for each folder the host loads."""
    name = _NAMES[host]
    python, missing = _bridge_python(env)
    better = sys.executable if sys.version_info >= (3, 10) else "/path/to/python3.10-or-later"
    fix = f"`export QMEM_PYTHON={shlex.quote(better)}` (a Python ≥ 3.10) where {name} starts"
    if missing:
        check.problems.append(f"{host}: {missing}: {name} would offer qmem's tools with nothing behind them; {fix}")
        return
    assert python is not None
    for folder in dict.fromkeys(Path(os.path.realpath(f)) for f in folders):
        why = probe_bridge_python(python, folder, env)
        if why:
            chosen = "QMEM_PYTHON" if (env.get("QMEM_PYTHON") or "").strip() else "python3 on PATH"
            check.problems.append(f"{host}: the bridge cannot start ({chosen}: {why}): {name} would offer qmem's "
                                  f"tools with no rules, recall or answers behind them; {fix}")


def _lane_problem(host: str, where: str, config_file: Path, check: HostCheck) -> None:
    name = _NAMES[host]
    if host == "hermes":
        check.problems.append(
            f"hermes: recall is configured but Hermes has no recall lane (neither QMEM_HOST, in its environment "
            f"or {where}, nor recall.host in {config_file} names pi or prime): no automatic recall or "
            f"memory_search in Hermes; `echo QMEM_HOST=pi >> {shlex.quote(where)}` (or prime: whose curated "
            f"memories Hermes recalls) fixes it")
        return
    check.problems.append(
        f"{host}: qmem from {where} would run with recall configured but could not tell which host loads it "
        f"(the paths point at both pi's and Prime's agent directories): automatic recall and memory_search would "
        f"be off; `export QMEM_HOST={host}` where {name} starts (or \"host\": \"{host}\" under recall in "
        f"{config_file}) settles it")


def _check_host(host: str, env: Mapping[str, str], recall_active: bool, check: HostCheck) -> dict[str, Any]:
    found = install.inspect(host, env)
    report = found.to_json()
    installed = found.kind in ("link", "copy")
    name = _NAMES[host]
    if found.kind == "broken-link":
        check.problems.append(f"{host}: {found.path} is a link to {found.target}, which does not exist: "
                              f"`python3 -m qmem.local uninstall {host} && python3 -m qmem.local install {host}`")
    elif found.kind == "unreadable":
        check.problems.append(f"{host}: cannot tell what is at {found.path}: {found.read_error}")
    elif found.kind == "other":
        check.warnings.append(f"{host}: {found.path} is not qmem")
    elif installed and found.version != __version__:
        check.warnings.append(f"{host} has qmem {found.version}, this is {__version__}"
                              + (f": `python3 -m qmem.local install {host} --copy` updates it"
                                 if found.kind == "copy" else ""))
    if installed and found.unloadable:
        check.problems.append(f"{host}: {name} cannot load {found.path}: {found.unloadable}")
    if found.kind == "link" and found.target:
        clone = install.other_hosts_clone(host, Path(os.path.realpath(found.path)), env)
        if clone:
            check.warnings.append(f"{host}: " + clone.removeprefix("warning: "))
    if host == "hermes":
        _hermes_problems(found, env, recall_active, check)
        return report
    agent = install.location(host, env).directory.parent
    if installed:
        report["identified_as"] = identify_host(installed_evidence(host, found.path / "index.js", agent), env,
                                                recall_host(env))
    scan = installed_packages(agent, env, install.qmem_version)
    report["packages"] = [_package_report(host, package, env) for package in scan.packages]
    for unread in scan.unread:
        what = (f"the packages `{_INSTALLERS[host]}` added are not checked" if unread.path == agent / "settings.json"
                else f"whether a package `{_INSTALLERS[host]}` added holds qmem is not checked")
        check.warnings.append(f"{host}: {unread.message}: {what}")
    _package_problems(host, agent, report["packages"], check)
    loaded = [p for p in report["packages"] if p["filtered"] is not True]
    if not installed and not loaded:
        return report
    folders = ([found.path] if installed and not found.unloadable else []) + \
        [Path(p["extension"]) for p in loaded if not p["unloadable"]]
    _python_problems(host, folders, env, check)
    if recall_active:
        runs = [(str(found.path), report.get("identified_as"))] if installed else []
        runs += [(f"the package {p['path']}", p["identified_as"]) for p in loaded]
        for where, identity in runs:
            # The host's own process name always votes for it, so an answer is that host or None.
            if identity is None:
                _lane_problem(host, where, config_path(env), check)
    return report


def _hermes_problems(found: Any, env: Mapping[str, str], recall_active: bool, check: HostCheck) -> None:
    installed = found.kind in ("link", "copy")
    if found.hermes_config_error and not installed:
        check.warnings.append(f"hermes: {found.hermes_config_error}: whether Hermes enables qmem is not "
                              f"checked")
    if not installed:
        return
    config_yaml = install.location("hermes", env).directory.parent / "config.yaml"
    enable = install.hermes_plugin_command("enable", env)
    if found.hermes_enabled is False:
        check.problems.append("hermes: qmem is installed but not in plugins.enabled, so Hermes does not load it: "
                              "`python3 -m qmem.local install hermes` enables it")
    elif found.hermes_config_error:  # Hermes cannot read it either: its plugins section is not in effect
        check.problems.append(f"hermes: {found.hermes_config_error}: whether Hermes loads qmem is not known; "
                              f"move it away, then `{enable}`")
    elif found.hermes_enabled is None:
        reason = hermesconfig.unread_reason(config_yaml) or "a shape qmem does not read"
        check.problems.append(f"hermes: qmem does not read {config_yaml} with certainty ({reason}; flow style, "
                              f"anchors and tags are not read), so whether Hermes loads qmem is not known: "
                              f"`{enable}` makes sure it does")
    if recall_active and found.hermes_enabled is not False and hermes_lane(env) is None:
        directory = agent_directory("hermes", env).path
        _lane_problem("hermes", str((directory or Path("~/.hermes")) / ".env"), config_path(env), check)


def check_hosts(env: Mapping[str, str], *, recall_active: bool) -> HostCheck:
    """Every host's installs, problems and warnings (reads only)."""
    check = HostCheck({})
    for host in install.HOSTS:
        check.document[host] = _check_host(host, env, recall_active, check)
    try:
        installrecord.check_readable(env)
    except UnreadableFile as exc:
        check.warnings.append(f"install record: {exc.message}: install and uninstall refuse until it is fixed or "
                              f"removed")
    return check


def host_words(host: Mapping[str, Any]) -> str:
    """One host's part of doctor's ``hosts`` line."""
    kind = host["kind"]
    if kind == "absent":
        words = "no link or copy" if host.get("packages") else "not installed"
    elif kind == "broken-link":
        words = f"✗ broken link → {host['target']}"
    elif kind == "other":
        words = f"something else is at {host['path']}"
    elif kind == "unreadable":
        words = f"✗ cannot tell what is at {host['path']} (a file there cannot be read)"
    else:
        where = f"link → {host['target']}" if kind == "link" else f"copy at {host['path']}"
        words = f"{where} (qmem {host['version']}{', this one' if host['this_qmem'] else ''})"
        if host.get("unloadable"):
            words += f" ✗ cannot be loaded: {host['unloadable']}"
        if "enabled" in host:
            words += {True: ", enabled", False: ", ✗ NOT enabled",
                      None: ", enabled? (config.yaml not read)"}[host["enabled"]]
        if "identified_as" in host:
            words += f", runs as {host['identified_as'] or '✗ unknown host'}"
    for package in host.get("packages") or []:
        runs = ("✗ left out by its filter" if package.get("filtered") else
                f"runs as {package['identified_as'] or '✗ unknown host'}")
        words += (f"; the package {package['path']} (by `{_INSTALLERS[host['host']]}`, qmem {package['version']}"
                  f"{', ✗ cannot be loaded: ' + package['unloadable'] if package['unloadable'] else ''}), {runs}")
    return words
