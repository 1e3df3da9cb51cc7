"""Conformance: simulated ports, the deterministic simulator, trace checking.

Everything a simulated run touches derives from one seed (:class:`SimRng` and its named streams);
every fake states its fault model at the top of its module.
"""

from conformance.clock import SimClock as SimClock
from conformance.disk import DiskStatistics as DiskStatistics
from conformance.disk import SimDisk as SimDisk
from conformance.disk import SimFileSlice as SimFileSlice
from conformance.disk import SimulatedCrash as SimulatedCrash
from conformance.network import Delivery as Delivery
from conformance.network import NetworkFaults as NetworkFaults
from conformance.network import NetworkStatistics as NetworkStatistics
from conformance.network import SimNetwork as SimNetwork
from conformance.rng import SimRng as SimRng
from conformance.rng import derive_seed as derive_seed

__all__ = [
    "Delivery",
    "DiskStatistics",
    "NetworkFaults",
    "NetworkStatistics",
    "SimClock",
    "SimDisk",
    "SimFileSlice",
    "SimNetwork",
    "SimRng",
    "SimulatedCrash",
    "derive_seed",
]
