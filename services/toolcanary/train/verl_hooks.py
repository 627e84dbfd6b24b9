"""The two pieces verl's GPU trainer loads by name: the curriculum-driving agent-loop manager and the
checkpoint callback that publishes every save through the same atomic publisher as the CPU run.

    actor_rollout_ref.rollout.agent.agent_loop_manager_class=toolcanary.train.verl_hooks.CurriculumAgentLoopManager
    trainer.checkpoint_callback_class=toolcanary.train.verl_hooks.PublishingCheckpointCallback

Both read the run id and volume roots from the environment (`TOOLCANARY_TRAIN_RUN`,
`TOOLCANARY_CHECKPOINTS_DIR`, `TOOLCANARY_RUNS_DIR`); the curriculum state lives in
`<runs>/<run>/trainer/curriculum.json`, written after every step and read back on restart.
This glue cannot run without GPUs; its tests only import it and exercise the file handling.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
from pathlib import Path

from tensordict import NonTensorStack
from verl.trainer.ppo.checkpoint_callback import CheckpointCallback
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ

from toolcanary.contract.errors import ContractError
from toolcanary.train.curriculum import Curriculum
from toolcanary.train.metrics import append_metrics_row, step_row
from toolcanary.train.publisher import publish_folder
from toolcanary.train.rollout import step_specs
from toolcanary.train.settings import TrainSettings

logger = logging.getLogger(__name__)
CURRICULUM_FILE = "curriculum.json"


def curriculum_path(settings: TrainSettings) -> Path:
    return settings.run_state() / CURRICULUM_FILE


def load_curriculum(settings: TrainSettings) -> Curriculum:
    curriculum = Curriculum(level=settings.level_initial, epsilon=settings.epsilon,
                            no_call_fraction=settings.no_call_fraction)
    path = curriculum_path(settings)
    if path.exists():
        curriculum.load_state_dict(json.loads(path.read_text()))
    return curriculum


def save_curriculum(settings: TrainSettings, curriculum: Curriculum) -> None:
    path = curriculum_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(curriculum.state_dict()))
    os.replace(tmp, path)


def assign_specs(uids: list, curriculum: Curriculum, *, step: int, run: str, rng: random.Random) -> list[dict]:
    """One spec per row; rows sharing a uid (the n rollouts of a prompt) share one task key and setting."""
    order = list(dict.fromkeys(str(u) for u in uids))
    groups = {uid: spec for uid, spec in zip(order, step_specs(curriculum, step=step, groups=len(order), n=1,
                                                                rng=rng, run=run), strict=True)}
    seen: dict[str, int] = {}
    rows = []
    for uid in (str(u) for u in uids):
        member = seen[uid] = seen.get(uid, -1) + 1
        spec = groups[uid].model_copy(update={"episode_id": f"{groups[uid].task_key}-r{member:02d}"})
        rows.append(spec.model_dump(mode="json"))
    return rows


def close_step(settings: TrainSettings, curriculum: Curriculum, step: int) -> dict | None:
    """Fold the finished episodes of `step` (written by the agent loops) into metrics and the curriculum."""
    records = [json.loads(line) for path in sorted(episode_dir(settings).glob("*.jsonl"))
               for line in path.read_text().splitlines() if line.strip() and json.loads(line)["step"] == step]
    if not records:
        return None
    row = step_row(step, records, level=curriculum.level, update={}, step_seconds=math.nan)
    append_metrics_row(settings.run_results() / "train_metrics.csv", row)
    curriculum.update(row["reward_mean"])  # aborted episodes count at 0 in this mean, as in TRUSTEE
    save_curriculum(settings, curriculum)
    return row


def episode_dir(settings: TrainSettings) -> Path:
    return settings.run_results() / "episodes"


class CurriculumAgentLoopManager(AgentLoopManagerTQ):
    """Before each step: close the previous one (metrics row, level update), then write this step's
    curriculum draw into every prompt row (its n rollouts share it, hence one task)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.settings = TrainSettings.from_env()
        self.curriculum = load_curriculum(self.settings)
        self.rng = random.Random(self.settings.seed + self.curriculum.step)

    def generate_sequences(self, prompts) -> None:
        if "validate" in prompts.keys() and bool(prompts["validate"]):
            return super().generate_sequences(prompts)
        step = int(prompts["global_steps"])
        while self.curriculum.step < step - 1:
            closed = close_step(self.settings, self.curriculum, self.curriculum.step + 1)
            if closed is None:
                logger.warning("no episode records for step %d; the curriculum holds", self.curriculum.step + 1)
                self.curriculum.step += 1
        logger.info("curriculum: step %d at level %d, derived %s", step, self.curriculum.level,
                    self.curriculum.derived().as_dict())
        specs = assign_specs(list(prompts["uid"]), self.curriculum, step=step, run=self.settings.run, rng=self.rng)
        prompts["extra_info"] = NonTensorStack(*specs)
        return super().generate_sequences(prompts)


class PublishingCheckpointCallback(CheckpointCallback):
    """After each verl save, publish `<checkpoint_dir>/actor/huggingface` as `step_NNNN` with a manifest."""

    def on_save(self, trainer, global_step: int, checkpoint_dir: str, async_save: bool = False, **kwargs) -> None:
        settings = TrainSettings.from_env()
        source = Path(checkpoint_dir) / "actor" / "huggingface"
        state = curriculum_path(settings)
        if not state.exists():
            raise ContractError(str(state), "the curriculum state the agent-loop manager writes every step",
                                "no such file", "Set agent_loop_manager_class to CurriculumAgentLoopManager")
        level = int(json.loads(state.read_text())["level"])
        base_model = str(self.config.actor_rollout_ref.model.path) if self.config is not None else "unknown"
        publish_folder(source, settings.run_checkpoints(), run=settings.run, step=global_step,
                       base_model=base_model, curriculum_level=level)
