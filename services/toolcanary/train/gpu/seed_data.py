"""The parquet verl's dataset reads for the GPU recipe: training placeholders and held-out validation tasks.

Training tasks are not data here: the simulator writes them during the rollout, from the curriculum draw
the agent-loop manager puts into each row, so the training rows only give verl something to batch and
count (16 tasks per step x 200 steps = 3200 rows). Validation rows are real: each carries the episode
spec of one fixed held-out task (its key, and settings drawn once at curriculum level 1 from a seed of
their own), so every validation scores the policy on the same simulated tasks.

    python -m toolcanary.train seed-data --out volumes/runs/r1/data --rows 3200 --run r1

Task keys begin with the run's `task_key_prefix`, made (or read) from the run's trainer folder, the same
prefix the agent-loop manager uses for training tasks.
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from toolcanary.train.agent_loop import AGENT_NAME
from toolcanary.train.curriculum import Curriculum
from toolcanary.train.episode import EpisodeSpec
from toolcanary.train.rollout import step_specs

PLACEHOLDER = "A task will be written by the simulator for this group."
VALIDATION_LEVEL = 1


def validation_specs(key_prefix: str, count: int, seed: int = 0) -> list[EpisodeSpec]:
    """The fixed held-out tasks: keys `<key_prefix>-val-s0000-gNN`, settings drawn once at level 1."""
    curriculum = Curriculum(level=VALIDATION_LEVEL)
    specs = step_specs(curriculum, step=0, groups=count, n=1, rng=random.Random(f"validation-{seed}"),
                       key_prefix=f"{key_prefix}-val", seed=seed, draw_prefix="val-")
    return [spec.model_copy(update={"split": "val"}) for spec in specs]


def write_seed_data(out: Path, rows: int, *, key_prefix: str, val_rows: int = 16, seed: int = 0) -> list[Path]:
    """Write train.parquet and val.parquet under `out`; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    base = {"prompt": [{"role": "user", "content": PLACEHOLDER}], "agent_name": AGENT_NAME,
            "data_source": "toolcanary_simulated", "reward_model": {"ground_truth": ""}}
    tables = {
        "train": [{**base, "extra_info": {"index": index, "split": "train"}} for index in range(rows)],
        "val": [{**base, "extra_info": {"index": index, **spec.model_dump(mode="json")}}
                for index, spec in enumerate(validation_specs(key_prefix, val_rows, seed))],
    }
    written = []
    for name, table in tables.items():
        path = out / f"{name}.parquet"
        pq.write_table(pa.Table.from_pylist(table), path)
        written.append(path)
    return written
