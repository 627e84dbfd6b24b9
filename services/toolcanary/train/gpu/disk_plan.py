"""The disk a GPU run needs, estimated from the recipe and the base model, and checked before step 1.

A verl save of the actor holds, per parameter, the fp32 model (4 bytes), Adam's two fp32 moments (8) and the
fp32 `hf_model` copy the publisher reads (4): 16 bytes, about 64 GB for Qwen3-4B. verl makes room before each
save, so at most `trainer.max_actor_ckpt_to_keep` saves are on disk at once. Every `save_freq` steps, and at
step 0, a checkpoint is published in the serving dtype (bf16: 2 bytes per parameter, about 8 GB). The
parameter count is read from the base model's safetensors headers (no weights are loaded).

`python -m toolcanary.train publish-base` (run by train.sh before verl starts) prints the plan and refuses to
start when the volumes have less free space than the run still needs; what this run already wrote (published
steps, verl saves) counts as in place.

    plan = disk_plan(config, base_folder, settings)
    print(plan.describe()); plan.check()
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from safetensors import safe_open

from toolcanary.contract.errors import ContractError
from toolcanary.train.publisher import serving_dtype

GB = 1e9
SAVE_BYTES_PER_PARAMETER = 4 + 8 + 4  # fp32 model, Adam's two fp32 moments, fp32 hf_model


def parameter_count(folder: Path) -> int:
    """Parameters in a model folder's safetensors files, from their headers."""
    count = 0
    for path in sorted(Path(folder).glob("*.safetensors")):
        with safe_open(path, framework="pt") as weights:
            for name in weights.keys():  # noqa: SIM118 (safe_open has no __iter__)
                shape = weights.get_slice(name).get_shape()
                size = 1
                for dimension in shape:
                    size *= dimension
                count += size
    if not count:
        raise ContractError(str(folder), "a model folder with safetensors weights", "no parameters found")
    return count


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file()) if Path(folder).exists() else 0


@dataclass(frozen=True)
class DiskPlan:
    parameters: int
    saves_kept: int
    publishes: int
    save_bytes: int
    publish_bytes: int
    saves_dir: Path
    checkpoints_dir: Path
    saves_written: int = 0
    """Bytes this run's verl saves already take (a restart)."""
    published: int = 0
    """Steps this run already published."""

    @property
    def saves_need(self) -> int:
        return max(0, self.saves_kept * self.save_bytes - self.saves_written)

    @property
    def publishes_need(self) -> int:
        return max(0, self.publishes - self.published) * self.publish_bytes

    @property
    def total(self) -> int:
        return self.saves_kept * self.save_bytes + self.publishes * self.publish_bytes

    def describe(self) -> str:
        return (f"disk plan: {self.parameters / 1e9:.2f}B parameters; {self.saves_kept} verl saves kept x "
                f"{self.save_bytes / GB:.1f} GB in {self.saves_dir} and {self.publishes} published checkpoints x "
                f"{self.publish_bytes / GB:.1f} GB in {self.checkpoints_dir}: {self.total / GB:.1f} GB for the run, "
                f"{(self.saves_need + self.publishes_need) / GB:.1f} GB of it still to write")

    def check(self, free: Callable[[Path], int] = lambda path: shutil.disk_usage(path).free) -> None:
        """Raises ContractError when a volume has less free space than the run still needs on it."""
        needs: dict[int, tuple[Path, int]] = {}
        for folder, need in ((self.saves_dir, self.saves_need), (self.checkpoints_dir, self.publishes_need)):
            existing = _existing(folder)
            device = os.stat(existing).st_dev
            place, so_far = needs.get(device, (existing, 0))
            needs[device] = (place, so_far + need)
        for place, need in needs.values():
            available = free(place)
            if available < need:
                raise ContractError(
                    f"free space on the volume of {place}", f"{need / GB:.1f} GB for the rest of the run "
                    f"({self.describe()})", f"{available / GB:.1f} GB free",
                    "Free space or move the volumes (TOOLCANARY_RUNS_DIR, TOOLCANARY_CHECKPOINTS_DIR), or keep "
                    "fewer verl saves (trainer.max_actor_ckpt_to_keep=2 is the least that survives a save cut off "
                    "mid-write)")


def _existing(folder: Path) -> Path:
    """The folder, or its nearest existing parent (a run's folders are made as it goes)."""
    folder = Path(folder).absolute()
    while not folder.exists():
        folder = folder.parent
    return folder


def disk_plan(config, base_folder: Path, checkpoints_dir: Path) -> DiskPlan:
    """The plan of the composed recipe `config` for the base model in `base_folder`, publishing into
    `checkpoints_dir` (the run's folder of published steps)."""
    trainer = config.trainer
    parameters = parameter_count(base_folder)
    steps, every = int(trainer.total_training_steps), int(trainer.save_freq)
    saved_steps = set(range(every, steps + 1, every)) | {steps, 0}  # verl always saves the last step
    dtype = serving_dtype(Path(base_folder) / "config.json")
    saves_dir = Path(str(trainer.default_local_dir))
    published = len(list(Path(checkpoints_dir).glob("step_[0-9][0-9][0-9][0-9]*")))
    return DiskPlan(parameters=parameters, saves_kept=int(trainer.max_actor_ckpt_to_keep),
                    publishes=len(saved_steps), save_bytes=parameters * SAVE_BYTES_PER_PARAMETER,
                    publish_bytes=parameters * dtype.itemsize, saves_dir=saves_dir,
                    checkpoints_dir=Path(checkpoints_dir), saves_written=folder_bytes(saves_dir),
                    published=published)
