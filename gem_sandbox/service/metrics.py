"""Prometheus metrics of one service, in a registry of its own (prometheus-client).

Requests by route and status and their latencies are counted by the app's middleware; runs by
status (``infra_error`` among them) by :class:`.runs.Runs`, which every API runs code through;
the pool's population and counters, the leases and the replays are read from their owners
when scraped, so they can never drift.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from gem_sandbox.service.state import Service

PREFIX = "gem_sandbox"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class Metrics:
    def __init__(self, service: Service) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            f"{PREFIX}_requests", "HTTP requests answered", ["method", "route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            f"{PREFIX}_request_duration_seconds",
            "Time from a request's arrival to its answer",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.runs = Counter(f"{PREFIX}_runs", "Runs answered, by result status", ["status"], registry=self.registry)
        self.rejections = Counter(
            f"{PREFIX}_rejections", "Requests refused, by error type", ["reason"], registry=self.registry
        )
        self.registry.register(_Live(service))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _Live(Collector):
    """What is read from the service's parts at each scrape."""

    def __init__(self, service: Service) -> None:
        self.service = service

    def collect(self) -> Iterator[Metric]:
        stats = self.service.runtime.statistics()
        population = GaugeMetricFamily(f"{PREFIX}_pool_sandboxes", "Sandboxes in the pool, by state", labels=["state"])
        for state in ("idle", "leased", "starting", "recycling"):
            population.add_metric([state], getattr(stats, state))
        yield population
        yield GaugeMetricFamily(f"{PREFIX}_pool_waiting", "Callers waiting for a sandbox", value=stats.waiting)
        for name, doc in (
            ("launched", "Sandboxes launched"),
            ("leases", "Sandboxes handed out"),
            ("waits", "Acquires that had to wait"),
            ("resets", "Resets between tenants"),
            ("clean_returns", "Stateless runs whose sandbox came back clean, without a reset"),
            ("replacements", "Sandboxes replaced after they died or failed a check"),
            ("launch_failures", "Launches that failed"),
            ("acquire_timeouts", "Acquires that gave up waiting"),
        ):
            yield CounterMetricFamily(f"{PREFIX}_pool_{name}", doc, value=getattr(stats, name))
        held = GaugeMetricFamily(f"{PREFIX}_leases", "Sandboxes leased through the API, by token", labels=["token"])
        in_flight = GaugeMetricFamily(f"{PREFIX}_in_flight", "Requests in flight, by token", labels=["token"])
        for tenant in self.service.access.tenants:
            held.add_metric([tenant.name], tenant.leases)
            in_flight.add_metric([tenant.name], tenant.in_flight)
        yield held
        yield in_flight
        yield CounterMetricFamily(f"{PREFIX}_leases_expired", "Leases ended by their TTL", value=self.service.leases.expired)
        yield CounterMetricFamily(
            f"{PREFIX}_idempotent_replays", "Answers repeated for a retried Idempotency-Key", value=self.service.replays.replayed
        )
