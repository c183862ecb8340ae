"""Enabling qmem in Hermes' ``config.yaml`` without a YAML library, only where the edit is certain.

Hermes loads a user plugin only when its name is in ``plugins.enabled`` and not in
``plugins.disabled``.  ``hermes plugins enable qmem`` edits those lists with a YAML library;
qmem has none (standard library only), so :func:`enable` and :func:`disable` edit the file
themselves only in the shapes read here with certainty, and otherwise change nothing and
say so (the caller prints the ``hermes plugins …`` command instead):

* no file, or a file without a ``plugins`` key: a ``plugins:`` block is written (appended);
* a block-style ``plugins:`` mapping whose ``enabled`` / ``disabled`` are missing, empty,
  ``null``, a one-line flow list of plain names (``[a, b]``) or a block list of plain names
  (``- a``): ``enable`` adds ``qmem`` to ``enabled`` and removes it from ``disabled`` (as
  Hermes does); ``disable`` removes it from ``enabled``.

Anything else — flow-style mappings, anchors, tags, directives, several documents, tabs in
indentation, lists of anything but plain names — is left alone.  Every line the edit does
not concern is kept byte for byte; the file is replaced atomically, keeping its mode (a new
file gets 0600, as Hermes writes it).

The file is read the safe way (:mod:`qmem.files.smallfile`): a regular file of at most
:data:`MAX_CONFIG_YAML_BYTES`, opened without blocking.  One that is there but cannot be read —
a FIFO, a device, a directory, a dangling link, too large — is never edited
(:func:`enable` / :func:`disable` answer ``manual``) and :func:`is_enabled` raises
:class:`~qmem.files.smallfile.UnreadableFile` for it, so that it is not taken for "not enabled".
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..files.atomicfile import write_atomic
from ..files.smallfile import MIB, UnreadableFile, read_small_file
from ..valueclass import dataclass

__all__ = []

PLUGIN = "qmem"
#: Hermes writes a config of a few kilobytes; a file over this is not one qmem edits.
MAX_CONFIG_YAML_BYTES = MIB

_TOP_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)[ \t]*:(?:[ \t]+(.*))?")
_CHILD_KEY = re.compile(r"( +)([A-Za-z_][A-Za-z0-9_-]*)[ \t]*:(?:[ \t]+(.*))?")
_ITEM = re.compile(r"( *)-[ \t]+(.*)")
_NAME = r"[A-Za-z0-9_./@+-]+"
_SCALAR = re.compile(rf"({_NAME})|'({_NAME})'|\"({_NAME})\"")


@dataclass(frozen=True)
class ConfigEdit:
    """What :func:`enable` / :func:`disable` did to the file.

    ``state``: ``created`` (a new file), ``added`` / ``removed`` (the list changed),
    ``unchanged`` (already as asked), or ``manual`` (the file's shape is not one edited
    here; nothing was changed and ``reason`` says why).
    """

    path: Path
    state: str
    reason: str | None = None

    @property
    def changed(self) -> bool:
        return self.state in ("created", "added", "removed")


class _Unsure(Exception):
    """The file is not in a shape this module edits with certainty."""


def _strip_comment(value: str) -> str:
    value = value.strip()
    if value.startswith("#"):
        return ""
    match = re.search(r"[ \t]#", value)
    return value[:match.start()].rstrip() if match else value


def _scalar(text: str) -> str:
    match = _SCALAR.fullmatch(text.strip())
    if match is None:
        raise _Unsure("a list entry that is not a plain name")
    return next(group for group in match.groups() if group is not None)


def _is_content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


@dataclass
class _List:
    """One of ``plugins.enabled`` / ``plugins.disabled`` as written."""

    key_line: int | None  # None: the key is absent
    style: str  # "absent" | "null" | "flow" | "block"
    names: list[str]
    raw: list[str]  # flow: the entries as written
    item_lines: list[int]  # block: line numbers of the entries
    item_indent: int = 0


@dataclass
class _Plugins:
    line: int | None  # the ``plugins:`` line, None when absent
    child_indent: int
    lists: dict[str, _List]


def _read_list(lines: list[str], key_line: int, end: int, base: int, value: str) -> _List:
    if value in ("null", "~"):
        return _List(key_line, "null", [], [], [])
    if value.startswith("["):
        if not value.endswith("]"):
            raise _Unsure("a flow list over several lines")
        inner = value[1:-1].strip()
        raw = [part.strip() for part in inner.split(",")] if inner else []
        if any(not part for part in raw):
            raise _Unsure("an empty entry in a flow list")
        return _List(key_line, "flow", [_scalar(part) for part in raw], raw, [])
    if value:
        raise _Unsure("a list value that is neither a block nor a one-line flow list")
    names, item_lines, indents = [], [], set()
    for number in range(key_line + 1, end):
        line = lines[number]
        if not _is_content(line):
            continue
        indent = _indent(line)
        if indent < base or (indent == base and not line.lstrip(" ").startswith("-")):
            break
        match = _ITEM.fullmatch(line.rstrip("\r\n"))
        if match is None:
            raise _Unsure("a list entry that is not a plain name")
        names.append(_scalar(_strip_comment(match.group(2))))
        item_lines.append(number)
        indents.add(len(match.group(1)))
    if len(indents) > 1:
        raise _Unsure("list entries at different indentations")
    if not names:
        return _List(key_line, "null", [], [], [])
    return _List(key_line, "block", names, [], item_lines, indents.pop())


def _parse(lines: list[str]) -> _Plugins:
    tops: list[tuple[int, str, str]] = []
    for number, line in enumerate(lines):
        body = line.rstrip("\r\n")
        if "\t" in body[: len(body) - len(body.lstrip(" \t"))]:
            raise _Unsure("tabs in indentation")
        if not _is_content(body) or body[0] == " ":
            continue
        if body.startswith(("---", "...", "%")):
            raise _Unsure("YAML directives or several documents")
        match = _TOP_KEY.fullmatch(body)
        if match is None:
            raise _Unsure("a top level that is not a block mapping")
        tops.append((number, match.group(1), _strip_comment(match.group(2) or "")))
    found = [(number, value) for number, key, value in tops if key == "plugins"]
    if not found:
        return _Plugins(None, 2, {name: _List(None, "absent", [], [], []) for name in ("enabled", "disabled")})
    if len(found) > 1:
        raise _Unsure("the plugins key appears twice")
    line, value = found[0]
    if value not in ("", "{}", "null", "~"):
        raise _Unsure("plugins is not a block mapping")
    end = next((number for number, _, _ in tops if number > line), len(lines))
    children = [n for n in range(line + 1, end) if _is_content(lines[n])]
    if value and children:
        raise _Unsure("plugins has a value and indented lines")
    child_indent = _indent(lines[children[0]]) if children else 2
    lists = {name: _List(None, "absent", [], [], []) for name in ("enabled", "disabled")}
    for number in children:
        text = lines[number].rstrip("\r\n")
        indent = _indent(text)
        if indent < child_indent:
            raise _Unsure("inconsistent indentation under plugins")
        if indent > child_indent:
            continue  # inside some child's value
        match = _CHILD_KEY.fullmatch(text)
        if match is None:
            if text.lstrip(" ").startswith("-") and indent == child_indent:
                continue  # an indentless entry of the previous child's list
            raise _Unsure("plugins is not a block mapping")
        key = match.group(2)
        if key in lists:
            if lists[key].key_line is not None:
                raise _Unsure(f"plugins.{key} appears twice")
            lists[key] = _read_list(lines, number, end, child_indent, _strip_comment(match.group(3) or ""))
    return _Plugins(line, child_indent, lists)


def _newline(lines: list[str]) -> str:
    return "\r\n" if lines and lines[0].endswith("\r\n") else "\n"


def _with_name(lines: list[str], plugins: _Plugins, key: str, nl: str) -> list[str]:
    """``lines`` with ``PLUGIN`` added to ``plugins.<key>`` (which does not hold it)."""
    entry = plugins.lists[key]
    pad = " " * plugins.child_indent
    out = list(lines)
    if plugins.line is None:
        if out and not out[-1].endswith(("\n", "\r")):
            out[-1] += nl
        return out + [f"plugins:{nl}", f"{pad}{key}:{nl}", f"{pad}  - {PLUGIN}{nl}"]
    if entry.style == "absent":
        if lines[plugins.line].rstrip("\r\n").rstrip() != "plugins:":
            out[plugins.line] = f"plugins:{nl}"  # `plugins: {}` / null, now a block
        return out[:plugins.line + 1] + [f"{pad}{key}:{nl}", f"{pad}  - {PLUGIN}{nl}"] + out[plugins.line + 1:]
    assert entry.key_line is not None
    if entry.style == "null":
        out[entry.key_line] = f"{pad}{key}:{nl}"
        return out[:entry.key_line + 1] + [f"{pad}  - {PLUGIN}{nl}"] + out[entry.key_line + 1:]
    if entry.style == "flow":
        out[entry.key_line] = f"{pad}{key}: [{', '.join(entry.raw + [PLUGIN])}]{nl}"
        return out
    last = entry.item_lines[-1]
    return out[:last + 1] + [f"{' ' * entry.item_indent}- {PLUGIN}{nl}"] + out[last + 1:]


def _without_name(lines: list[str], plugins: _Plugins, key: str, nl: str) -> list[str]:
    """``lines`` with ``PLUGIN`` removed from ``plugins.<key>`` (which holds it)."""
    entry = plugins.lists[key]
    pad = " " * plugins.child_indent
    out = list(lines)
    assert entry.key_line is not None
    if entry.style == "flow":
        kept = [raw for raw, name in zip(entry.raw, entry.names) if name != PLUGIN]
        out[entry.key_line] = f"{pad}{key}: [{', '.join(kept)}]{nl}"
        return out
    drop = {number for number, name in zip(entry.item_lines, entry.names) if name == PLUGIN}
    if len(drop) == len(entry.item_lines):
        out[entry.key_line] = f"{pad}{key}: []{nl}"  # an empty list, not null
    return [line for number, line in enumerate(out) if number not in drop]


def _load(path: Path) -> tuple[list[str], str, bytes | None]:
    """(lines, BOM, original bytes or None when the file does not exist); raises UnreadableFile."""
    data = read_small_file(path, MAX_CONFIG_YAML_BYTES)
    if data is None:
        return [], "", None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _Unsure("it is not UTF-8 text") from None
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    return text[len(bom):].splitlines(keepends=True), bom, data


def _save(path: Path, lines: list[str], bom: str, existed: bool) -> None:
    mode = 0o600
    if existed:
        try:
            mode = os.stat(path).st_mode & 0o777
        except OSError:
            pass
    write_atomic(path, (bom + "".join(lines)).encode("utf-8"), mode=mode)


def _change(path: Path, *, enabled: bool) -> ConfigEdit:
    try:
        lines, bom, original = _load(path)
    except UnreadableFile as exc:
        return ConfigEdit(path, "manual", reason=f"it {exc.words}")
    except _Unsure as exc:
        return ConfigEdit(path, "manual", reason=str(exc))
    try:
        plugins = _parse(lines)
        nl = _newline(lines)
        has = PLUGIN in plugins.lists["enabled"].names
        blocked = PLUGIN in plugins.lists["disabled"].names
        if enabled and has and not blocked or not enabled and not has:
            return ConfigEdit(path, "unchanged")
        new = lines
        if enabled:
            if blocked:
                new = _without_name(new, plugins, "disabled", nl)
                plugins = _parse(new)
            if not has:
                new = _with_name(new, plugins, "enabled", nl)
        else:
            new = _without_name(new, plugins, "enabled", nl)
        check = _parse(new)  # the result must read back as asked, or nothing is written
        if (PLUGIN in check.lists["enabled"].names) != enabled or (enabled and PLUGIN in check.lists["disabled"].names):
            raise _Unsure("the edit would not read back as intended")
    except _Unsure as exc:
        return ConfigEdit(path, "manual", reason=str(exc))
    try:
        _save(path, new, bom, original is not None)
    except OSError as exc:
        return ConfigEdit(path, "manual", reason=f"it cannot be written ({exc.strerror or 'I/O error'})")
    if original is None:
        return ConfigEdit(path, "created")
    return ConfigEdit(path, "added" if enabled else "removed")


def enable(path: Path) -> ConfigEdit:
    """Put ``qmem`` into ``plugins.enabled`` (and out of ``plugins.disabled``) of ``path``."""
    return _change(path, enabled=True)


def disable(path: Path) -> ConfigEdit:
    """Take ``qmem`` out of ``plugins.enabled`` of ``path`` (a missing file stays missing)."""
    if not path.exists():
        return ConfigEdit(path, "unchanged")
    return _change(path, enabled=False)


def is_enabled(path: Path) -> bool | None:
    """Whether Hermes would load qmem according to ``path``; None when its shape is not read with certainty.

    Raises :class:`~qmem.files.smallfile.UnreadableFile` when the file is there but cannot be read.
    """
    try:
        lines, _, _ = _load(path)
        plugins = _parse(lines)
    except _Unsure:  # an UnreadableFile goes to the caller
        return None
    return PLUGIN in plugins.lists["enabled"].names and PLUGIN not in plugins.lists["disabled"].names


def unread_reason(path: Path) -> str | None:
    """Why :func:`is_enabled` cannot tell for ``path`` (its shape, or why the file cannot be read), or None."""
    try:
        _parse(_load(path)[0])
    except _Unsure as exc:
        return str(exc)
    except UnreadableFile as exc:
        return exc.message
    return None
