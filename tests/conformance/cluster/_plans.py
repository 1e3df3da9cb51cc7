"""Seeds' fault plans as they were drawn when the seeds were found."""

from __future__ import annotations

from conformance.cluster_sim import (
    LATER_STREAM_KINDS,
    ClusterConfig,
    ClusterFault,
    plan_faults,
)


def as_found(seed: int, config: ClusterConfig) -> list[ClusterFault]:
    """``seed``'s plan without the ``faults-last-copy``, ``faults-session``,
    ``faults-connection`` and ``faults-malformed`` streams (crashes of the last live in-sync
    copy, session expiries, connection losses and malformed znodes, drawn since): the schedule
    a regression seed was found with, so it still reaches its interleaving."""
    return [f for f in plan_faults(seed, config) if f.kind not in LATER_STREAM_KINDS]
