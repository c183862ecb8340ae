"""The two eras of MCP on one stdio connection: which era a request speaks, and what that era's results carry.

Promises (pure functions, no I/O):

* **Versions.** :data:`HANDSHAKE_VERSIONS` (2024-11-05 … 2025-11-25) are reached through
  ``initialize``; :data:`MODERN_VERSIONS` (2026-07-28) are stateless: every request carries its
  version and the client's capabilities in ``params._meta`` (:func:`read_envelope`), and
  ``server/discover`` tells what the server serves.  Feature gates compare versions through
  :func:`at_least` over :data:`KNOWN_VERSIONS`, so an unknown version is never "newer".
* **One era per connection.** The first era-distinctive request decides, for the connection's
  life (the official SDKs' rule: switching mid-stream is undefined): ``initialize`` opens the
  handshake era, an *accepted* enveloped request opens the modern one; a rejected envelope
  decides nothing, so a failed probe leaves the handshake available.
* **The envelope** (:func:`read_envelope`): ``_meta`` must be an object holding
  ``io.modelcontextprotocol/protocolVersion`` (a string) and ``…/clientCapabilities`` (an
  object) — else -32602 naming what is missing; a version not served is -32022 with
  ``data = {"supported": [...], "requested": ...}``, which is what a client retries from.
* **Modern results** (:func:`modern_result`) carry the required ``resultType: "complete"`` and
  the ``serverInfo`` stamp in ``_meta``; list and discover results carry the required cache
  hints ``ttlMs: 0`` (the tool list follows this user's configuration, so never stale-cached)
  and ``cacheScope: "private"`` (instructions name this machine), and so do resource reads
  (a record can be superseded at any time).
* **Nothing deprecated offered to the modern era**: capabilities hold ``tools`` and read-only
  ``resources`` only — no logging, and qmem never sends a request to a client (no sampling, roots or elicitation);
  ``ping`` and ``initialize`` are not modern methods.
"""

from __future__ import annotations

from ..valueclass import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = []  # the MCP server of this folder is its one user

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS = ("2026-07-28",)
KNOWN_VERSIONS = HANDSHAKE_VERSIONS + MODERN_VERSIONS

HANDSHAKE, MODERN = "handshake", "modern"  # a connection's era, once decided

VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"

INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION = -32602, -32022

#: Modern methods whose results are cacheable and so must carry ``ttlMs`` and ``cacheScope``.
CACHEABLE = frozenset({"server/discover", "tools/list", "resources/list", "resources/templates/list",
                       "resources/read"})


class RpcError(Exception):
    """A request answered with a JSON-RPC error: its code, message and data (a modern envelope
    that cannot be served is one; the server raises it for the others)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


@dataclass(frozen=True)
class Envelope:
    """What a modern request says of itself: its protocol version and the client's capabilities."""

    version: str
    capabilities: dict[str, Any]


def at_least(version: str, minimum: str) -> bool:
    """Whether ``version`` is a known revision no older than ``minimum`` (unknown: never)."""
    if version not in KNOWN_VERSIONS:
        return False
    return KNOWN_VERSIONS.index(version) >= KNOWN_VERSIONS.index(minimum)


def has_envelope(params: Any) -> bool:
    """Whether a request claims the modern era: its ``_meta`` holds the reserved version key.

    Only that key counts (legacy requests carry ``_meta`` too, for a progress token), so a
    half-built envelope still routes modern and is told what it lacks.
    """
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and VERSION_KEY in meta


def unsupported_version(requested: str, supported: tuple[str, ...]) -> RpcError:
    return RpcError(UNSUPPORTED_PROTOCOL_VERSION, f"Unsupported protocol version: {requested[:64]}",
                         {"supported": list(supported), "requested": requested})


def read_envelope(params: dict[str, Any], supported: tuple[str, ...]) -> Envelope:
    """The request's envelope, or :class:`RpcError` (see the module docstring)."""
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise RpcError(INVALID_PARAMS, f"Invalid params: _meta must be an object carrying {VERSION_KEY!r} "
                                            f"and {CAPABILITIES_KEY!r}")
    missing = [key for key in (VERSION_KEY, CAPABILITIES_KEY) if key not in meta]
    if missing:
        raise RpcError(INVALID_PARAMS, f"Invalid params: _meta lacks {', '.join(missing)}")
    version, capabilities = meta[VERSION_KEY], meta[CAPABILITIES_KEY]
    if not isinstance(version, str):
        raise RpcError(INVALID_PARAMS, f"Invalid params: {VERSION_KEY} must be a string")
    if not isinstance(capabilities, dict):
        raise RpcError(INVALID_PARAMS, f"Invalid params: {CAPABILITIES_KEY} must be an object")
    if version not in MODERN_VERSIONS or version not in supported:
        raise unsupported_version(version, supported)
    return Envelope(version, capabilities)


def modern_result(method: str, result: dict[str, Any], server_info: dict[str, Any]) -> dict[str, Any]:
    """``result`` with the fields the modern era requires of it (a new dict)."""
    shaped = dict(result)
    shaped.setdefault("resultType", "complete")
    if method in CACHEABLE:
        shaped.setdefault("ttlMs", 0)
        shaped.setdefault("cacheScope", "private")
    shaped["_meta"] = {SERVER_INFO_KEY: dict(server_info)}
    return shaped
