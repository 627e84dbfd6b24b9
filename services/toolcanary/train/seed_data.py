"""The parquet verl's dataset reads for the GPU recipe: one placeholder row per GRPO group and step.

Tasks are not data here: the simulator writes them during the rollout, from the curriculum setting the
agent-loop manager puts into each row. The rows only give verl something to batch and count (16 tasks
per step x 200 steps = 3200 rows), and name the agent loop that plays them.

    python -m toolcanary.train seed-data --out volumes/runs/r1/data --rows 3200
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from toolcanary.train.agent_loop import AGENT_NAME

PLACEHOLDER = "A task will be written by the simulator for this group."


def write_seed_data(out: Path, rows: int, val_rows: int = 16) -> list[Path]:
    """Write train.parquet and val.parquet under `out`; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, count in (("train", rows), ("val", val_rows)):
        table = pa.Table.from_pylist([{
            "prompt": [{"role": "user", "content": PLACEHOLDER}],
            "agent_name": AGENT_NAME,
            "data_source": "toolcanary_simulated",
            "reward_model": {"ground_truth": ""},
            "extra_info": {"index": index, "split": name},
        } for index in range(count)])
        path = out / f"{name}.parquet"
        pq.write_table(table, path)
        written.append(path)
    return written
