"""What a campaign runs: the seed interval, its split into seed ranges, and the base configuration.

Theory of operation: a campaign is the interval ``[first_seed, first_seed + seeds_count)`` cut into
``partitions`` contiguous :class:`SeedRange` s of near-equal size (sizes differ by at most one).
Each range becomes one Spark partition and one task runs the whole range (``mapPartitions``), so
the scheduler's per-task overhead is paid once per range, not once per seed. The verdict of a seed
depends only on the seed, the base configuration and the code: never on the range it falls in, nor
on the executor that runs it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from spark._errors import CampaignUsageError

#: the module whose ``run_seed(seed, config)`` and ``swarm_config(seed, ...)`` a campaign runs.
DEFAULT_RUNNER = "conformance"

#: seeds per task at most when the partition count is chosen automatically: bounds how long one
#: task runs (and how much work a lost executor costs) on million-seed campaigns.
SEEDS_PER_PARTITION_MAX = 5_000

#: tasks per core when the partition count is chosen automatically: enough to balance seeds whose
#: run times differ, few enough that scheduling stays negligible.
PARTITIONS_PER_CORE = 4

_MASTER_PATTERNS = (
    re.compile(r"local"),
    re.compile(r"local\[(\*|[1-9][0-9]*)\]"),
    re.compile(r"local\[(\*|[1-9][0-9]*),\s*[1-9][0-9]*\]"),
    re.compile(r"local-cluster\[[1-9][0-9]*,\s*[1-9][0-9]*,\s*[1-9][0-9]*\]"),
    re.compile(r"spark://[^\s/:,]+:[0-9]+(,[^\s/:,]+:[0-9]+)*"),
    re.compile(r"yarn"),
    re.compile(r"k8s://(https?://)?[^\s/:]+(:[0-9]+)?"),
)


@dataclass(frozen=True, slots=True)
class SeedRange:
    """The seeds ``first_seed, first_seed + 1, …, stop_seed - 1`` (``stop_seed`` excluded)."""

    first_seed: int
    stop_seed: int

    def __post_init__(self) -> None:
        assert self.stop_seed > self.first_seed, self

    def __len__(self) -> int:
        return self.stop_seed - self.first_seed


@dataclass(frozen=True, slots=True)
class BaseConfig:
    """The simulation size every seed shares; the rest of a run's configuration is drawn from
    its seed by the runner's ``swarm_config``.

    Attributes:
        brokers: brokers in each simulated cluster.
        log_dirs: log directories per broker.
        steps: simulation steps per run.
        variant: the implementation variant to run (``None``: the runner's default, the shipped
            implementation); known-bad variants show what the campaign catches.
    """

    brokers: int = 3
    log_dirs: int = 2
    steps: int = 200
    variant: str | None = None

    def __post_init__(self) -> None:
        for name in ("brokers", "log_dirs", "steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise CampaignUsageError(f"{name.replace('_', '-')} must be >= 1, not {value!r}")
        if self.variant is not None and not re.fullmatch(r"[A-Za-z0-9_]+", self.variant):
            raise CampaignUsageError(f"--variant must be a variant's name, not {self.variant!r}")


@dataclass(frozen=True, slots=True)
class CampaignPlan:
    """Everything that decides a campaign's verdicts (and nothing that decides only its speed,
    except ``partitions``, which a test varies to show that it decides nothing).

    Attributes:
        seeds_count: how many seeds to run (>= 1).
        first_seed: the first seed; seeds are consecutive integers from it.
        base: the configuration shared by every seed.
        runner: the dotted name of the module providing ``run_seed`` and ``swarm_config``.
        partitions: seed ranges (Spark tasks); ``None`` chooses from the cluster's cores.
        shrink_max: failing seeds shrunk at most (the first ones by seed); 0 shrinks none.
    """

    seeds_count: int
    first_seed: int = 0
    base: BaseConfig = BaseConfig()
    runner: str = DEFAULT_RUNNER
    partitions: int | None = None
    shrink_max: int = 20

    def __post_init__(self) -> None:
        if isinstance(self.seeds_count, bool) or self.seeds_count < 1:
            raise CampaignUsageError(f"--seeds must be >= 1, not {self.seeds_count}")
        if self.first_seed < 0:
            raise CampaignUsageError(f"--first-seed must be >= 0, not {self.first_seed}")
        if self.partitions is not None and self.partitions < 1:
            raise CampaignUsageError(f"--partitions must be >= 1, not {self.partitions}")
        if self.shrink_max < 0:
            raise CampaignUsageError(f"--shrink-max must be >= 0, not {self.shrink_max}")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", self.runner):
            raise CampaignUsageError(f"--runner must be a dotted module name, not {self.runner!r}")

    @property
    def stop_seed(self) -> int:
        """One past the last seed of the campaign."""
        return self.first_seed + self.seeds_count


def default_partitions(seeds_count: int, cores: int) -> int:
    """The partition count used when a campaign does not choose one.

    Args:
        seeds_count: seeds in the campaign (>= 1).
        cores: the cluster's parallelism (``SparkContext.defaultParallelism``).

    Returns:
        ``PARTITIONS_PER_CORE`` tasks per core, more when that would put more than
        ``SEEDS_PER_PARTITION_MAX`` seeds in a task, and never more tasks than seeds.
    """
    assert seeds_count >= 1
    by_cores = PARTITIONS_PER_CORE * max(cores, 1)
    wanted = max(by_cores, math.ceil(seeds_count / SEEDS_PER_PARTITION_MAX))
    return min(seeds_count, wanted)


def seed_ranges(first_seed: int, seeds_count: int, partitions: int) -> list[SeedRange]:
    """Cut ``[first_seed, first_seed + seeds_count)`` into contiguous ranges.

    Args:
        first_seed: the first seed.
        seeds_count: how many seeds (>= 1).
        partitions: how many ranges (>= 1); more ranges than seeds gives one seed per range.

    Returns:
        ``min(partitions, seeds_count)`` ranges in seed order whose sizes differ by at most one
        and whose union is exactly the interval.
    """
    assert seeds_count >= 1
    assert partitions >= 1
    count = min(partitions, seeds_count)
    size, extra = divmod(seeds_count, count)
    ranges: list[SeedRange] = []
    start = first_seed
    for index in range(count):
        stop = start + size + (1 if index < extra else 0)
        ranges.append(SeedRange(start, stop))
        start = stop
    assert start == first_seed + seeds_count
    return ranges


def validate_master(master: str) -> str:
    """Check a Spark master URL before any JVM starts.

    Args:
        master: ``local``, ``local[N]``, ``local[*]``, ``local[N,F]``, ``local-cluster[W,C,M]``,
            ``spark://host:port[,host:port…]``, ``yarn`` or ``k8s://[https://]host[:port]``.

    Returns:
        ``master`` unchanged.

    Raises:
        CampaignUsageError: for anything else.
    """
    if any(pattern.fullmatch(master) for pattern in _MASTER_PATTERNS):
        return master
    raise CampaignUsageError(
        f"bad --master {master!r}: expected local[*], local[N], local-cluster[W,C,M], "
        "spark://host:port, yarn or k8s://host:port"
    )


def is_local_master(master: str) -> bool:
    """Whether every executor of ``master`` runs on this machine (local or local-cluster)."""
    return master == "local" or master.startswith(("local[", "local-cluster["))
