"""``doctor``'s view of the hosts: where qmem is installed, whether the host can load it, as whom it runs.

For each host (pi, Prime, Hermes) :func:`check_hosts` reports what :func:`qmem.install.inspect`
finds at ``…/qmem`` and, for pi and Prime, the packages their own installers added
(:mod:`qmem.setup.hostpackages`), each with the host identity qmem would decide for it
(:func:`qmem.hosts.identity.identify_host`, asked the way the shim will ask it).  Problems — the
CLI exits 1 — are what stops qmem from working as installed:

* a link whose target is gone, or a folder the host cannot load (files missing or
  unreadable, a folder name the bridge cannot import, a ``package.json`` that is not an ES
  module);
* Hermes with qmem installed but not in ``plugins.enabled``;
* pi or Prime with nothing to start the bridge with (``QMEM_PYTHON`` not an executable, or no
  ``python3`` on ``PATH``);
* pi or Prime where recall is configured but the host would not be identified: automatic
  recall and ``memory_search`` would silently be off;
* something at ``…/qmem`` whose ``package.json`` or ``__init__.py`` cannot be read, so that
  neither doctor nor the host can tell what it is.

Warnings are what works but is worth knowing: another qmem version, something else at
``…/qmem``, a host file doctor could not read (pi's or Prime's ``settings.json``, a package's
``package.json``, Hermes' ``config.yaml``: what it would have told is not checked; qmem's own
install record, ``installed.json``: install and uninstall refuse until it is fixed).  Each file
is read the safe way (:mod:`qmem.files.smallfile`), so none hangs or crashes doctor; each one it
cannot read is one line naming its path.  It reads only.
"""

from __future__ import annotations

import os
import shutil

from .. import __version__
from ..files.smallfile import UnreadableFile
from ..hosts.identity import identify_host, installed_evidence
from . import install, installrecord
from ..valueclass import dataclass, field
from .hostpackages import Package, installed_packages

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = []

_NAMES = {"pi": "pi", "prime": "Prime", "hermes": "Hermes"}
_INSTALLERS = {"pi": "pi install", "prime": "prime-agent package install"}


@dataclass
class HostCheck:
    document: dict[str, Any]
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _bridge_python(env: Mapping[str, str]) -> str | None:
    """Why pi/Prime could not start the bridge's interpreter, or None."""
    chosen = (env.get("QMEM_PYTHON") or "").strip()
    if chosen:
        found = shutil.which(chosen, path=env.get("PATH")) if os.sep not in chosen else \
            (chosen if os.access(chosen, os.X_OK) and os.path.isfile(chosen) else None)
        return None if found else f"QMEM_PYTHON={chosen} is not an executable: the bridge cannot start"
    if shutil.which("python3", path=env.get("PATH")) is None:
        return "no python3 on PATH: the bridge cannot start (set QMEM_PYTHON)"
    return None


def _package_report(host: str, package: Package, env: Mapping[str, str]) -> dict[str, Any]:
    evidence = installed_evidence(host, package.extension / "index.js", package.root)  # baseDir: the package
    return {"source": package.source, "path": str(package.root), "extension": str(package.extension),
            "version": package.version,
            "unloadable": install.unloadable(host, package.extension),
            "identified_as": identify_host(evidence, env)}


def _check_host(host: str, env: Mapping[str, str], recall_active: bool, check: HostCheck) -> dict[str, Any]:
    found = install.inspect(host, env)
    report = found.to_json()
    installed = found.kind in ("link", "copy")
    name = _NAMES[host]
    if found.kind == "broken-link":
        check.problems.append(f"{host}: {found.path} is a link to {found.target}, which does not exist")
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
    if host == "hermes":
        if found.hermes_config_error:
            check.warnings.append(f"hermes: {found.hermes_config_error}: whether Hermes enables qmem is not "
                                  f"checked")
        if installed and found.hermes_enabled is False:
            check.problems.append("hermes: qmem is installed but not in plugins.enabled, so Hermes does not load it: "
                                  "`python3 -m qmem.local install hermes` enables it")
        return report
    agent = install.location(host, env).directory.parent
    if installed:
        report["identified_as"] = identify_host(installed_evidence(host, found.path / "index.js", agent), env)
    scan = installed_packages(agent, env, install.qmem_version)
    report["packages"] = [_package_report(host, package, env) for package in scan.packages]
    for unread in scan.unread:
        what = (f"the packages `{_INSTALLERS[host]}` added are not checked" if unread.path == agent / "settings.json"
                else f"whether a package `{_INSTALLERS[host]}` added holds qmem is not checked")
        check.warnings.append(f"{host}: {unread.message}: {what}")
    for package in report["packages"]:
        if package["unloadable"]:
            check.problems.append(f"{host}: {name} cannot load the package {package['source']}: "
                                  f"{package['unloadable']}")
    if not installed and not report["packages"]:
        return report
    python = _bridge_python(env)
    if python:
        check.problems.append(f"{host}: {python}")
    if recall_active:
        runs = [(str(found.path), report.get("identified_as"))] if installed else []
        runs += [(f"the package {p['source']}", p["identified_as"]) for p in report["packages"]]
        for where, identity in runs:
            # The host's own process name always votes for it, so an answer is that host or None.
            if identity is None:
                check.problems.append(f"{host}: qmem from {where} would run with recall configured but could not "
                                      f"tell which host loads it (the paths point at both pi's and Prime's agent "
                                      f"directories): automatic recall and memory_search would be off")
    return report


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
        words = "not installed"
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
        words += (f"; {_INSTALLERS[host['host']]} {package['source']} (qmem {package['version']}"
                  f"{', ✗ cannot be loaded: ' + package['unloadable'] if package['unloadable'] else ''}), runs as "
                  f"{package['identified_as'] or '✗ unknown host'}")
    return words
