"""How the setup holds its credentials: what ``doctor`` and ``admin status`` warn about.

Promises:

* :func:`audit` returns warnings, each one line naming a config field, an environment
  variable or a file mode — never a value:

  - a config value (at any depth, in any key) that the credential scanner flags, with the
    field and the family ("``recall.collection`` looks like a github-token");
  - such a config file readable by its group or by others (``mode & 0o077``);
  - the seed's rule "Do not reuse the admin key for runtime": the admin Qdrant key equal to
    the runtime Qdrant key, or the source key equal to the admin key (the variables are
    named as set, alias or not).

  It reads the config file the safe way (:mod:`qmem.files.configfile`) and says nothing about a
  file it cannot read: the caller reports that as the problem it is.
* :func:`hide_flagged` returns a report document in which every string the scanner flags has
  its flagged part replaced by ``[redacted: <family>]``, so a report never prints such a value.

Pure apart from reading the environment and the config file; warnings, not errors: the
callers keep their exit status for problems only.
"""

from __future__ import annotations

import os
import stat

from .. import config as config_mod
from ..errors import ConfigError
from ..files.configfile import decode_config, read_config_bytes
from ..valueclass import dataclass
from .engine import redact, scan

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["audit", "hide_flagged"]


@dataclass(frozen=True)
class FlaggedValue:
    """A config value that looks like a credential: where it is and what family, never what."""

    field: str
    family: str


def flagged_values(document: Any) -> list[FlaggedValue]:
    """Every string value (or key name) of a config document that the scanner flags."""
    found: list[FlaggedValue] = []
    stack: list[tuple[Any, tuple[str, ...]]] = [(document, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                here = path + (config_mod.shown_key(str(key)),)
                in_key = scan(str(key))
                if in_key:
                    found.append(FlaggedValue(".".join(here), in_key[0].family))
                stack.append((value, here))
        elif isinstance(node, list):
            stack.extend((item, path + (f"[{index}]",)) for index, item in enumerate(node))
        elif isinstance(node, str):
            findings = scan(node)
            if findings:
                found.append(FlaggedValue(".".join(path) or "(the document)", findings[0].family))
    return sorted(found, key=lambda flagged: flagged.field)


def _in_effect(role: str, env: Mapping[str, str]) -> tuple[str, str] | None:
    """(variable, value) of the credential for ``role`` as :func:`qmem.config.credential` picks it."""
    for name in config_mod.CREDENTIAL_VARIABLES[role]:
        value = (env.get(name) or "").strip()
        if value:
            return name, value
    return None


#: (role, role it must differ from, why) — the seed's rule and its mirror for the source.
_MUST_DIFFER = (
    ("admin_qdrant", "qdrant", "do not reuse the admin key for runtime: give the runtime a read-only key"),
    ("source_qdrant", "admin_qdrant", "give the Hermes source a read-only key of its own, not the admin key"),
)


def reused_keys(env: Mapping[str, str] | None = None) -> list[str]:
    """A warning for each pair of roles that must have different keys and have the same one."""
    env = os.environ if env is None else env
    warnings = []
    for role, other, why in _MUST_DIFFER:
        mine, theirs = _in_effect(role, env), _in_effect(other, env)
        if mine and theirs and mine[1] == theirs[1]:
            warnings.append(f"{mine[0]} has the same value as {theirs[0]}: {why}")
    return warnings


def _config_warnings(env: Mapping[str, str]) -> list[str]:
    path = config_mod.config_path(env)
    try:
        data = read_config_bytes(path)
        if data is None:
            return []
        document = decode_config(data, path.name, show_key=config_mod.shown_key)
        flagged = flagged_values(document)
    except ConfigError:
        return []  # unreadable or not JSON: the caller reports that as a problem
    if not flagged:
        return []
    warnings = [f"config key {item.field!r} looks like a credential ({item.family}); it is not shown, and "
                f"credentials belong in the environment, not in the config file" for item in flagged]
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return warnings
    if mode & 0o077:
        warnings.append(f"the config file can be read by {'others' if mode & 0o007 else 'its group'} "
                        f"(mode {mode:04o}) and holds a value that looks like a credential: chmod 600 it")
    return warnings


def audit(env: Mapping[str, str] | None = None) -> list[str]:
    """Every warning of the module docstring, config first."""
    env = os.environ if env is None else env
    return _config_warnings(env) + reused_keys(env)


def hide_flagged(document: Any) -> Any:
    """A copy of a report document with every flagged part of every string redacted by family."""
    if isinstance(document, str):
        return redact(document)
    if isinstance(document, dict):
        return {hide_flagged(key) if isinstance(key, str) else key: hide_flagged(value)
                for key, value in document.items()}
    if isinstance(document, (list, tuple)):
        return [hide_flagged(item) for item in document]
    return document
