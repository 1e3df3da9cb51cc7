"""The reassignment machine (design V3 §F, Kafka's ``onPartitionReassignment``, KIP-113 §2).

One partition moves from its original replicas (OAR) to the target replicas (RAR):

1. ADDING: AR := RAR + OAR (RAR first so the preferred leader is RAR's), written to
   ``/brokers/topics/<t>`` with ``adding_replicas``/``removing_replicas`` and a leader epoch bump,
   then LeaderAndIsr to every replica (``is_new`` for the added ones, with the requested log dir).
2. CATCHING_UP: wait until RAR ⊆ ISR (the leader adds caught-up followers; the controller hears
   of it through ``/isr_change_notification``).
3. SWITCHED: a leader in RAR (the current one if it is in RAR), ISR := ISR ∩ RAR, and
   AR := RAR, all in one conditional ``multi``. ``REASSIGN_SAFE``: AR switches only when
   RAR ⊆ ISR, and no replica of RAR is dropped.
4. REMOVING: StopReplica(delete) to OAR - RAR.
5. DONE: the partition's entry leaves ``/admin/reassign_partitions``.

Every step is decided from what ZooKeeper holds (AR, adding/removing, ISR), never from memory
alone, so a new controller resumes a reassignment exactly where the old one stopped
(:func:`classify`): ZooKeeper is written before anything is sent, and AR := RAR is written last.

This module is sans-IO.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from .requests import NO_LEADER

__sans_io__ = True


class ReassignmentPhase(enum.Enum):
    """Where one partition's reassignment stands."""

    NONE = "none"  #: §F 1.1: the partition is listed but AR does not contain RAR yet
    ADDING = "adding"  #: §F 2.1: AR := RAR + OAR written; LeaderAndIsr to the new replicas
    CATCHING_UP = "catching_up"  #: §F 3.1: waiting until RAR ⊆ ISR
    SWITCHED = "switched"  #: §F 3.2.2-3.2.5: leader in RAR, ISR ∩ RAR, AR := RAR written
    REMOVING = "removing"  #: §F 3.2.4: StopReplica(delete) to OAR - RAR
    DONE = "done"  #: §F 3.2.6: the entry removed from /admin/reassign_partitions


class ReassignmentEvent(enum.Enum):
    """What moves a reassignment on (the controller's event names, spec/VOCABULARY.md)."""

    REASSIGN_STARTED = "reassign_started"  #: §F 2.1: AR + RAR written
    LEADER_ELECTED = "leader_elected"  #: §F 2.1 / 3.2.3: LeaderAndIsr sent for the new AR
    ISR_CHANGED = "isr_changed"  #: §F 3.2: the ISR changed (maybe RAR ⊆ ISR now)
    REASSIGN_COMPLETED = "reassign_completed"  #: §F 3.2.4 / 3.2.6: old replicas stopped; done


class ReassignmentTransitionError(RuntimeError):
    """A (phase, event) pair the table does not allow: a controller bug."""


#: The reassignment machine's transition table.
REASSIGNMENT_TRANSITIONS: Mapping[
    tuple[ReassignmentPhase, ReassignmentEvent], ReassignmentPhase
] = MappingProxyType(
    {
        (ReassignmentPhase.NONE, ReassignmentEvent.REASSIGN_STARTED): ReassignmentPhase.ADDING,
        (ReassignmentPhase.ADDING, ReassignmentEvent.LEADER_ELECTED): (
            ReassignmentPhase.CATCHING_UP
        ),
        (ReassignmentPhase.CATCHING_UP, ReassignmentEvent.ISR_CHANGED): (
            ReassignmentPhase.CATCHING_UP
        ),
        (ReassignmentPhase.CATCHING_UP, ReassignmentEvent.LEADER_ELECTED): (
            ReassignmentPhase.SWITCHED
        ),
        (ReassignmentPhase.SWITCHED, ReassignmentEvent.REASSIGN_COMPLETED): (
            ReassignmentPhase.REMOVING
        ),
        (ReassignmentPhase.REMOVING, ReassignmentEvent.REASSIGN_COMPLETED): (
            ReassignmentPhase.DONE
        ),
    }
)


def step(phase: ReassignmentPhase, event: ReassignmentEvent) -> ReassignmentPhase:
    """The phase after ``event``.

    Raises:
        ReassignmentTransitionError: the table has no entry for ``(phase, event)``.
    """
    try:
        return REASSIGNMENT_TRANSITIONS[(phase, event)]
    except KeyError:
        raise ReassignmentTransitionError(f"no reassignment transition {phase.name} --"
                                          f"{event.name}-->") from None


@dataclass(frozen=True, slots=True)
class PartitionView:
    """What ZooKeeper holds about one partition under reassignment.

    Attributes:
        replicas: AR as written in ``/brokers/topics/<t>``.
        adding, removing: the topic znode's ``adding_replicas``/``removing_replicas``.
        isr, leader: from the partition's state znode.
    """

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int


def classify(view: PartitionView, target: Sequence[int]) -> ReassignmentPhase:
    """The phase a partition is in, from ZooKeeper's state alone (resumable after failover).

    Returns:
        NONE (AR lacks part of RAR: write AR + RAR), CATCHING_UP (RAR ⊄ ISR: wait),
        SWITCHED-ready is reported as CATCHING_UP's successor by :func:`ready_to_switch`, and
        DONE (AR == RAR with nothing adding or removing).
    """
    if tuple(view.replicas) == tuple(target) and not view.adding and not view.removing:
        return ReassignmentPhase.DONE
    if not set(target) <= set(view.replicas):
        return ReassignmentPhase.NONE
    return ReassignmentPhase.CATCHING_UP


def ready_to_switch(view: PartitionView, target: Sequence[int]) -> bool:
    """True when every target replica is in the ISR (``REASSIGN_SAFE``'s guard)."""
    return set(target) <= set(view.replicas) and set(target) <= set(view.isr)


def expanded_assignment(
    view: PartitionView, target: Sequence[int]
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """AR + RAR for the ADDING phase.

    Returns:
        ``(replicas, adding, removing)``: RAR followed by the original replicas not in RAR, the
        replicas new to the partition, and the original replicas RAR drops.
    """
    original = original_replicas(view)
    replicas = tuple(target) + tuple(r for r in original if r not in target)
    adding = tuple(r for r in target if r not in original)
    removing = tuple(r for r in original if r not in target)
    return replicas, adding, removing


def original_replicas(view: PartitionView) -> tuple[int, ...]:
    """OAR: AR without the replicas a reassignment in progress is adding."""
    return tuple(r for r in view.replicas if r not in view.adding)


def switched_leader_isr(
    view: PartitionView, target: Sequence[int], eligible: Collection[int]
) -> tuple[int, tuple[int, ...]]:
    """The leader and ISR after AR := RAR.

    Args:
        view: the partition now (RAR ⊆ ISR must hold).
        target: RAR.
        eligible: replicas that may lead (live, not on an offline log dir).

    Returns:
        ``(leader, isr)``: the current leader if it is in RAR and eligible, else the first
        eligible RAR member of the ISR, else ``NO_LEADER``; the ISR restricted to RAR.
    """
    assert ready_to_switch(view, target), "REASSIGN_SAFE: switching before RAR ⊆ ISR"
    isr = tuple(r for r in view.isr if r in target)
    if view.leader in target and view.leader in eligible:
        return view.leader, isr
    for replica in target:
        if replica in isr and replica in eligible:
            return replica, isr
    return NO_LEADER, isr
