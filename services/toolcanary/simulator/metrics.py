"""Counters, gauges and latency histograms of the simulator, kept and rendered by prometheus-client.

    curl -s localhost:8300/metrics | grep toolcanary_simulator_calls_total

Per role: calls by outcome, aborts by cause, retries, prompt and completion tokens, latency, rewards; plus
task-cache hits and upstream requests by result; the process's resident memory (psutil), read at each scrape,
which a long run should see flat. Each `Metrics` has its own registry, so that two apps in one process (the
tests) count apart. The text is prometheus-client's Prometheus format 0.0.4: label names sorted, values
as floats (`1.0`), and a `_created` sample beside each counter and histogram, as the library writes them.
"""

from __future__ import annotations

import psutil
from prometheus_client import (
    CONTENT_TYPE_PLAIN_0_0_4,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

PREFIX = "toolcanary_simulator_"
EXPOSITION_CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4  # the format generate_latest writes
LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

# name: (kind, help, label names); `inc` and `set` take these names and exactly these labels.
DECLARED: dict[str, tuple[type[Counter] | type[Gauge], str, tuple[str, ...]]] = {
    "calls_total": (Counter, "Role calls answered, by role, backend and outcome.", ("backend", "outcome", "role")),
    "aborts_total": (Counter, "Aborted role calls, by role and cause.", ("cause", "role")),
    "retries_total": (Counter, "Upstream retries spent, by role.", ("role",)),
    "tokens_total": (Counter, "Upstream tokens, by role and kind (prompt or completion).", ("kind", "role")),
    "rewards_total": (Counter, "Rewards handed out, by role and value.", ("reward", "role")),
    "task_cache_hits_total": (Counter, "Task requests answered from an earlier answer for the same key.", ()),
    "upstream_requests_total": (Counter, "Upstream HTTP requests, by upstream and result.", ("result", "upstream")),
    "tasks_known": (Gauge, "Task keys with a stored task.", ()),
    "tasks_in_memory": (Gauge, "Stored tasks held in memory (the rest are read back from disk when asked for).", ()),
    "in_flight": (Gauge, "Role calls being answered now.", ("role",)),
}


class Metrics:
    """The simulator's metrics in a registry of their own; `render()` is the /metrics body."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.declared = {name: kind(PREFIX + name, text, labels, registry=self.registry)
                         for name, (kind, text, labels) in DECLARED.items()}
        memory = Gauge(f"{PREFIX}resident_memory_bytes", "Resident memory of the simulator process.",
                       registry=self.registry)
        memory.set_function(lambda: psutil.Process().memory_info().rss)
        self._series_by_key: dict[tuple, Counter | Gauge] = {}
        self.latency = Histogram(f"{PREFIX}latency_seconds", "Wall time of a role call, retries included.",
                                 ("role",), buckets=LATENCY_BUCKETS, registry=self.registry)

    def _series(self, name: str, labels: dict[str, str]):
        # Each series looked up once: prometheus-client's `labels()` checks the names on every call, which
        # cost more than the role code's own bookkeeping on the hot path.
        key = (name, *labels.items())
        series = self._series_by_key.get(key)
        if series is None:
            metric = self.declared.get(name)
            if metric is None:
                raise KeyError(f"no simulator metric {name!r}: expected one of {', '.join(DECLARED)}")
            series = self._series_by_key[key] = metric.labels(**labels) if labels else metric
        return series

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        """Add `amount` to a counter (at least 0) or a gauge (any sign)."""
        self._series(name, labels).inc(amount)

    def set(self, name: str, value: float, **labels: str) -> None:
        """Set a gauge."""
        self._series(name, labels).set(value)

    def observe_latency(self, role: str, seconds: float) -> None:
        series = self._series_by_key.get(("latency", role))
        if series is None:
            series = self._series_by_key["latency", role] = self.latency.labels(role=role)
        series.observe(seconds)

    def render(self) -> str:
        return generate_latest(self.registry).decode()
