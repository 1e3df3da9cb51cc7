"""Running seeds: ``run_seed`` (what a Spark campaign calls), ``swarm_config``, ``shrink``.

A run is ``(code, seed, config) -> RunResult`` and nothing else: no global state is read or
written, the config is a frozen dataclass (picklable), the same seed and config give the same
trace digest on any machine. The only impure thing here is the wall-clock duration, reported
next to the verdict and never part of it.

``brokers > 1`` (a :class:`~conformance.cluster_sim.ClusterConfig`) runs the cluster simulator
(:mod:`conformance.cluster_sim`); one broker runs the move/recovery simulator
(:mod:`conformance.move_sim`). Both give the same :class:`RunResult`.

Shrinking is delta debugging (:func:`conformance.shrink.ddmin`) over the failing run's fault
schedule, with the workload fixed by the seed: the result is the smallest schedule (1-minimal)
that still violates the same invariant, cut at the step the violation happens, printed with the
command that replays exactly it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from conformance import cluster_sim
from conformance.cluster_sim import ClusterConfig, ClusterFault, ClusterOutcome
from conformance.move_abstraction import move_abstractions
from conformance.move_sim import (
    Fault,
    SimConfig,
    SimOutcome,
    plan_faults,
    replay_command,
    simulate,
)
from conformance.rng import SimRng
from conformance.shrink import ddmin
from impl.broker.node import ISR_SCAN_STEP_PARTITIONS

#: A run's configuration: the single-broker move simulator's or the cluster simulator's.
AnyConfig = SimConfig | ClusterConfig
#: A planned fault of either simulator.
AnyFault = Fault | ClusterFault
#: What either simulator returns.
AnyOutcome = SimOutcome | ClusterOutcome

PASS = "pass"
FAIL = "fail"


@dataclass(frozen=True, slots=True)
class RunResult:
    """The verdict on one seed.

    Attributes:
        seed: the seed.
        verdict: ``"pass"`` or ``"fail"``.
        violated_invariant: the invariant (or ``IMPLEMENTATION_ERROR``), ``None`` on a pass.
        message: one paragraph on the violation (``""`` on a pass).
        steps: workload steps run.
        events: trace events emitted.
        events_checked: trace events replayed in a model.
        duration_seconds: wall-clock time of the run (not part of the verdict).
        trace_digest: SHA-256 of the trace's JSON lines (byte-stable).
        replay_command: the command that reproduces the run.
        faults: the fault schedule, as ``--faults`` takes it.
        restarts: crashes the run recovered from.
        moves_done: moves that completed.
    """

    seed: int
    verdict: str
    violated_invariant: str | None
    message: str
    steps: int
    events: int
    events_checked: int
    duration_seconds: float
    trace_digest: str
    replay_command: str
    faults: str
    restarts: int
    moves_done: int

    @property
    def failed(self) -> bool:
        """Whether the run violated something."""
        return self.verdict == FAIL


@dataclass(frozen=True, slots=True)
class ShrinkResult:
    """A failing run reduced to a minimal fault schedule.

    Attributes:
        seed: the seed.
        invariant: the invariant the shrunk run still violates.
        faults: the minimal schedule (``--faults`` form; ``""``: the workload alone fails).
        original_faults: how many faults the run had.
        steps: the workload steps the shrunk run needs (it stops at its violation).
        runs: simulations the shrinker spent.
        description: one line for reports.
        replay_command: replays the shrunk run.
    """

    seed: int
    invariant: str
    faults: str
    original_faults: int
    steps: int
    runs: int
    description: str
    replay_command: str


#: A swarm cluster's ``isr_scan_step_partitions``: a scan in steps of one or two partitions
#: (messages delivered between its steps), or the shipped step, more than a simulated broker
#: leads (the whole scan in one step, as every seed ran before the scan was split).
SWARM_ISR_SCAN_STEPS: tuple[int, ...] = (1, 2, ISR_SCAN_STEP_PARTITIONS)


def swarm_config(
    seed: int, *, brokers: int = 1, log_dirs: int = 3, steps: int = 200, variant: str = "shipped"
) -> AnyConfig:
    """A run's configuration drawn from its seed (swarm testing: each seed its own fault mix).

    Args:
        seed: the seed (its ``swarm`` stream decides partitions, fault rate, chunk and segment
            sizes, and for a cluster whether the network misbehaves; its ``swarm-isr-scan``
            stream how many partitions a step of a broker's ISR scan visits).
        brokers: simulated brokers; more than one runs the cluster simulator.
        log_dirs: log dirs per broker.
        steps: workload steps.
        variant: the implementation variant.

    Returns:
        The frozen config.
    """
    rng = SimRng(seed).stream("swarm")
    if brokers > 1:
        # (a stream of its own: the draws above decide what they did before it was added)
        scan_step = SimRng(seed).stream("swarm-isr-scan").choice(SWARM_ISR_SCAN_STEPS)
        return ClusterConfig(
            brokers=brokers,
            log_dirs=log_dirs,
            steps=steps,
            partitions=rng.randint(1, 3),
            fault_probability=rng.choice((0.0, 0.02, 0.05, 0.1)),
            variant=variant,
            network_faults=rng.chance(0.75),
            segment_bytes=rng.choice((600, 2048, 1 << 20)),
            chunk_bytes=rng.choice((150, 700, 1 << 16)),
            isr_scan_step_partitions=scan_step,
        )
    return SimConfig(
        brokers=brokers,
        log_dirs=log_dirs,
        steps=steps,
        partitions=rng.randint(1, 4),
        fault_probability=rng.choice((0.0, 0.01, 0.03, 0.06)),
        variant=variant,
        segment_bytes=rng.choice((600, 2048, 1 << 20)),
        chunk_bytes=rng.choice((150, 700, 1 << 16)),
    )


def _replay_command(seed: int, config: AnyConfig, faults: Sequence[AnyFault] | None) -> str:
    if isinstance(config, ClusterConfig):
        return cluster_sim.replay_command(seed, config, _cluster_faults(faults))
    return replay_command(seed, config, _move_faults(faults))


def _cluster_faults(faults: Sequence[AnyFault] | None) -> list[ClusterFault] | None:
    if faults is None:
        return None
    assert all(isinstance(f, ClusterFault) for f in faults), "cluster faults expected"
    return [f for f in faults if isinstance(f, ClusterFault)]


def _move_faults(faults: Sequence[AnyFault] | None) -> list[Fault] | None:
    if faults is None:
        return None
    assert all(isinstance(f, Fault) for f in faults), "move simulator faults expected"
    return [f for f in faults if isinstance(f, Fault)]


def _format(faults: Sequence[AnyFault]) -> str:
    return ",".join(fault.spec() for fault in faults)


def _simulate(
    seed: int, config: AnyConfig, faults: Sequence[AnyFault] | None = None, *,
    keep_trace: bool = False,
) -> AnyOutcome:
    if isinstance(config, ClusterConfig):
        return cluster_sim.simulate(seed, config, _cluster_faults(faults), keep_trace=keep_trace)
    return simulate(seed, config, _move_faults(faults), abstractions=move_abstractions,
                    keep_trace=keep_trace)


def _result(
    outcome: AnyOutcome, duration_seconds: float, faults: Sequence[AnyFault] | None
) -> RunResult:
    violation = outcome.violation
    return RunResult(
        seed=outcome.seed,
        verdict=PASS if violation is None else FAIL,
        violated_invariant=None if violation is None else violation.invariant,
        message="" if violation is None else violation.message,
        steps=outcome.steps,
        events=outcome.events,
        events_checked=outcome.trace_verdict.events_checked,
        duration_seconds=duration_seconds,
        trace_digest=outcome.trace_digest,
        replay_command=_replay_command(outcome.seed, outcome.config, faults),
        faults=_format(outcome.faults),
        restarts=outcome.restarts,
        moves_done=outcome.moves_done,
    )


def run_seed(seed: int, config: AnyConfig, faults: Sequence[AnyFault] | None = None
             ) -> RunResult:
    """Simulate one seed with trace checking and end-to-end checks.

    Args:
        seed: decides the run.
        config: its shape (a frozen dataclass; picklable): a :class:`SimConfig` runs the
            single-broker move simulator, a :class:`ClusterConfig` the cluster simulator.
        faults: a fault schedule replacing the seed's (replaying a shrunk run).

    Returns:
        The verdict and its figures.
    """
    started = time.perf_counter()
    outcome = _simulate(seed, config, faults)
    return _result(outcome, time.perf_counter() - started, faults)


def replay(
    seed: int, config: AnyConfig, faults: Sequence[AnyFault] | None = None
) -> tuple[RunResult, AnyOutcome]:
    """:func:`run_seed` keeping the whole trace (for ``logproof conformance replay --trace``)."""
    started = time.perf_counter()
    outcome = _simulate(seed, config, faults, keep_trace=True)
    return _result(outcome, time.perf_counter() - started, faults), outcome


def shrink(seed: int, config: AnyConfig, runs_max: int = 150) -> ShrinkResult:
    """Reduce a failing seed's fault schedule to a 1-minimal one violating the same invariant.

    Args:
        seed: a failing seed.
        config: its config.
        runs_max: bound on the simulations spent.

    Returns:
        The shrunk schedule and its replay command.

    Raises:
        ValueError: the seed does not fail.
    """
    first = _simulate(seed, config)
    if first.violation is None:
        raise ValueError(f"seed {seed} passes: nothing to shrink")
    invariant = first.violation.invariant

    def fails(schedule: Sequence[AnyFault]) -> bool:
        outcome = _simulate(seed, config, schedule)
        return outcome.violation is not None and outcome.violation.invariant == invariant

    planned: list[AnyFault] = list(first.faults)
    shrunk, runs = ddmin(planned, fails, runs_max=runs_max)
    # The run stops at its violation: later steps are never run, so the replay can end there.
    final = _simulate(seed, config, shrunk)
    runs += 1
    if final.violation is not None and final.violation.step + 1 < config.steps:
        shorter = replace(config, steps=final.violation.step + 1)
        kept = [fault for fault in shrunk if fault.step < shorter.steps]
        again = _simulate(seed, shorter, kept)
        runs += 1
        if again.violation is not None and again.violation.invariant == invariant:
            config, shrunk = shorter, kept
    command = _replay_command(seed, config, shrunk)
    listed = _format(shrunk) or "no fault (the workload alone)"
    return ShrinkResult(
        seed=seed,
        invariant=invariant,
        faults=_format(shrunk),
        original_faults=len(first.faults),
        steps=config.steps,
        runs=runs + 1,
        description=f"{invariant} with {len(shrunk)} of {len(first.faults)} faults: {listed}",
        replay_command=command,
    )


def default_faults(seed: int, config: AnyConfig) -> tuple[AnyFault, ...]:
    """The fault schedule the seed plans (for display)."""
    if isinstance(config, ClusterConfig):
        return cluster_sim.plan_faults(seed, config)
    return plan_faults(seed, config)


def with_variant(config: AnyConfig, variant: str) -> AnyConfig:
    """``config`` running another implementation variant."""
    return replace(config, variant=variant)
