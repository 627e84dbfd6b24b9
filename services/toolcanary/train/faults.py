"""What a run does about simulator faults, the same on both trainers (the CPU run and the GPU hooks).

Faults come in three kinds, told apart by what a retry could do:

- **one bad request** (HTTP 413, 422, 409, ...): that episode is aborted with its cause; the run goes on;
- **transient** (5xx, timeouts, a simulator that is down for a moment): the client retries with backoff,
  then aborts the episode with cause `upstream` or `timeout`; before each step the trainer waits (bounded)
  for the simulator to be ready again (`preflight.wait_ready`);
- **what no retry can fix** (a refused token, another contract version or mode; every episode aborting for K
  steps): the run stops with `TrainingStopped`, saying why and how to resume, and leaves a resumable state.

`CircuitBreaker` is the last one: when the aborted share of a step's episodes passes `max_aborted_frac` for
`max_aborted_steps` steps in a row, it names the dominant abort causes and their counts.

    breaker = CircuitBreaker(max_aborted_frac=0.5, max_aborted_steps=3)
    breaker.observe(step, records)          # after every step, with the step's episode records
    if breaker.stop: raise breaker.stop
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from toolcanary.contract.simulator_api import ABORT_CAUSES
from toolcanary.contract.training_files import EpisodeRecord

# Causes no retry can fix: a step that met one stops the run at once.
FATAL_CAUSES = ("auth",)
# Exit status of `python -m toolcanary.train` when training stopped on a fault (2: bad input).
EXIT_STOPPED = 3


class TrainingStopped(RuntimeError):
    """Training stopped on purpose: what was found, and what to do (the run resumes with the same --run)."""

    def __init__(self, reason: str, fix: str) -> None:
        self.reason, self.fix = reason, fix
        super().__init__(f"training stopped: {reason}. {fix}")


def abort_counts(records: Iterable[EpisodeRecord]) -> dict[str, int]:
    """Aborted episodes by cause, every cause of the contract present (0 when none)."""
    counts = Counter(r.abort_cause or "upstream" for r in records if r.outcome == "aborted")
    unknown = set(counts) - set(ABORT_CAUSES)
    if unknown:  # an agent loop that invents a cause would vanish from the metrics: refuse instead
        raise ValueError(f"abort causes {sorted(unknown)} are not among the contract's {list(ABORT_CAUSES)}")
    return {cause: counts.get(cause, 0) for cause in ABORT_CAUSES}


def _by_cause(records: list[EpisodeRecord]) -> str:
    """'upstream 44 (tool 30, task 14), timeout 3': causes by count, each with its roles."""
    causes: Counter[str] = Counter()
    roles: dict[str, Counter[str]] = {}
    for record in records:
        if record.outcome != "aborted":
            continue
        cause = record.abort_cause or "upstream"
        causes[cause] += 1
        roles.setdefault(cause, Counter())[record.abort_role or "?"] += 1
    parts = []
    for cause, count in causes.most_common():
        detail = ", ".join(f"{role} {n}" for role, n in roles[cause].most_common())
        parts.append(f"{cause} {count} ({detail})")
    return ", ".join(parts) or "none"


def _example(records: list[EpisodeRecord], causes: Iterable[str]) -> str:
    wanted = set(causes)
    for record in records:
        if record.outcome == "aborted" and (record.abort_cause or "upstream") in wanted:
            return str(record.abort_detail or "")[:300]
    return ""


def fatal_stop(step: int, records: list[EpisodeRecord]) -> TrainingStopped | None:
    """The stop for a step in which the simulator refused the trainer's token, if it did."""
    fatal = [r for r in records if r.outcome == "aborted" and r.abort_cause in FATAL_CAUSES]
    if not fatal:
        return None
    return TrainingStopped(
        f"step {step}: the simulator refused {len(fatal)} of {len(records)} episodes' calls with HTTP 401/403 "
        f"({_example(fatal, FATAL_CAUSES)}); no retry can fix a token",
        "Set TOOLCANARY_SIMULATOR_TOKEN in the trainer's environment to the simulator's token, then restart the "
        "run with the same --run: it resumes from its last saved state",
    )


class CircuitBreaker:
    """Stops a run whose steps keep training on (mostly) nothing.

    `observe` takes each finished step's episode records in step order; a step whose aborted share is above
    `max_aborted_frac` extends the streak, any other resets it. After `max_aborted_steps` such steps in a row,
    `stop` holds the error to raise. A step that left no record at all counts as fully aborted.
    """

    def __init__(self, max_aborted_frac: float = 0.5, max_aborted_steps: int = 3) -> None:
        if not 0 <= max_aborted_frac < 1:
            raise ValueError(f"max_aborted_frac: expected a share in [0, 1), got {max_aborted_frac}")
        if max_aborted_steps < 1:
            raise ValueError(f"max_aborted_steps: expected at least 1, got {max_aborted_steps}")
        self.max_aborted_frac, self.max_aborted_steps = max_aborted_frac, max_aborted_steps
        self.streak: list[tuple[int, float, list[EpisodeRecord]]] = []
        self.stop: TrainingStopped | None = None

    def observe(self, step: int, records: list[EpisodeRecord]) -> TrainingStopped | None:
        """Fold in one finished step; returns the stop once the breaker has tripped."""
        aborted = sum(r.outcome == "aborted" for r in records)
        share = aborted / len(records) if records else 1.0
        if share > self.max_aborted_frac:
            self.streak.append((step, share, records))
        else:
            self.streak.clear()
        if self.stop is None and len(self.streak) >= self.max_aborted_steps:
            self.stop = self._trip()
        return self.stop

    def _trip(self) -> TrainingStopped:
        steps = self.streak[-self.max_aborted_steps:]
        records = [r for _, _, rs in steps for r in rs]
        shares = ", ".join(f"step {s}: {share:.0%}" for s, share, _ in steps)
        empty = [s for s, _, rs in steps if not rs]
        causes = _by_cause(records) + (f"; steps {empty} left no episode record at all" if empty else "")
        dominant = [c for c, _ in Counter((r.abort_cause or "upstream") for r in records
                                          if r.outcome == "aborted").most_common(1)]
        example = _example(records, dominant)
        return TrainingStopped(
            f"circuit breaker: {len(steps)} steps in a row aborted more than {self.max_aborted_frac:.0%} of their "
            f"episodes ({shares}); abort causes: {causes}" + (f"; e.g. {example!r}" if example else ""),
            "Fix what the causes point at (the simulator's log and /health/ready, its upstream), then restart the "
            "run with the same --run: it resumes from its last saved state (TOOLCANARY_TRAIN_MAX_ABORTED_FRAC and "
            "TOOLCANARY_TRAIN_MAX_ABORTED_STEPS set the breaker)",
        )
