"""What every admin command is given: the environment, the configuration, its Qdrant clients, a progress sink.

:class:`AdminContext` builds each client with the credential of its side, read from the
environment only (``QMEM_ADMIN_QDRANT_API_KEY`` for the destination,
``QMEM_SOURCE_QDRANT_API_KEY`` for a Hermes source), and the configured timeouts.  Only
:mod:`qmem.admin` and the admin commands use this module.
"""

from __future__ import annotations

from .. import config as config_mod
from ..config import RecallConfig
from ..errors import ConfigError
from ..runtime import Runtime
from ..valueclass import dataclass
from .qdrant import AdminQdrant, SourceProjection

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["AdminContext"]


@dataclass(frozen=True)
class AdminContext:
    """What every command needs: the environment, the configuration and a progress sink."""

    runtime: Runtime
    progress: Callable[[str], None]

    @property
    def env(self) -> Mapping[str, str]:
        return self.runtime.env

    @property
    def recall(self) -> RecallConfig:
        return self.runtime.config.recall

    def timeouts(self) -> dict[str, float]:
        c = self.runtime.config
        return {"connect_timeout": c.connect_timeout_ms / 1000, "body_timeout": c.timeout_ms / 1000}

    def destination(self) -> AdminQdrant:
        if self.recall.qdrant_url is None:
            raise ConfigError("the admin CLI writes to the recall collection: set recall.qdrantUrl in the config file")
        return AdminQdrant(self.recall.qdrant_url, self.recall.collection,
                           api_key=config_mod.credential("admin_qdrant", self.env), **self.timeouts())

    def source(self, url: str, collection: str) -> SourceProjection:
        return SourceProjection(url, collection, api_key=config_mod.credential("source_qdrant", self.env),
                                **self.timeouts())


def key_state(role: str, env: Mapping[str, str]) -> str:
    """``"present"`` or ``"absent"``: all that is ever said about a credential."""
    return "present" if config_mod.credential(role, env) else "absent"
