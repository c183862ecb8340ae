"""The services one qmem process uses, opened on first use.

A :class:`Runtime` holds the configuration, the resolved paths, the warn-once state and,
lazily, the local index, the outbox and the gateway client.  The CLIs make one per
command; a host bridge or the MCP server makes one per session.  Nothing here does I/O
until a service is asked for, so a process that never searches never opens SQLite, and
nothing is imported before it is needed: a local ``find`` loads neither the gateway client
(nor ``http.client`` and ``ssl``) nor the outbox, and a session that only lists its tools
loads no SQLite.
The recall lane is never given the runtime: :meth:`Runtime.recall_services` hands it a
narrow handle that reaches none of the index, the outbox and the gateway.
"""

from __future__ import annotations

import os
import threading

from . import config as config_mod
from .config import Config, Paths
from .diagnostics import Warnings

TYPE_CHECKING = False
if TYPE_CHECKING:  # each imported where it is opened: a process uses only some of them
    from collections.abc import Mapping
    from typing import Any
    from .breaker import Breaker
    from .clients.gateway import GatewayClient
    from .localindex import LocalIndex
    from .localdb.outbox import Outbox
    from .hosts.recallservices import RecallServices

__all__ = ["Runtime"]


class Runtime:
    def __init__(self, env: Mapping[str, str] | None = None, *, warnings: Warnings | None = None,
                 config: Config | None = None) -> None:
        self.env = os.environ if env is None else env
        self.config = config if config is not None else config_mod.load_config(self.env)
        self.paths: Paths = config_mod.resolve_paths(self.config, self.env)
        self.warnings = warnings or Warnings()
        self._lock = threading.RLock()
        self._index: LocalIndex | None = None
        self._gateway: GatewayClient | None = None

    # -- local side

    @property
    def index(self) -> LocalIndex:
        from .localindex import LocalIndex  # here: SQLite only for a process that reads or writes the index

        with self._lock:
            if self._index is None:
                upgrade = _UpgradeProgress()
                try:
                    self._index = LocalIndex(self.paths.database, progress=upgrade)
                finally:
                    upgrade.finish()
            return self._index

    @property
    def outbox(self) -> Outbox:
        from .localdb.outbox import Outbox  # here: a read of the index needs no outbox

        return Outbox(self.index)

    # -- gateway side

    def breaker_for(self, url: str) -> Breaker:
        from .hosts.recallservices import BreakerFactory  # here: only a process that calls a service needs breakers

        return BreakerFactory.from_config(self.config, self.paths, self.warnings)(url)

    @property
    def gateway(self) -> GatewayClient | None:
        """The gateway client, or None when no ``url`` is configured."""
        with self._lock:
            if self._gateway is None and self.config.url:
                from .clients.gateway import GatewayClient  # here: the HTTP stack, only for a process that calls the gateway

                self._gateway = GatewayClient(
                    self.config.url, config_mod.credential("gateway", self.env),
                    breaker=self.breaker_for(self.config.url),
                    connect_timeout=self.config.connect_timeout_ms / 1000, timeout=self.config.timeout_ms / 1000)
            return self._gateway

    def reload_gateway(self, env: Mapping[str, str] | None = None) -> None:
        """Forget the gateway client (after ``/qmem:config`` changed the URL or the key)."""
        with self._lock:
            if env is not None:
                self.env = env
            self.config = config_mod.load_config(self.env)
            if self._gateway is not None:
                self._gateway.close()
                self._gateway = None

    # -- recall side

    def recall_services(self) -> RecallServices:
        """The recall lane's handle: its settings, its credentials, breakers and the warnings."""
        from .hosts.recallservices import recall_services  # here: only a session that recalls needs it

        return recall_services(self.config, self.paths, self.env, self.warnings)

    def close(self) -> None:
        with self._lock:
            if self._gateway is not None:
                self._gateway.close()
                self._gateway = None
            if self._index is not None:
                self._index.close()
                self._index = None


class _UpgradeProgress:
    """Progress of a schema upgrade that rebuilds the search index, on a terminal only.

    The terminal line (``qmem.cli.frontend.Progress``) is built on the first report: opening an index
    that needs no upgrade — every open but one — does not pay for importing the CLI.
    """

    def __init__(self) -> None:
        self._line: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self._line is None:
            from .cli.frontend import Progress

            self._line = Progress("upgrading the local index")
        self._line(done, total)

    def finish(self) -> None:
        if self._line is not None:
            self._line.finish()
