"""The host commands ``/qmem:config`` and ``/qmem:local``: arguments in, the text to show out.

* ``/qmem:config`` — a menu through the host's UI, or quick mode ``url <URL> | apikey <KEY> |
  test | show``.  The URL is saved to the config file (mode 0600); the API key is set in the
  session's environment for this process only and never written to a file; ``test`` probes
  the gateway (resetting its breaker: an explicit test is deliberate); ``show`` prints the
  configuration and which credentials are set, never their values.
* ``/qmem:local`` — the subcommands of ``python3 -m qmem.local``, sharing its code.
* :class:`HostUI` is what a host lets a command do; :class:`NoUI` (every call a no-op) is the
  host without one, where the menu cancels.
"""

from __future__ import annotations

import json
import shlex
from typing import Protocol

from .. import config as config_mod
from ..clients.gateway import GatewayRefused, GatewayUnavailable
from ..errors import ConfigError
from ..runtime import Runtime

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import MutableMapping

__all__ = []

USAGE = "usage: /qmem:config [url <URL> | apikey <KEY> | test | show]"


class HostUI(Protocol):
    """What a host lets a command do; every method is a no-op without a UI."""

    def select(self, title: str, options: list[str]) -> str | None: ...
    def input(self, title: str, placeholder: str = "") -> str | None: ...
    def confirm(self, title: str, message: str) -> bool: ...
    def notify(self, message: str, level: str = "info") -> None: ...


class NoUI:
    def select(self, title: str, options: list[str]) -> str | None:
        return None

    def input(self, title: str, placeholder: str = "") -> str | None:
        return None

    def confirm(self, title: str, message: str) -> bool:
        return False

    def notify(self, message: str, level: str = "info") -> None:
        pass


class ConfigurableSession(Protocol):
    """What ``/qmem:config`` needs of a session (:class:`qmem.hosts.session.PluginSession` is one)."""

    env: MutableMapping[str, str]

    @property
    def runtime(self) -> Runtime: ...

    def reload_gateway(self) -> None:
        """Forget the gateway client after the URL or the key changed (opens nothing)."""


def config_command(session: ConfigurableSession, args: str, ui: HostUI) -> str:
    """``/qmem:config [args]``: the menu without arguments, quick mode with them."""
    words = args.split(None, 1)
    action = words[0].lower() if words else ""
    value = words[1].strip() if len(words) > 1 else None
    if not action:
        choice = ui.select("qmem configuration", [
            "Set gateway URL", "Set API key (this process only)", "Test connection", "Show configuration",
            "Cancel"])
        action = {"Set gateway URL": "url", "Set API key (this process only)": "apikey",
                  "Test connection": "test", "Show configuration": "show"}.get(choice or "", "cancel")
    if action == "url":
        value = value or ui.input("Memory Gateway URL", "https://gateway.example")
        return _set_url(session, value) if value else "cancelled"
    if action == "apikey":
        value = value or ui.input("Memory Gateway API key (kept for this process only)", "")
        return _set_key(session, value) if value else "cancelled"
    if action == "test":
        return _test_connection(session)
    if action == "show":
        return _show(session.env)
    if action == "cancel":
        return "cancelled"
    return USAGE


def _set_url(session: ConfigurableSession, url: str) -> str:
    try:
        config_mod.update_config({"url": url.strip()}, session.env)
    except ConfigError as exc:
        return f"not saved: {exc.message}"
    session.reload_gateway()
    return "gateway URL saved to the config file (mode 0600)"


def _set_key(session: ConfigurableSession, key: str) -> str:
    session.env["QMEM_GATEWAY_API_KEY"] = key.strip()
    session.reload_gateway()
    return ("API key set for this process only (not written anywhere). To keep it, add "
            "`export QMEM_GATEWAY_API_KEY=…` to your shell profile or your secret manager's environment.")


def _test_connection(session: ConfigurableSession) -> str:
    try:
        runtime = session.runtime
    except ConfigError as exc:
        return f"configuration problem: {exc.message}"
    gateway = runtime.gateway
    if gateway is None:
        return "no gateway URL is configured: /qmem:config url <URL>"
    gateway.breaker.reset()  # an explicit test is a deliberate probe
    try:
        status = gateway.status()
    except GatewayRefused as exc:
        return f"the gateway answers, but {exc.message}"
    except GatewayUnavailable as exc:
        return f"the gateway is unreachable: {exc.message}"
    version = status.get("version") if isinstance(status, dict) else None
    key = "accepted" if config_mod.credential("gateway", session.env) is not None else "not set"
    return f"connected: Memory Gateway {version or '(unknown version)'}; API key {key}"


def _show(env: MutableMapping[str, str]) -> str:
    try:
        document = config_mod.to_document(config_mod.load_config(env))
    except ConfigError as exc:
        return f"configuration problem: {exc.message}"
    keys = {role: ("set" if config_mod.credential(role, env) else "not set")
            for role in ("gateway", "qdrant", "embedding")}
    document["credentials (environment)"] = {config_mod.credential_variable(role): state
                                             for role, state in keys.items()}
    from ..secretscan.audit import hide_flagged  # here, not at the top: only `show` audits the settings

    return json.dumps(hide_flagged(document), indent=2)  # a token pasted into a non-secret field


def local_command(env: MutableMapping[str, str], args: str) -> str:
    """``/qmem:local [args]``: a ``python3 -m qmem.local`` subcommand (``status`` without one)."""
    # Imported on use: the CLI (argparse, session import) is not needed to answer hooks and
    # tools, and leaving it out halves the bridge's start-up.
    from .. import local as local_cli

    try:
        argv = shlex.split(args)
    except ValueError as exc:
        return f"qmem:local: {exc}"
    outcome = local_cli.run(argv or ["status"], env=env)
    text = outcome.stdout.rstrip("\n")
    if outcome.error:
        text = (text + "\n" if text else "") + f"qmem:local: {outcome.error}"
    return text
