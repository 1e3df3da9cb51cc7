"""The benchmarks' figures read from a Prometheus endpoint, as an operator would read them.

A benchmark that drives a ``LogManager`` or a controller without a whole broker serves the
broker's own metrics (:class:`impl.broker.metrics.BrokerMetrics` over a
:class:`~impl.broker.metrics.Parts` holding what it drives) on a free loopback port and scrapes
it over HTTP, so the figures it prints are the ones a dashboard of the broker would show.
"""

from __future__ import annotations

import urllib.request
from types import TracebackType

import trio
from prometheus_client.parser import text_string_to_metric_families

from impl.broker.metrics import BrokerMetrics, BrokerStateView, Parts

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape_url(url: str) -> Samples:
    """``url`` (a ``/metrics`` page) as {(sample name, sorted labels): value}."""
    with urllib.request.urlopen(url, timeout=30) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def total(samples: Samples, name: str) -> float:
    """The sum of every sample called ``name`` (over all its label values)."""
    return sum(value for (sample, _), value in samples.items() if sample == name)


class Endpoint:
    """The broker metrics of ``parts`` served on a free loopback port until closed."""

    def __init__(self, parts: Parts) -> None:
        self.metrics = BrokerMetrics(BrokerStateView(parts))
        self.port = self.metrics.start(0, "127.0.0.1")
        self.url = f"http://127.0.0.1:{self.port}/metrics"

    def scrape(self) -> Samples:
        """One scrape, from this thread."""
        return scrape_url(self.url)

    async def scrape_async(self) -> Samples:
        """One scrape from a worker thread (the endpoint's collector reads the state the trio
        run changes; the HTTP exchange must not block it)."""
        return await trio.to_thread.run_sync(self.scrape)

    def close(self) -> None:
        """Stop serving."""
        self.metrics.stop()

    def __enter__(self) -> Endpoint:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()
