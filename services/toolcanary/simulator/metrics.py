"""Counters and latency histograms of the simulator, rendered in the Prometheus text format (version 0.0.4).

    curl -s localhost:8300/metrics | grep toolcanary_simulator_calls_total

Per role: calls by outcome, aborts by cause, retries, prompt and completion tokens, latency, rewards; plus
task-cache hits and upstream requests by result; the process's resident memory (psutil), read at each scrape,
which a long run should see flat. Written here rather than with prometheus_client to keep the service's
dependencies to what the image already has; the event loop is single-threaded, so no locks.
"""

from __future__ import annotations

from collections import defaultdict

import psutil

PREFIX = "toolcanary_simulator_"
LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

_HELP = {
    "calls_total": ("counter", "Role calls answered, by role, backend and outcome."),
    "aborts_total": ("counter", "Aborted role calls, by role and cause."),
    "retries_total": ("counter", "Upstream retries spent, by role."),
    "tokens_total": ("counter", "Upstream tokens, by role and kind (prompt or completion)."),
    "rewards_total": ("counter", "Rewards handed out, by role and value."),
    "task_cache_hits_total": ("counter", "Task requests answered from an earlier answer for the same key."),
    "upstream_requests_total": ("counter", "Upstream HTTP requests, by upstream and result."),
    "tasks_known": ("gauge", "Task keys with a stored task."),
    "tasks_in_memory": ("gauge", "Stored tasks held in memory (the rest are read back from disk when asked for)."),
    "resident_memory_bytes": ("gauge", "Resident memory of the simulator process."),
    "in_flight": ("gauge", "Role calls being answered now."),
}


def _labels(labels: tuple[tuple[str, str], ...]) -> str:
    if not labels:
        return ""
    body = ",".join(f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
                    for k, v in labels)
    return "{" + body + "}"


class Metrics:
    def __init__(self) -> None:
        self.values: dict[str, dict[tuple[tuple[str, str], ...], float]] = defaultdict(lambda: defaultdict(float))
        self.latency: dict[str, list[int]] = {}
        self.latency_sum: dict[str, float] = defaultdict(float)
        self.latency_count: dict[str, int] = defaultdict(int)

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        self.values[name][tuple(sorted(labels.items()))] += amount

    def set(self, name: str, value: float, **labels: str) -> None:
        self.values[name][tuple(sorted(labels.items()))] = value

    def get(self, name: str, **labels: str) -> float:
        return self.values.get(name, {}).get(tuple(sorted(labels.items())), 0.0)

    def observe_latency(self, role: str, seconds: float) -> None:
        counts = self.latency.setdefault(role, [0] * len(LATENCY_BUCKETS))
        for index, bound in enumerate(LATENCY_BUCKETS):
            if seconds <= bound:
                counts[index] += 1
        self.latency_sum[role] += seconds
        self.latency_count[role] += 1

    def render(self) -> str:
        self.set("resident_memory_bytes", psutil.Process().memory_info().rss)
        lines: list[str] = []
        for name, (kind, text) in _HELP.items():
            lines += [f"# HELP {PREFIX}{name} {text}", f"# TYPE {PREFIX}{name} {kind}"]
            for labels, value in sorted(self.values.get(name, {}).items()):
                lines.append(f"{PREFIX}{name}{_labels(labels)} {value:g}")
        name = f"{PREFIX}latency_seconds"
        lines += [f"# HELP {name} Wall time of a role call, retries included.", f"# TYPE {name} histogram"]
        for role, counts in sorted(self.latency.items()):
            for bound, count in zip(LATENCY_BUCKETS, counts, strict=True):
                lines.append(f'{name}_bucket{{role="{role}",le="{bound:g}"}} {count}')
            lines.append(f'{name}_bucket{{role="{role}",le="+Inf"}} {self.latency_count[role]}')
            lines.append(f'{name}_sum{{role="{role}"}} {self.latency_sum[role]:.6f}')
            lines.append(f'{name}_count{{role="{role}"}} {self.latency_count[role]}')
        return "\n".join(lines) + "\n"
