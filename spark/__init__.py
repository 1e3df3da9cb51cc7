"""PySpark campaigns that run the conformance simulator over many seeds.

A campaign runs ``runner.run_seed(seed, runner.swarm_config(seed, …))`` for every seed of an
interval, as Spark tasks over seed ranges, writes one Parquet row per run, and lists every
failing seed with its replay command (shrunk when the runner can shrink). See ``docs/spark.md``.
"""

from spark._campaign import CampaignListener as CampaignListener
from spark._campaign import CampaignProgress as CampaignProgress
from spark._campaign import SilentListener as SilentListener
from spark._campaign import run_campaign as run_campaign
from spark._campaign import summary_lines as summary_lines
from spark._compiled import FALLBACK_LINE as FALLBACK_LINE
from spark._compiled import CompiledChoice as CompiledChoice
from spark._compiled import check_compiled as check_compiled
from spark._compiled import default_compiled_tree as default_compiled_tree
from spark._compiled import running_digests as running_digests
from spark._compiled import zip_digests as zip_digests
from spark._errors import CampaignError as CampaignError
from spark._errors import CampaignFailedError as CampaignFailedError
from spark._errors import CampaignUsageError as CampaignUsageError
from spark._errors import RunnerUnavailableError as RunnerUnavailableError
from spark._output import CampaignSummary as CampaignSummary
from spark._output import FailingSeed as FailingSeed
from spark._output import check_output as check_output
from spark._output import read_runs as read_runs
from spark._output import run_schema as run_schema
from spark._plan import DEFAULT_RUNNER as DEFAULT_RUNNER
from spark._plan import BaseConfig as BaseConfig
from spark._plan import CampaignPlan as CampaignPlan
from spark._plan import SeedRange as SeedRange
from spark._plan import seed_ranges as seed_ranges
from spark._plan import validate_master as validate_master
from spark._report import CampaignReport as CampaignReport
from spark._report import build_report as build_report
from spark._report import report_lines as report_lines
from spark._runner import RUN_COLUMNS as RUN_COLUMNS
from spark._runner import RunRecord as RunRecord
from spark._runner import ShrinkRecord as ShrinkRecord
from spark._runner import TaskSpec as TaskSpec
from spark._runner import fallback_replay_command as fallback_replay_command
from spark._runner import load_runner as load_runner
from spark._runner import run_one as run_one
from spark._session import CampaignContext as CampaignContext
from spark._session import SparkOptions as SparkOptions
from spark._session import code_version as code_version
from spark._session import open_context as open_context
from spark._session import ship_project as ship_project
from spark._ship import PROJECT_PACKAGES as PROJECT_PACKAGES
from spark._ship import ShippedZip as ShippedZip
from spark._ship import build_zip as build_zip

__all__ = [
    "DEFAULT_RUNNER",
    "FALLBACK_LINE",
    "PROJECT_PACKAGES",
    "RUN_COLUMNS",
    "BaseConfig",
    "CampaignContext",
    "CampaignError",
    "CampaignFailedError",
    "CampaignListener",
    "CampaignPlan",
    "CampaignProgress",
    "CampaignReport",
    "CampaignSummary",
    "CampaignUsageError",
    "CompiledChoice",
    "FailingSeed",
    "RunRecord",
    "RunnerUnavailableError",
    "SeedRange",
    "ShippedZip",
    "ShrinkRecord",
    "SilentListener",
    "SparkOptions",
    "TaskSpec",
    "build_report",
    "build_zip",
    "check_compiled",
    "check_output",
    "code_version",
    "default_compiled_tree",
    "fallback_replay_command",
    "load_runner",
    "open_context",
    "read_runs",
    "report_lines",
    "run_campaign",
    "run_one",
    "run_schema",
    "running_digests",
    "seed_ranges",
    "ship_project",
    "summary_lines",
    "validate_master",
    "zip_digests",
]
