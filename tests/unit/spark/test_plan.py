"""Seed ranges, partition counts and master URLs: pure functions, no Spark."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark import (
    BaseConfig,
    CampaignPlan,
    CampaignUsageError,
    SeedRange,
    seed_ranges,
    validate_master,
)
from spark._campaign import ROWS_PER_JOB_MAX, group_partitions
from spark._plan import SEEDS_PER_PARTITION_MAX, default_partitions, is_local_master


@given(
    first_seed=st.integers(min_value=0, max_value=10**12),
    seeds_count=st.integers(min_value=1, max_value=5_000),
    partitions=st.integers(min_value=1, max_value=300),
)
def test_seed_ranges_cover_the_interval_exactly(
    first_seed: int, seeds_count: int, partitions: int
) -> None:
    ranges = seed_ranges(first_seed, seeds_count, partitions)
    assert len(ranges) == min(partitions, seeds_count)
    assert ranges[0].first_seed == first_seed
    assert ranges[-1].stop_seed == first_seed + seeds_count
    for before, after in itertools.pairwise(ranges):
        assert before.stop_seed == after.first_seed
    sizes = [len(seed_range) for seed_range in ranges]
    assert max(sizes) - min(sizes) <= 1
    assert sum(sizes) == seeds_count


def test_seed_ranges_small_example() -> None:
    assert seed_ranges(10, 7, 3) == [SeedRange(10, 13), SeedRange(13, 15), SeedRange(15, 17)]


def test_empty_seed_range_is_refused() -> None:
    with pytest.raises(AssertionError):
        SeedRange(5, 5)


def test_default_partitions() -> None:
    assert default_partitions(1, 8) == 1
    assert default_partitions(100, 2) == 8
    assert default_partitions(10**6, 2) == 10**6 // SEEDS_PER_PARTITION_MAX
    assert default_partitions(10**6, 1000) == 4000


@given(
    partitions=st.integers(min_value=1, max_value=2_000),
    jobs=st.integers(min_value=1, max_value=64),
    cores=st.integers(min_value=1, max_value=4_000),
)
def test_partition_groups_are_consecutive_cover_and_keep_the_cores_busy(
    partitions: int, jobs: int, cores: int
) -> None:
    groups = group_partitions(partitions, jobs, cores)
    assert [index for group in groups for index in group] == list(range(partitions))
    assert all(group for group in groups)
    in_flight = sum(len(group) for group in groups[:jobs])
    assert in_flight >= min(2 * cores, partitions)


def test_partition_groups_are_single_partitions_on_a_small_machine() -> None:
    assert group_partitions(200, 4, 2) == [[index] for index in range(200)]


def test_partition_groups_bound_the_rows_per_job() -> None:
    # 4,000 cores, 32 jobs in flight: 250 partitions a job, unless that is too many rows
    assert len(group_partitions(16_000, 32, 4_000, seeds_per_partition_max=1)[0]) == 250
    groups = group_partitions(16_000, 32, 4_000, seeds_per_partition_max=5_000)
    assert max(len(group) for group in groups) * 5_000 <= ROWS_PER_JOB_MAX


@pytest.mark.parametrize(
    "master",
    [
        "local",
        "local[*]",
        "local[2]",
        "local[4,3]",
        "local-cluster[2,1,1024]",
        "spark://head:7077",
        "spark://a:7077,b:7077",
        "yarn",
        "k8s://https://api.example:6443",
    ],
)
def test_good_masters(master: str) -> None:
    assert validate_master(master) == master


@pytest.mark.parametrize(
    "master",
    ["", "locale", "local[0]", "local[x]", "spark://nohost", "mesos://h:5050", "http://h:1"],
)
def test_bad_masters(master: str) -> None:
    with pytest.raises(CampaignUsageError, match="bad --master"):
        validate_master(master)


def test_local_masters() -> None:
    assert is_local_master("local[2]")
    assert is_local_master("local-cluster[2,1,1024]")
    assert not is_local_master("spark://h:7077")
    assert not is_local_master("yarn")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"seeds_count": 0}, "--seeds must be >= 1"),
        ({"seeds_count": 5, "first_seed": -1}, "--first-seed"),
        ({"seeds_count": 5, "partitions": 0}, "--partitions"),
        ({"seeds_count": 5, "shrink_max": -1}, "--shrink-max"),
        ({"seeds_count": 5, "runner": "not a module"}, "--runner"),
    ],
)
def test_bad_plans(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(CampaignUsageError, match=message):
        CampaignPlan(**arguments)  # type: ignore[arg-type]


def test_bad_base_config() -> None:
    with pytest.raises(CampaignUsageError, match="log-dirs must be >= 1"):
        BaseConfig(brokers=3, log_dirs=0, steps=10)
