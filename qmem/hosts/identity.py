"""Which agent host loaded qmem's JavaScript shim: ``pi``, ``prime`` or None (recall off).

pi and Prime (a pi fork) load the same folder the same way and tell an extension nothing
about themselves, so identity is inferred from facts the shim collects (:class:`HostEvidence`),
and :func:`identify_host` — a pure function — decides by votes:

* **Paths.**  The path the host loaded (``sourceInfo.path``, *not* resolved: an install made
  by ``install pi|prime`` is a link into this checkout), its base directory (for an
  extension found in ``<agent dir>/extensions`` that is the agent directory) and this folder
  are each looked at as given and resolved.  One that lies under Prime's agent directory
  (``$PRIME_AGENT_CODING_AGENT_DIR``, ``~/.prime/agent``, or any ``…/.prime/agent/…``) votes
  ``prime``; under pi's (``$PI_CODING_AGENT_DIR``, ``~/.pi/agent``, ``…/.pi/agent/…``) ``pi``.
* **Process.**  The host names its process: ``pi`` votes pi, ``prime-agent`` votes prime;
  anything else (an SDK embedding the agent, plain ``node``) does not vote.
* **Session header.**  ``rlmDepth`` in the header votes prime: Prime writes it in every
  session, pi never does.

``PI_CODING_AGENT=true`` votes for neither: both hosts set it.  Exactly one host among the
votes is the answer.  When the votes name both hosts, the strongest evidence decides: the
host's own facts (its process title, the ``rlmDepth`` header) together with the path the host
says it loaded, *as given* (``loaded``: before any link is resolved).  When those name one host
and only resolved forms or this folder (which Node resolves) point at the other — a clone
that ``pi install git:…`` put under ``~/.pi/agent/git/`` linked into Prime, say — that host
it is.  When the strongest facts disagree among themselves, or none were given, the
evidence truly conflicts: the user's own choice, ``named`` (``$QMEM_HOST``, else the
config's ``recall.host``: :func:`qmem.config.recall_host`), decides when it is one of the
hosts voted for (or nothing voted); otherwise None, and automatic recall stays off rather
than guessing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path, PurePath

from ..hostdirs import agent_directory
from ..valueclass import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["HostEvidence", "host_votes", "identify_host", "installed_evidence"]

#: The process title each host sets (``process.title = APP_NAME``).
HOST_PROCESSES = {"pi": "pi", "prime-agent": "prime"}

#: The hosts a path can vote for (their agent directories: :mod:`qmem.hostdirs`).
_PATH_HOSTS = ("pi", "prime")


@dataclass(frozen=True)
class HostEvidence:
    """What the shim saw: ``paths`` (the path the host loaded, its base directory, this
    folder — as the host gave them), the host's ``process`` title, and whether the session
    header carries ``rlmDepth``."""

    paths: tuple[str, ...] = ()
    process: str | None = None
    has_rlm_depth: bool = False
    loaded: tuple[str, ...] = ()  # of ``paths``, those the host gave as it loaded them (never resolved)

    @classmethod
    def from_session_start(cls, params: Mapping[str, Any]) -> HostEvidence:
        """The evidence in the shim's ``session_start`` parameters (anything malformed is left out)."""
        loaded = params.get("loaded") if isinstance(params.get("loaded"), Mapping) else {}
        candidates = (loaded.get("path"), loaded.get("baseDir"), params.get("extensionDir"))
        header = params.get("header") if isinstance(params.get("header"), Mapping) else {}
        process = params.get("hostProcess")
        given = (loaded.get("path"), loaded.get("baseDir"))
        return cls(paths=tuple(p for p in candidates if isinstance(p, str) and p),
                   process=process if isinstance(process, str) else None,
                   has_rlm_depth=header.get("hasRlmDepth") is True,
                   loaded=tuple(p for p in given if isinstance(p, str) and p))


def _forms(path: str) -> set[PurePath]:
    """``path`` as given (normalised, not resolved) and resolved."""
    forms = {PurePath(os.path.normpath(path))}
    try:
        forms.add(PurePath(os.path.realpath(path)))
    except (OSError, ValueError):
        pass
    return forms


def _under(path: PurePath, root: PurePath) -> bool:
    return path == root or root in path.parents


def _path_votes(path: str, env: Mapping[str, str], *, resolved: bool = True) -> set[str]:
    votes = set()
    for host in _PATH_HOSTS:
        directory = agent_directory(host, env)
        roots: set[PurePath] = set()
        for root in (directory.path, directory.default):
            if root is not None:
                roots |= _forms(str(root))
        marker, width = directory.marker, len(directory.marker)
        for form in _forms(path) if resolved else {PurePath(os.path.normpath(path))}:
            parts = form.parts
            if any(parts[i:i + width] == marker for i in range(len(parts) - width + 1)) or \
                    any(_under(form, root) for root in roots):
                votes.add(host)
    return votes


def host_votes(evidence: HostEvidence, env: Mapping[str, str]) -> set[str]:
    """Every host some fact points at (see the module docstring)."""
    votes: set[str] = set()
    for path in evidence.paths:
        if os.path.isabs(path):
            votes |= _path_votes(path, env)
    if evidence.process in HOST_PROCESSES:
        votes.add(HOST_PROCESSES[evidence.process])
    if evidence.has_rlm_depth:
        votes.add("prime")
    return votes


def strongest_votes(evidence: HostEvidence, env: Mapping[str, str]) -> set[str]:
    """The host both the host's own facts and its loaded path as given name, or an empty set
    when they do not name one host together (see the module docstring)."""
    facts = {HOST_PROCESSES[evidence.process]} if evidence.process in HOST_PROCESSES else set()
    if evidence.has_rlm_depth:
        facts.add("prime")
    given: set[str] = set()
    for path in evidence.loaded:
        if os.path.isabs(path):
            given |= _path_votes(path, env, resolved=False)
    return facts if len(facts) == 1 and facts == given else set()


def identify_host(evidence: HostEvidence, env: Mapping[str, str], named: str | None = None) -> str | None:
    """``pi``, ``prime``, or None when the evidence conflicts and ``named`` does not settle it."""
    votes = host_votes(evidence, env)
    if len(votes) == 1:
        return votes.pop()
    strongest = strongest_votes(evidence, env) if votes else set()
    if len(strongest) == 1:
        return strongest.pop()
    return named if named in _PATH_HOSTS and (not votes or named in votes) else None


def installed_evidence(host: str, loaded: Path, base_dir: Path) -> HostEvidence:
    """What the shim would report for qmem loaded by ``host`` from ``loaded`` (``index.js``, as
    the host finds it) with ``base_dir`` as its base: for ``doctor``, which asks before any session."""
    title = next(name for name, value in HOST_PROCESSES.items() if value == host)
    return HostEvidence(paths=(str(loaded), str(base_dir), os.path.realpath(loaded.parent)), process=title,
                        has_rlm_depth=host == "prime", loaded=(str(loaded), str(base_dir)))
