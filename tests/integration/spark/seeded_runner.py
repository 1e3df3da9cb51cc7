"""A deterministic stand-in runner for testing the campaign machinery, not a simulator.

It has the runner interface a campaign calls (``swarm_config``, ``run_seed``, ``shrink``) and a
rule for its verdicts that tests can compute on their own: seeds ``≡ 3 (mod 17)`` violate
``LEADER_UNIQUE``, seeds ``≡ 7 (mod 53)`` make it raise (a crashing simulator), every other seed
passes. Each run is a seeded random walk of ``config.steps`` events whose digest depends on the
seed and on the configuration drawn from it, so digests show whether two runs of a seed agree.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

FAILING_MODULUS, FAILING_REMAINDER = 17, 3
RAISING_MODULUS, RAISING_REMAINDER = 53, 7


def expected_verdict(seed: int) -> str:
    """The verdict this runner gives ``seed`` (how tests know the answer independently)."""
    if seed % RAISING_MODULUS == RAISING_REMAINDER:
        return "error"
    if seed % FAILING_MODULUS == FAILING_REMAINDER:
        return "fail"
    return "pass"


@dataclass(frozen=True, slots=True)
class WalkConfig:
    """A run's configuration: the base sizes plus a fault rate drawn from the seed."""

    brokers: int
    log_dirs: int
    steps: int
    fault_rate_percent: int


@dataclass(frozen=True, slots=True)
class WalkResult:
    """The result fields a campaign reads."""

    verdict: str
    violated_invariant: str | None
    steps: int
    events: int
    trace_digest: str
    replay_command: str


@dataclass(frozen=True, slots=True)
class WalkShrunk:
    """What shrinking a failing walk gives."""

    description: str
    replay_command: str
    faults: tuple[str, ...]


def swarm_config(seed: int, *, brokers: int, log_dirs: int, steps: int) -> WalkConfig:
    """Draw the fault rate from the seed (its own stream, so it does not shift the walk)."""
    rate = random.Random(f"swarm/{seed}").randrange(0, 50)
    return WalkConfig(brokers, log_dirs, steps, rate)


def run_seed(seed: int, config: WalkConfig) -> WalkResult:
    """Walk ``config.steps`` steps from ``seed``; raise or fail as :func:`expected_verdict` says."""
    if expected_verdict(seed) == "error":
        raise AssertionError(f"walk invariant broken at seed {seed}")
    rng = random.Random(seed)
    digest = hashlib.blake2b(digest_size=16)
    events = 0
    for step in range(config.steps):
        broker = rng.randrange(config.brokers)
        log_dir = rng.randrange(config.log_dirs)
        fault = rng.randrange(100) < config.fault_rate_percent
        digest.update(f"{step}:{broker}:{log_dir}:{fault};".encode())
        events += 2 if fault else 1
    failing = expected_verdict(seed) == "fail"
    return WalkResult(
        verdict="fail" if failing else "pass",
        violated_invariant="LEADER_UNIQUE" if failing else None,
        steps=config.steps,
        events=events,
        trace_digest=digest.hexdigest(),
        replay_command=f"walk-replay --seed {seed}",
    )


def shrink(seed: int, config: WalkConfig) -> WalkShrunk:
    """Pretend that one crash of one broker suffices (deterministic in the seed)."""
    fault = f"crash broker {seed % config.brokers}"
    return WalkShrunk(f"1 fault: {fault}", f"walk-replay --seed {seed} --faults 1", (fault,))
