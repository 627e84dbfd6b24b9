"""Per-step training metrics from the step's episode records, and the two files they go to.

`train_metrics.csv` holds exactly the contract's `TRAIN_METRICS_COLUMNS`, one row per step;
`episodes.jsonl` beside it holds one `EpisodeRecord` per line. Reward statistics count every episode,
aborted ones at 0 (TRUSTEE's batch mean, which drives the curriculum); behaviour statistics (turns, call
share, lengths) count only episodes that finished, since an aborted one stopped early for a reason
that is not the policy's.
"""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path
from statistics import fmean, pstdev

from toolcanary.contract.csv_schemas import TRAIN_METRICS_COLUMNS


def _mean(values: list[float]) -> float:
    return fmean(values) if values else math.nan


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else math.nan


def step_row(step: int, records: list[dict], *, level: int, update: dict[str, float],
             step_seconds: float) -> dict[str, float]:
    """The `train_metrics.csv` row of one step."""
    rewards = [float(r["reward"]) for r in records]
    done = [r for r in records if r["outcome"] == "ok"]
    row = {
        "step": step,
        "reward_mean": _mean(rewards),
        "reward_std": pstdev(rewards) if rewards else math.nan,
        "aborted_frac": _ratio(len(records) - len(done), len(records)),
        "curriculum_level": level,
        "tool_call_turns_mean": _mean([r["tool_call_turns"] for r in done]),
        "response_turns_mean": _mean([r["response_turns"] for r in done]),
        "tool_call_share": _ratio(sum(r["tool_call_turns"] for r in done), sum(r["assistant_turns"] for r in done)),
        "no_call_episode_frac": _ratio(sum(r["tool_call_turns"] == 0 for r in done), len(done)),
        "tool_turns_mean": _mean([r["tool_turns"] for r in done]),
        "user_turns_mean": _mean([r["user_turns"] for r in done]),
        "tool_reward_mean": _mean([x for r in done for x in r["tool_rewards"]]),
        "user_reward_mean": _mean([x for r in done for x in r["user_rewards"]]),
        "invalid_call_frac": _ratio(sum(r["invalid_calls"] for r in done), sum(r["calls"] for r in done)),
        "response_length_mean": _mean([r["response_length"] for r in done]),
        "num_turns_mean": _mean([r["num_turns"] for r in done]),
        "kl": update.get("kl", math.nan),
        "entropy": update.get("entropy", math.nan),
        "simulator_tokens": sum(r["simulator_tokens"] for r in records),
        "step_seconds": step_seconds,
    }
    if tuple(row) != TRAIN_METRICS_COLUMNS:  # the contract and this function must never drift apart
        raise RuntimeError(f"train metrics row {tuple(row)} differs from the contract {TRAIN_METRICS_COLUMNS}")
    return row


def append_line(path: Path, text: str) -> None:
    """Append `text`, flushed to disk before returning (a killed run keeps every finished row)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


def append_metrics_row(path: Path, row: dict[str, float]) -> None:
    """Append one row (the header first for a new file), flushed to disk before returning."""
    new = not path.exists() or path.stat().st_size == 0
    cells = ["" if isinstance(v, float) and math.isnan(v) else (f"{v:.6g}" if isinstance(v, float) else str(v))
             for v in row.values()]
    append_line(path, ("" if not new else ",".join(TRAIN_METRICS_COLUMNS) + "\n") + ",".join(cells) + "\n")


def append_episodes(path: Path, records: list[dict]) -> None:
    append_line(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def drop_steps_after(metrics: Path, episodes: Path | None, step: int) -> None:
    """On resume, forget rows of steps after the restored checkpoint: they are about to be redone."""
    if metrics.exists():
        with metrics.open(newline="") as handle:
            rows = list(csv.reader(handle))
        kept = rows[:1] + [r for r in rows[1:] if r and int(r[0]) <= step]
        metrics.write_text("".join(",".join(r) + "\n" for r in kept))
    if episodes is not None and episodes.exists():
        lines = [line for line in episodes.read_text().splitlines() if line.strip()]
        kept_lines = [line for line in lines if json.loads(line)["step"] <= step]
        episodes.write_text("".join(line + "\n" for line in kept_lines))
