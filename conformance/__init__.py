"""Conformance: simulated ports, the deterministic simulator, trace checking.

Everything a simulated run touches derives from one seed (:class:`SimRng` and its named streams);
every fake states its fault model at the top of its module. A campaign calls
``run_seed(seed, swarm_config(seed, brokers=…, log_dirs=…, steps=…))`` per seed and
``shrink(seed, config)`` for a failing one.
"""

from conformance.clock import SimClock as SimClock
from conformance.disk import DiskStatistics as DiskStatistics
from conformance.disk import SimDisk as SimDisk
from conformance.disk import SimFileSlice as SimFileSlice
from conformance.disk import SimulatedCrash as SimulatedCrash
from conformance.move_sim import Fault as Fault
from conformance.move_sim import SimConfig as SimConfig
from conformance.move_sim import SimOutcome as SimOutcome
from conformance.move_sim import simulate as simulate
from conformance.network import Delivery as Delivery
from conformance.network import NetworkFaults as NetworkFaults
from conformance.network import NetworkStatistics as NetworkStatistics
from conformance.network import SimNetwork as SimNetwork
from conformance.rng import SimRng as SimRng
from conformance.rng import derive_seed as derive_seed
from conformance.runner import RunResult as RunResult
from conformance.runner import ShrinkResult as ShrinkResult
from conformance.runner import replay as replay
from conformance.runner import run_seed as run_seed
from conformance.runner import shrink as shrink
from conformance.runner import swarm_config as swarm_config
from conformance.shrink import ddmin as ddmin
from conformance.trace_check import Abstraction as Abstraction
from conformance.trace_check import ExecutableModel as ExecutableModel
from conformance.trace_check import MemoizedModel as MemoizedModel
from conformance.trace_check import ModelAction as ModelAction
from conformance.trace_check import TraceChecker as TraceChecker
from conformance.trace_check import TraceVerdict as TraceVerdict
from conformance.trace_check import TraceViolation as TraceViolation
from conformance.trace_check import check_trace as check_trace
from conformance.trace_check import parse_trace_line as parse_trace_line

__all__ = [
    "Abstraction",
    "Delivery",
    "DiskStatistics",
    "ExecutableModel",
    "Fault",
    "MemoizedModel",
    "ModelAction",
    "NetworkFaults",
    "NetworkStatistics",
    "RunResult",
    "ShrinkResult",
    "SimClock",
    "SimConfig",
    "SimDisk",
    "SimFileSlice",
    "SimNetwork",
    "SimOutcome",
    "SimRng",
    "SimulatedCrash",
    "TraceChecker",
    "TraceVerdict",
    "TraceViolation",
    "check_trace",
    "ddmin",
    "derive_seed",
    "parse_trace_line",
    "replay",
    "run_seed",
    "shrink",
    "simulate",
    "swarm_config",
]
