"""qmem's configuration: where files live, what the config file may say, credentials.

Promises:

* **Paths.** The config file is ``$QMEM_CONFIG``, else ``$XDG_CONFIG_HOME/qmem/config.json``,
  else ``~/.config/qmem/config.json``.  Data lives in ``$XDG_DATA_HOME/qmem/`` (default
  ``~/.local/share/qmem/``): the index ``qmem.sqlite`` (``$QMEM_SQLITE`` wins over the
  ``localDbPath`` key, which wins over the default) and ``breaker.json``
  (``$QMEM_BREAKER_FILE``).
* **Validation.** A missing file means defaults.  A present file is read by
  :mod:`qmem.files.configfile` (a regular file of at most 1 MiB, read without blocking; strict
  JSON: no ``NaN``, no key twice, no absurdly long number; a dangling link is an error, not
  "no file") and must be a JSON object whose keys are all known (camelCase, DESIGN §4);
  values have the right type and range (a number with a decimal point is not a whole number);
  URLs are plain ``http(s)://host[:port][/path]`` — no userinfo, query or fragment, the
  places where credentials leak.  Every problem is a :class:`ConfigError` with one line
  that names the key (and the line/column for malformed JSON), never the value.
* **No credentials in files.** Any key, at any depth, whose name looks like a secret
  (``apiKey``, ``token``, ``password`` …) is refused with the environment variable to
  use instead.  Credentials come only from the environment (:func:`credential`); the
  seed-000 ``PI_QDRANT_MEMORY_*`` names are accepted as aliases, and empty or
  whitespace-only values count as absent.
* **Writes** (:func:`save_config`, :func:`update_config`) validate first and replace the
  file atomically with mode 0600.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from pathlib import Path
from urllib.parse import urlsplit

from .errors import ConfigError
from .files.configfile import read_config_file
from .files.smallfile import OversizedNumber
from .valueclass import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = [
    "Config", "RecallConfig", "Paths", "load_config", "setting_sources", "shown_key", "update_config",
    "resolve_paths", "credential", "credential_variable", "validate_url", "CREDENTIAL_VARIABLES", "HOST_LANES",
    "recall_host", "config_path", "to_document",
]

#: role -> environment variables, preferred first.  The gateway key has no seed alias.
CREDENTIAL_VARIABLES: dict[str, tuple[str, ...]] = {
    "gateway": ("QMEM_GATEWAY_API_KEY",),
    "qdrant": ("QMEM_QDRANT_API_KEY", "PI_QDRANT_MEMORY_QDRANT_API_KEY"),
    "embedding": ("QMEM_EMBEDDING_API_KEY", "PI_QDRANT_MEMORY_EMBEDDING_API_KEY"),
    "admin_qdrant": ("QMEM_ADMIN_QDRANT_API_KEY", "PI_QDRANT_MEMORY_ADMIN_QDRANT_API_KEY"),
    "source_qdrant": ("QMEM_SOURCE_QDRANT_API_KEY", "PI_QDRANT_MEMORY_SOURCE_QDRANT_API_KEY"),
}

DISTANCES = ("Cosine", "Dot", "Euclid", "Manhattan")
#: The hosts whose curated memories recall can use (``recall.host``, ``QMEM_HOST``).
HOST_LANES = ("pi", "prime")
SEARCH_ENDPOINTS = ("search", "query")


@dataclass(frozen=True)
class RecallConfig:
    """The ``recall`` section: the curated Qdrant collection and its embeddings.

    The two URLs have no defaults: recall is off until the user writes both (a prompt must
    never go to a port nobody named), and then on unless ``enabled`` is false.
    """

    enabled: bool = True
    qdrant_url: str | None = None
    collection: str = "qmem_memories"
    search_endpoint: str = "search"
    vector_name: str | None = None
    embeddings_url: str | None = None
    embedding_model: str = "bge-m3"
    dimension: int = 1024
    distance: str = "Cosine"
    limit: int = 6
    max_chars: int = 8000
    timeout_ms: int = 3000
    wait_ms: int = 800  # the most one LLM request waits for automatic recall; the rest runs in the background
    project: str | None = None
    host: str | None = None  # for the MCP server and Hermes: whose curated memories to use (QMEM_HOST wins)

    @property
    def configured(self) -> bool:
        """Both service URLs are written in the config file."""
        return self.qdrant_url is not None and self.embeddings_url is not None

    @property
    def active(self) -> bool:
        """Recall runs: configured and not switched off."""
        return self.enabled and self.configured


@dataclass(frozen=True)
class Config:
    """The whole configuration; defaults are seed 001's."""

    url: str | None = None
    local_db_path: str | None = None
    local_fallback: bool = True
    offline_queue: bool = True
    connect_timeout_ms: int = 15000
    timeout_ms: int = 30000
    breaker_base_ms: int = 120000
    breaker_max_ms: int = 600000
    breaker_trip_after: int = 3
    recall: RecallConfig = field(default_factory=RecallConfig)


@dataclass(frozen=True)
class Paths:
    """Where qmem's files are, resolved from the environment and the config."""

    config_file: Path
    data_dir: Path
    database: Path
    breaker_file: Path


# --- schema ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _Key:
    attr: str
    kind: str  # "bool" | "int" | "str" | "url" | "choice"
    nullable: bool = False
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    pattern: str | None = None


_NAME = r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}"

_TOP_KEYS: dict[str, _Key] = {
    "url": _Key("url", "url", nullable=True),
    "localDbPath": _Key("local_db_path", "str", nullable=True),
    "localFallback": _Key("local_fallback", "bool"),
    "offlineQueue": _Key("offline_queue", "bool"),
    "connectTimeoutMs": _Key("connect_timeout_ms", "int", minimum=1, maximum=600_000),
    "timeoutMs": _Key("timeout_ms", "int", minimum=1, maximum=3_600_000),
    "breakerBaseMs": _Key("breaker_base_ms", "int", minimum=0, maximum=86_400_000),
    "breakerMaxMs": _Key("breaker_max_ms", "int", minimum=0, maximum=86_400_000),
    "breakerTripAfter": _Key("breaker_trip_after", "int", minimum=1, maximum=1000),
}

_RECALL_KEYS: dict[str, _Key] = {
    "enabled": _Key("enabled", "bool"),
    "qdrantUrl": _Key("qdrant_url", "url", nullable=True),
    "collection": _Key("collection", "str", pattern=_NAME),
    "searchEndpoint": _Key("search_endpoint", "choice", choices=SEARCH_ENDPOINTS),
    "vectorName": _Key("vector_name", "str", nullable=True, pattern=_NAME),
    "embeddingsUrl": _Key("embeddings_url", "url", nullable=True),
    "embeddingModel": _Key("embedding_model", "str", pattern=r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}"),
    "dimension": _Key("dimension", "int", minimum=1, maximum=65_536),
    "distance": _Key("distance", "choice", choices=DISTANCES),
    "limit": _Key("limit", "int", minimum=1, maximum=50),
    "maxChars": _Key("max_chars", "int", minimum=1_000, maximum=200_000),
    "timeoutMs": _Key("timeout_ms", "int", minimum=1, maximum=600_000),
    "waitMs": _Key("wait_ms", "int", minimum=1, maximum=600_000),
    "project": _Key("project", "str", nullable=True, pattern=_NAME),
    "host": _Key("host", "choice", nullable=True, choices=HOST_LANES),
}

# Key names that look like they hold a secret, compared with case and separators removed.
_SECRET_WORDS = (
    "apikey", "token", "secret", "password", "passwd", "passphrase", "credential",
    "authorization", "bearer", "privatekey", "accesskey", "cookie",
)


def _looks_secret(key: str) -> bool:
    folded = re.sub(r"[^a-z0-9]", "", key.lower())
    return folded == "auth" or any(word in folded for word in _SECRET_WORDS)


def _variable_for_secret(path: tuple[str, ...]) -> str:
    """The environment variable a secret found at ``path`` belongs in."""
    section = path[0] if len(path) > 1 else ""
    leaf = path[-1].lower()
    if section == "recall":
        role = "embedding" if "embed" in leaf else "qdrant"
    elif section in ("admin", "destination"):
        role = "admin_qdrant"
    elif section == "source":
        role = "source_qdrant"
    else:
        role = "gateway"
    return CREDENTIAL_VARIABLES[role][0]


#: The longest string value (a path: PATH_MAX on Linux).
MAX_STRING_CHARS = 4096
#: Config documents are two levels deep; anything far deeper is refused before it is walked.
MAX_DEPTH = 16
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,39}")


def shown_key(key: str) -> str:
    """``key`` as a message may show it: a plain name, never something that may be a token.

    Unknown keys are echoed so the user can find them, but a key name is user text: a token
    pasted as a key, or an opaque name, is described instead of shown.
    """
    from .secretscan.engine import scan  # here, not at the top: only a message that names a key needs the scanner

    if _PLAIN_KEY.fullmatch(key) and not scan(key) and sum(ch.isdigit() for ch in key) <= 4:
        return key
    return f"<a {len(key)}-character name, not shown>"


def _label(path: tuple[str, ...]) -> str:
    return ".".join(shown_key(part) if not part.startswith("[") else part for part in path)


def _reject_secret_keys(value: Any) -> None:
    """Refuse secret-like key names at any depth (and absurd nesting), without recursion."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        if len(path) > MAX_DEPTH:
            raise ConfigError(f"the config file is nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, dict):
            for key, child in node.items():
                here = path + (str(key),)
                if _looks_secret(str(key)):
                    raise ConfigError(
                        f"config key {_label(here)!r} looks like a credential; credentials are read "
                        f"only from the environment: remove it and export {_variable_for_secret(here)} instead"
                    )
                stack.append((child, here))
        elif isinstance(node, list):
            stack.extend((child, path + (f"[{index}]",)) for index, child in enumerate(node))


# Characters a URL must never carry: controls, format (zero-width, bidi), separators, surrogates,
# private use and unassigned code points.  U+0085, U+2028, U+200B, U+202E … are all here.
_BAD_URL_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp", "Cs", "Co", "Cn"})
_HOST_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")


def _check_host(host: str, name: str) -> None:
    """A host name that resolvers accept: an IP literal, or IDNA-encodable labels of 1–63 characters."""
    import ipaddress  # here: only a config that names a host validates one

    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise ConfigError(f"{name} has a host name that is not valid (empty, too long or not IDNA-encodable)") \
            from None
    labels = ascii_host[:-1].split(".") if ascii_host.endswith(".") else ascii_host.split(".")
    if len(ascii_host) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
        raise ConfigError(f"{name} has a host name that is not valid (empty, too long or not IDNA-encodable)")


def validate_url(value: object, *, name: str) -> str:
    """Check that ``value`` is a plain http(s) base URL and return it without a trailing slash.

    Refused: other schemes, no host or a host a resolver would reject (empty labels,
    ``a..b.example``, labels over 63 characters, anything IDNA cannot encode), userinfo
    (``user:pass@``), a query or fragment (where tokens hide), any control, format,
    separator or unassigned character (U+0085, U+2028, U+200B, U+202E …), a bad port.
    The message names ``name`` but never echoes the value, which may hold a secret.
    """
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{name} must be a non-empty URL string")
    if any(unicodedata.category(ch) in _BAD_URL_CATEGORIES for ch in value):
        raise ConfigError(f"{name} must not contain spaces, control, invisible or separator characters")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        raise ConfigError(f"{name} is not a valid URL (bad host or port)") from None
    if parts.scheme not in ("http", "https"):
        raise ConfigError(f"{name} must start with http:// or https://")
    if not parts.hostname:
        raise ConfigError(f"{name} has no host")
    if "@" in parts.netloc:
        raise ConfigError(f"{name} must not contain a user name or password; use the environment for credentials")
    if parts.query or value.endswith("?"):
        raise ConfigError(f"{name} must not have a query string; credentials belong in the environment")
    if parts.fragment or "#" in value:
        raise ConfigError(f"{name} must not have a fragment")
    if port == 0:
        raise ConfigError(f"{name} has an invalid port")
    _check_host(parts.hostname, name)
    return value.rstrip("/")


def _check_value(key: str, spec: _Key, value: Any, where: str) -> Any:
    label = f"{where}{key}"  # a known key: safe to show
    if value is None:
        if spec.nullable:
            return None
        raise ConfigError(f"config key {label!r} must not be null")
    if spec.kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"config key {label!r} must be true or false")
        return value
    if spec.kind == "int":
        if isinstance(value, OversizedNumber):
            raise ConfigError(f"config key {label!r} must be a whole number from {spec.minimum} to {spec.maximum} "
                              f"(it has {value.digits} digits)")
        # bool is an int subclass in Python; "true" is not a timeout, and 3000.5 (or 3000.0) is not a count.
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"config key {label!r} must be a whole number"
                              + (" (written without a decimal point or exponent)" if isinstance(value, float) else ""))
        if spec.minimum is not None and value < spec.minimum:
            raise ConfigError(f"config key {label!r} must be at least {spec.minimum}")
        if spec.maximum is not None and value > spec.maximum:
            raise ConfigError(f"config key {label!r} must be at most {spec.maximum}")
        return value
    if spec.kind == "url":
        return validate_url(value, name=f"config key {label!r}")
    if not isinstance(value, str):
        raise ConfigError(f"config key {label!r} must be a string")
    if spec.kind == "choice":
        if value not in spec.choices:
            raise ConfigError(f"config key {label!r} must be one of: {', '.join(spec.choices)}")
        return value
    if not value.strip():
        raise ConfigError(f"config key {label!r} must not be empty")
    if len(value) > MAX_STRING_CHARS:
        raise ConfigError(f"config key {label!r} must be at most {MAX_STRING_CHARS} characters")
    if any(unicodedata.category(ch) in ("Cc", "Cs") for ch in value):
        # NUL, newlines and lone surrogates: no path, name or model can hold them, and the OS would raise.
        raise ConfigError(f"config key {label!r} must not contain control characters or invalid Unicode")
    if spec.pattern is not None and not re.fullmatch(spec.pattern, value):
        raise ConfigError(f"config key {label!r} has characters that are not allowed")
    return value


def _check_section(raw: Mapping[str, Any], keys: Mapping[str, _Key], where: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, value in raw.items():
        spec = keys.get(key)
        if spec is None:
            known = ", ".join(sorted(keys))
            raise ConfigError(f"unknown config key {where + shown_key(str(key))!r} (known keys: {known})")
        values[spec.attr] = _check_value(key, spec, value, where)
    return values


def parse_config(raw: object) -> Config:
    """Validate a decoded config document and build a :class:`Config`."""
    if not isinstance(raw, dict):
        raise ConfigError("the config file must hold a JSON object")
    _reject_secret_keys(raw)
    top = {k: v for k, v in raw.items() if k != "recall"}
    values = _check_section(top, _TOP_KEYS, "")
    recall_raw = raw.get("recall", {})
    if not isinstance(recall_raw, dict):
        raise ConfigError("config key 'recall' must be an object")
    recall = RecallConfig(**_check_section(recall_raw, _RECALL_KEYS, "recall."))
    config = Config(recall=recall, **values)
    if config.breaker_max_ms < config.breaker_base_ms:
        raise ConfigError("config key 'breakerMaxMs' must be at least 'breakerBaseMs'")
    return config


def _read_document(path: Path) -> dict[str, Any] | None:
    """The decoded config document, or None when the file does not exist."""
    document = read_config_file(path, show_key=shown_key)
    if document is not None and not isinstance(document, dict):
        raise ConfigError(f"the config file {path.name} must hold a JSON object")
    return document


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME")
    return Path(home) if home else Path.home()


def _expand(value: str, env: Mapping[str, str]) -> Path:
    if value == "~" or value.startswith("~/"):
        return _home(env) / value[2:]
    return Path(value)


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """The config file qmem reads (it may not exist)."""
    env = os.environ if env is None else env
    explicit = (env.get("QMEM_CONFIG") or "").strip()
    if explicit:
        return _expand(explicit, env)
    xdg = (env.get("XDG_CONFIG_HOME") or "").strip()
    base = Path(xdg) if xdg and os.path.isabs(xdg) else _home(env) / ".config"
    return base / "qmem" / "config.json"


def read_config_document(env: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The config file's JSON object as written (not validated), or None when there is none.

    ``$QMEM_CONFIG`` is an explicit choice: naming a file that does not exist is an error,
    never a silent fall-back to defaults.
    """
    env = os.environ if env is None else env
    path = config_path(env)
    document = _read_document(path)
    if document is None and (env.get("QMEM_CONFIG") or "").strip():
        raise ConfigError(f"QMEM_CONFIG names a config file that does not exist ({path.name}); "
                          f"create it or unset QMEM_CONFIG")
    return document


def load_config(env: Mapping[str, str] | None = None) -> Config:
    """Read and validate the config file; defaults when it does not exist."""
    document = read_config_document(env)
    return parse_config(document) if document is not None else Config()


#: Settings the environment can override, and the variable that does it.
_ENV_OVERRIDES = {"localDbPath": "QMEM_SQLITE"}


def setting_sources(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Where each setting in effect comes from: ``default``, ``file`` or ``environment (VAR)``.

    Keys are the config's camelCase names, dotted for the recall section (``recall.limit``).
    Raises ConfigError like :func:`load_config`.
    """
    env = os.environ if env is None else env
    document = read_config_document(env) or {}
    recall = document.get("recall") if isinstance(document.get("recall"), dict) else {}
    sources = {key: "file" if key in document else "default" for key in _TOP_KEYS}
    sources.update({f"recall.{key}": "file" if key in recall else "default" for key in _RECALL_KEYS})
    for key, variable in _ENV_OVERRIDES.items():
        if (env.get(variable) or "").strip():
            sources[key] = f"environment ({variable})"
    return sources


def resolve_paths(config: Config | None = None, env: Mapping[str, str] | None = None) -> Paths:
    """Resolve every file location from the environment and ``config``."""
    env = os.environ if env is None else env
    config = config if config is not None else Config()
    xdg = (env.get("XDG_DATA_HOME") or "").strip()
    data_dir = (Path(xdg) if xdg and os.path.isabs(xdg) else _home(env) / ".local" / "share") / "qmem"
    database_env = (env.get("QMEM_SQLITE") or "").strip()
    if database_env:
        database = _expand(database_env, env)
    elif config.local_db_path:
        database = _expand(config.local_db_path, env)
    else:
        database = data_dir / "qmem.sqlite"
    breaker_env = (env.get("QMEM_BREAKER_FILE") or "").strip()
    breaker_file = _expand(breaker_env, env) if breaker_env else data_dir / "breaker.json"
    return Paths(config_file=config_path(env), data_dir=data_dir, database=database, breaker_file=breaker_file)


def credential(role: str, env: Mapping[str, str] | None = None) -> str | None:
    """The credential for ``role`` (a key of :data:`CREDENTIAL_VARIABLES`), or None.

    The first variable that holds something other than whitespace wins.
    """
    env = os.environ if env is None else env
    for name in CREDENTIAL_VARIABLES[role]:
        value = env.get(name)
        if value is not None and value.strip():
            return value.strip()
    return None


def recall_host(env: Mapping[str, str] | None = None) -> str | None:
    """Whose curated memories recall uses, for an adapter that cannot tell by itself (the MCP
    server, the Hermes plugin): ``$QMEM_HOST`` when it is set, else the config's ``recall.host``.

    None when neither names ``pi`` or ``prime``, when ``$QMEM_HOST`` holds anything else (an
    invalid identity turns recall off rather than falling back), or when the config cannot be
    read (the runtime reports that itself).
    """
    env = os.environ if env is None else env
    explicit = (env.get("QMEM_HOST") or "").strip()
    if explicit:
        return explicit if explicit in HOST_LANES else None
    try:
        return load_config(env).recall.host
    except ConfigError:
        return None


def credential_variable(role: str) -> str:
    """The preferred environment variable for ``role``, for messages."""
    return CREDENTIAL_VARIABLES[role][0]


def save_config(document: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Config:
    """Validate ``document`` and write it as the config file (atomic, mode 0600)."""
    config = parse_config(dict(document))
    path = config_path(env)
    data = (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    from .files.atomicfile import write_atomic  # here: tempfile and shutil only for a process that writes

    try:
        write_atomic(path, data, mode=0o600)
    except OSError as exc:
        raise ConfigError(f"cannot write the config file {path.name}: {exc.strerror or 'I/O error'}") from None
    return config


def update_config(changes: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Config:
    """Set top-level keys in the config file, keeping everything else; None removes a key."""
    document = _read_document(config_path(env)) or {}
    for key, value in changes.items():
        if value is None:
            document.pop(key, None)
        else:
            document[key] = value
    return save_config(document, env)


def to_document(config: Config) -> dict[str, Any]:
    """The camelCase document for ``config`` (every key, defaults included)."""
    def section(obj: Any, keys: Mapping[str, _Key]) -> dict[str, Any]:
        return {key: getattr(obj, spec.attr) for key, spec in keys.items()}

    document = section(config, _TOP_KEYS)
    document["recall"] = section(config.recall, _RECALL_KEYS)
    return document

