"""Per-step training metrics from the step's episode records and its update, and the two files they go to.

`train_metrics.csv` holds exactly the contract's `TRAIN_METRICS_COLUMNS`, one row per step;
`episodes.jsonl` beside it holds one `EpisodeRecord` per line. The update's columns (`UpdateStats`: KL,
entropy, policy loss, clip fraction, gradient norm, mean absolute advantage) are the CPU update's means over
its optimizer steps; the GPU trainer leaves them empty ("not measured": verl logs its own actor metrics to
its logger, under `actor/`). Reward statistics count every episode at the
reward its record holds (an aborted one: 0 in the toolcanary mode, its verified reward in the trustee mode, as
TRUSTEE's batch mean that drives the curriculum); behaviour statistics (turns, call
share, lengths) count only episodes that finished, since an aborted one stopped early for a reason
that is not the policy's; `aborted_<cause>` counts the aborted ones by cause.

Every file here is append-only under `toolcanary.contract.append_only`: appends are whole lines, fsynced,
after fencing off a line a killed writer tore; readers skip torn lines with a warning and refuse a broken
line in the middle; a resume's rewrite is atomic. Each file has one writing process (the CPU run; on GPU
the driver for train_metrics.csv, and one episode file per worker process), so no appends race and none
needs a lock between processes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import fmean, pstdev

from toolcanary.contract import training_files
from toolcanary.contract.append_only import append_text, iter_lines, refused_line, rewrite_lines
from toolcanary.contract.csv_schemas import CANARY_COLUMNS, TRAIN_METRICS_COLUMNS
from toolcanary.contract.training_files import EpisodeRecord
from toolcanary.train.faults import abort_counts


@dataclass(frozen=True)
class UpdateStats:
    """What one step's update measured, each a mean over its optimizer steps (NaN: not measured)."""

    kl: float = math.nan
    """Low-variance KL of the policy to the frozen reference (the KL loss before its coefficient)."""
    entropy: float = math.nan
    """Token-mean entropy of the policy over the trained tokens."""
    pg_loss: float = math.nan
    """verl's clipped policy-gradient loss."""
    pg_clipfrac: float = math.nan
    """Share of trained tokens whose ratio the clip range cut (0 in the first optimizer step of a step)."""
    grad_norm: float = math.nan
    """Gradient norm before clipping to `max_grad_norm`."""
    advantage_abs_mean: float = math.nan
    """Mean absolute GRPO advantage over the trained tokens (0: no group had a reward spread to learn from)."""


def _mean(values: list[float]) -> float:
    return fmean(values) if values else math.nan


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else math.nan


def step_row(step: int, records: list[EpisodeRecord], *, level: int, update: UpdateStats | None = None,
             step_seconds: float) -> dict[str, float]:
    """The `train_metrics.csv` row of one step (`update` None: a trainer that measured none of it). The canary's
    columns are NaN here: the trainer fills them from the run's earlier rows (`toolcanary.train.canary`)."""
    update = update or UpdateStats()
    rewards = [float(r.reward) for r in records]
    done = [r for r in records if r.outcome == "ok"]
    row = {
        "step": step,
        "reward_mean": _mean(rewards),
        "reward_std": pstdev(rewards) if rewards else math.nan,
        "aborted_frac": _ratio(len(records) - len(done), len(records)),
        "curriculum_level": level,
        "tool_call_turns_mean": _mean([r.tool_call_turns for r in done]),
        "response_turns_mean": _mean([r.response_turns for r in done]),
        "tool_call_share": _ratio(sum(r.tool_call_turns for r in done), sum(r.assistant_turns for r in done)),
        "no_call_episode_frac": _ratio(sum(r.tool_call_turns == 0 for r in done), len(done)),
        "tool_turns_mean": _mean([r.tool_turns for r in done]),
        "user_turns_mean": _mean([r.user_turns for r in done]),
        "tool_reward_mean": _mean([x for r in done for x in r.tool_rewards]),
        "user_reward_mean": _mean([x for r in done for x in r.user_rewards]),
        "invalid_call_frac": _ratio(sum(r.invalid_calls for r in done), sum(r.calls for r in done)),
        "response_length_mean": _mean([r.response_length for r in done]),
        "num_turns_mean": _mean([r.num_turns for r in done]),
        **asdict(update),
        "simulator_tokens": sum(r.simulator_tokens for r in records),
        "step_seconds": step_seconds,
        **{f"aborted_{cause}": count for cause, count in abort_counts(records).items()},
        **dict.fromkeys(CANARY_COLUMNS, math.nan),
    }
    if tuple(row) != TRAIN_METRICS_COLUMNS:  # the contract and this function must never drift apart
        raise RuntimeError(f"train metrics row {tuple(row)} differs from the contract {TRAIN_METRICS_COLUMNS}")
    return row


def append_line(path: Path, text: str, header: str | None = None) -> None:
    """Append whole lines, fsynced before returning (a killed run keeps every finished row)."""
    append_text(path, text, header=header)


def append_metrics_row(path: Path, row: dict[str, float]) -> None:
    """Append one row (the header first into a file without one), fsynced before returning."""
    cells = ["" if isinstance(v, float) and math.isnan(v) else (f"{v:.6g}" if isinstance(v, float) else str(v))
             for v in row.values()]
    append_line(path, ",".join(cells) + "\n", header=",".join(TRAIN_METRICS_COLUMNS))


def append_episodes(path: Path, records: list[EpisodeRecord]) -> None:
    """Append the records to an episode file (`toolcanary.contract.training_files`), fsynced."""
    training_files.append_episodes(path, records)


def read_episodes(path: Path) -> list[EpisodeRecord]:
    """The episode records of a JSONL file, under the append-only rule (torn lines skipped with a warning); a
    line that is not an `EpisodeRecord` is a ContractError."""
    return training_files.read_episodes(path)


def drop_steps_after(metrics: Path, episodes: Path | None, step: int) -> None:
    """On resume, forget rows of steps after the restored checkpoint: they are about to be redone.

    Each file is rewritten whole, atomically; torn lines go with the rows they were among.
    """
    if metrics.exists():
        lines = list(iter_lines(metrics))
        if lines:
            for number, text in lines[1:]:
                if not text.split(",", 1)[0].isdigit():
                    raise refused_line(metrics, number, "a row that starts with its step", text)
            rewrite_lines(metrics, [lines[0][1]] + [t for _, t in lines[1:] if int(t.split(",", 1)[0]) <= step])
    if episodes is not None and episodes.exists():
        rewrite_lines(episodes, [line for line, record in training_files.read_episode_lines(episodes)
                                  if record.step <= step])
