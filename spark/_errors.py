"""The errors a campaign raises, typed by blame.

``CampaignUsageError`` is the caller's mistake (a bad seed count, a bad master URL, an output
directory that cannot be used); ``RunnerUnavailableError`` means the per-seed runner named by the
campaign cannot be imported or lacks a function the campaign needs. A failing *seed* is never an
exception: it is a row with verdict ``fail`` (or ``error`` when the runner itself raised).
"""

from __future__ import annotations


class CampaignError(Exception):
    """Base class of every campaign error; its message is one line for the user."""


class CampaignUsageError(CampaignError):
    """The campaign was asked for something impossible: the caller must change the request."""


class RunnerUnavailableError(CampaignError):
    """The per-seed runner module cannot be imported or lacks a required function."""


class CampaignFailedError(CampaignError):
    """Spark or an executor failed (a task exhausted its retries, the cluster went away): the
    campaign stopped before every seed ran. Rows already written stay in the output directory."""
