"""What the recall lane is given, and nothing more: its settings, its two credentials, breakers, the warnings
and the recall log (:mod:`qmem.recalllog`: ids and numbers only).

:class:`RecallServices` is built from values — the loaded configuration, the resolved paths,
the environment and the session's warnings — never from the :class:`~qmem.runtime.Runtime`.
No field of it leads to the local index, the outbox, the gateway client or the gateway's
key, so nothing on the recall path can write recalled text anywhere or speak to the
gateway; the isolation tests (``tests/test_lanes.py``) hold it to that.

The runtime builds one per session (``Runtime.recall_services``); anything that only
recalls can build its own with :func:`recall_services`.  :class:`BreakerFactory` is the
breaker capability both lanes share: one state file, one policy, one warnings sink.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from .. import config as config_mod
from ..breaker import Breaker, BreakerPolicy
from ..config import Config, Paths, RecallConfig
from ..diagnostics import Warnings
from ..recalllog import RecallLog
from ..valueclass import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["BreakerFactory", "RecallServices", "recall_services"]

#: The credential roles (keys of :data:`qmem.config.CREDENTIAL_VARIABLES`) the recall lane uses.
RECALL_ROLES = ("qdrant", "embedding")


@dataclass(frozen=True)
class BreakerFactory:
    """Makes the circuit breaker of an endpoint: ``factory(url)``."""

    state_file: Path
    policy: BreakerPolicy
    warnings: Warnings

    @classmethod
    def from_config(cls, config: Config, paths: Paths, warnings: Warnings) -> BreakerFactory:
        # A probe may take a connect and a body timeout, plus slack, before another is let through.
        policy = BreakerPolicy(base_ms=config.breaker_base_ms, max_ms=config.breaker_max_ms,
                               trip_after=config.breaker_trip_after,
                               probe_lease_ms=config.connect_timeout_ms + config.timeout_ms + 5_000)
        return cls(paths.breaker_file, policy, warnings)

    def __call__(self, url: str) -> Breaker:
        return Breaker(self.state_file, url, self.policy, warnings=self.warnings)


@dataclass(frozen=True)
class RecallCredentials:
    """The recall lane's credentials, read from the environment once; ``credentials(role)``.

    Only :data:`RECALL_ROLES` are held: asking for any other role (the gateway's key) is a
    programming error.  The values never appear in a ``repr``.
    """

    values: Mapping[str, str | None] = field(repr=False)

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> RecallCredentials:
        return cls(MappingProxyType({role: config_mod.credential(role, env) for role in RECALL_ROLES}))

    def __call__(self, role: str) -> str | None:
        if role not in RECALL_ROLES:
            raise ValueError(f"the recall lane holds no {role!r} credential")
        return self.values[role]


@dataclass(frozen=True)
class RecallServices:
    """The narrow handle :class:`qmem.recall.Recall` works with."""

    config: RecallConfig
    credential: RecallCredentials
    breaker_for: BreakerFactory
    warnings: Warnings
    log: RecallLog | None = None  # what automatic recall did, ids and numbers only


def recall_services(config: Config, paths: Paths, env: Mapping[str, str], warnings: Warnings) -> RecallServices:
    """The recall handle for one session, from the configuration, the paths and the environment."""
    return RecallServices(config=config.recall, credential=RecallCredentials.from_environment(env),
                          breaker_for=BreakerFactory.from_config(config, paths, warnings), warnings=warnings,
                          log=RecallLog.in_directory(paths.data_dir))
