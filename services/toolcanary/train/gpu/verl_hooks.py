"""The two pieces verl's GPU trainer loads by name: the curriculum-driving agent-loop manager and the
checkpoint callback that publishes every save through the same atomic publisher as the CPU run.

    actor_rollout_ref.rollout.agent.agent_loop_manager_class=toolcanary.train.gpu.verl_hooks.CurriculumAgentLoopManager
    trainer.checkpoint_callback_class=toolcanary.train.gpu.verl_hooks.PublishingCheckpointCallback

verl's V1 manager only dispatches a step's episodes (they finish in the background), so a step is closed
(its row appended to `train_metrics.csv`, the curriculum moved) when the trainer moves on: at the next
step's dispatch, or at a save, whichever comes first; the last step is always saved, so it always
closes, and a checkpoint's manifest records the level after its own step. The state lives in one file,
`<runs>/<run>/trainer/curriculum.json`, which both hooks read and write: the level, the last closed step,
the state after every closed step (a restart that redoes steps rolls back to the state its checkpoint
saw) and the attempt id each step was dispatched under (a redone step folds only its new episodes).
Both read the run id and volume roots from the environment (`TOOLCANARY_TRAIN_RUN`, ...).

Faults, with the CPU run's code (toolcanary.train.faults, toolcanary.train.simulator_check): before the first
dispatch of a trainer process the simulator must pass the pre-flight check (reachable, same contract version,
token accepted, the trainer's mode and TRUSTEE commit, ready), else the run refuses to start; before every
later dispatch the manager waits (up to `TOOLCANARY_TRAIN_SIMULATOR_WAIT_S`) for a simulator that is down. Every
closed step feeds the circuit breaker and the check for refused tokens; a stop found while closing steps is
raised before the next dispatch, or at a save after its checkpoint is published (so the saved step is
announced), and stops the trainer with its message. verl's checkpoints and curriculum.json stay as they were:
a restart resumes from the last save and redoes the steps after it, as after any other restart. The breaker's
count lives in the trainer process, so a restart after a fix starts it afresh.
"""

from __future__ import annotations

import logging
import math
import random
import uuid
from pathlib import Path

from pydantic import ValidationError
from tensordict import NonTensorStack
from verl.trainer.ppo.checkpoint_callback import CheckpointCallback
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ

import toolcanary.train.grpo  # noqa: F401  registers the toolcanary_grpo advantage estimator in this process
from toolcanary.contract.csv_schemas import TRAIN_METRICS
from toolcanary.contract.errors import ContractError
from toolcanary.contract.training_files import (
    CURRICULUM_FILE,
    EPISODES_DIR,
    CurriculumFile,
    EpisodeRecord,
    read_curriculum,
    step_episodes,
    write_curriculum,
)
from toolcanary.train.canary import canary_columns
from toolcanary.train.curriculum import Curriculum
from toolcanary.train.episode import EpisodeSpec
from toolcanary.train.faults import CircuitBreaker, TrainingStopped, fatal_stop
from toolcanary.train.publisher import publish_folder
from toolcanary.train.rollout import step_specs
from toolcanary.train.settings import TrainSettings
from toolcanary.train.simulator_check import TrainerRules, check_simulator, wait_ready
from toolcanary.train.step_metrics import append_metrics_row, drop_steps_after, read_episodes, step_row
from toolcanary.train.task_keys import task_key_prefix

logger = logging.getLogger(__name__)
# What agent_loops.yaml falls back to when TOOLCANARY_TRAIN_SIMULATOR_URL is not set.
DEFAULT_SIMULATOR_URL = "http://simulator:8300"
# This process's fault state per run (keyed by its state folder): the breaker's streak, the first stop found
# while closing steps, and whether the simulator passed the pre-flight check. A restarted trainer starts afresh.
_BREAKERS: dict[str, CircuitBreaker] = {}
_STOPS: dict[str, TrainingStopped] = {}
_CHECKED: set[str] = set()


def curriculum_path(settings: TrainSettings) -> Path:
    return settings.run_state() / CURRICULUM_FILE


def episode_dir(settings: TrainSettings) -> Path:
    return settings.run_results() / EPISODES_DIR


def metrics_path(settings: TrainSettings) -> Path:
    return settings.run_results() / TRAIN_METRICS


def _fresh(settings: TrainSettings) -> Curriculum:
    return Curriculum(level=settings.level_initial, epsilon=settings.epsilon,
                      no_call_fraction=settings.no_call_fraction, mode=settings.mode)


def _read(settings: TrainSettings) -> dict:
    state = read_curriculum(curriculum_path(settings))
    return {"history": {}, "attempts": {}} if state is None else state.model_dump(mode="json")


def load_curriculum(settings: TrainSettings) -> Curriculum:
    curriculum = _fresh(settings)
    state = _read(settings)
    if "level" in state:
        curriculum.load_state_dict(state)
    return curriculum


def save_curriculum(settings: TrainSettings, curriculum: Curriculum, history: dict | None = None,
                    attempts: dict | None = None) -> None:
    """Write the state atomically (a reader never sees half a file)."""
    previous = _read(settings)
    state = {**curriculum.state_dict(), "history": previous["history"] if history is None else history,
             "attempts": previous["attempts"] if attempts is None else attempts}
    write_curriculum(curriculum_path(settings), CurriculumFile.model_validate(state))


def assign_specs(uids: list, curriculum: Curriculum, *, step: int, key_prefix: str, rng: random.Random,
                 attempt: str | None = None, seed: int = 0) -> list[dict]:
    """One spec per row; rows sharing a uid share one task key and setting (verl's V1 manager spawns the
    n rollouts of a row itself, and the agent loop appends each rollout's number to the episode id)."""
    order = list(dict.fromkeys(str(u) for u in uids))
    groups = {uid: spec for uid, spec in zip(order, step_specs(curriculum, step=step, groups=len(order), n=1,
                                                                rng=rng, key_prefix=key_prefix, seed=seed),
                                            strict=True)}
    seen: dict[str, int] = {}
    rows = []
    for uid in (str(u) for u in uids):
        member = seen[uid] = seen.get(uid, -1) + 1
        spec = groups[uid]
        episode_id = spec.task_key if member == 0 else f"{spec.task_key}-p{member:02d}"
        rows.append(spec.model_copy(update={"episode_id": episode_id, "attempt": attempt}).model_dump(mode="json"))
    return rows


# TRUSTEE validates with its generic system prompt and run.sh's fixed caps (user 3, assistant 6, tool 3),
# not the curriculum's: its validation rows carry no per-sample limits.
TRUSTEE_VALIDATION = {"system_prompt_level": 3, "max_user_turns": 3, "max_assistant_turns": 6, "max_tool_turns": 3}


def validation_rows(rows: list, step: int, mode: str = "toolcanary") -> list[dict]:
    """The held-out tasks of val.parquet with this validation's step in their ids (trustee: TRUSTEE's caps)."""
    fixed = TRUSTEE_VALIDATION if mode == "trustee" else {}
    out = []
    for row in rows:
        try:
            spec = EpisodeSpec.model_validate(dict(row))
        except ValidationError:
            spec = None
        if spec is None or spec.split != "val":
            raise ContractError("data.val_files: extra_info", "the episode spec of a held-out task (split val)",
                                repr(dict(row))[:200], "Rewrite the validation rows with `seed-data`")
        out.append(spec.model_copy(update={"step": step, "episode_id": f"{spec.task_key}-at{step:04d}", **fixed})
                   .model_dump(mode="json"))
    return out


def close_step(settings: TrainSettings, curriculum: Curriculum, step: int, attempt: str | None = None) -> dict | None:
    """Fold the finished training episodes of `step` (of `attempt`, when given) into its metrics row and
    the level, and persist the state; None (and nothing changed) when the step left no episode records.
    Only the step's own folder is read, so a step of a 200-step run closes as fast as the first."""
    records = [record for path in sorted(step_episodes(episode_dir(settings), step).glob("*.jsonl"))
               for record in read_episodes(path)
               if record.step == step and record.split == "train"
               and (attempt is None or record.attempt == attempt)]
    if not records:
        return None
    row = step_row(step, records, level=curriculum.level, step_seconds=math.nan)
    row |= canary_columns(metrics_path(settings), step, row["tool_call_share"], steps=settings.canary_steps,
                          threshold=settings.canary_shift)
    append_metrics_row(metrics_path(settings), row)
    curriculum.update(row["reward_mean"])  # aborted episodes at their record's reward (see train.metrics)
    _record_closed(settings, curriculum, step)
    _observe(settings, step, records)
    return row


def _key(settings: TrainSettings) -> str:
    return str(settings.run_state())


def _observe(settings: TrainSettings, step: int, records: list[EpisodeRecord]) -> None:
    """Feed a closed step to the breaker and the token check; keep the first stop either finds."""
    key = _key(settings)
    if key not in _BREAKERS:
        _BREAKERS[key] = CircuitBreaker(settings.max_aborted_frac, settings.max_aborted_steps)
    stop = fatal_stop(step, records) or _BREAKERS[key].observe(step, records)
    if stop is not None and key not in _STOPS:
        logger.error("%s", stop)
        _STOPS[key] = stop


def raise_if_stopped(settings: TrainSettings) -> None:
    """Raise the stop found while closing steps, if any (the trainer process then ends with it)."""
    stop = _STOPS.get(_key(settings))
    if stop is not None:
        raise stop


def check_before_dispatch(settings: TrainSettings, step: int) -> None:
    """The simulator check before a dispatch: strict before this process's first, a bounded wait after."""
    url = settings.simulator_url or DEFAULT_SIMULATOR_URL
    # The agent loop plays this mode too: check-recipe refuses an agent-loop mode other than TOOLCANARY_TRAIN_MODE.
    rules = TrainerRules.of(settings)
    key = _key(settings)
    if key not in _CHECKED:
        health = check_simulator(url, rules=rules)
        logger.info("simulator at %s ready: contract %s, mode %s, backend %s, run %s", url, health.contract_version,
                    health.mode, health.backend, health.run)
        _CHECKED.add(key)
    else:
        wait_ready(url, settings.simulator_wait_s, before=f"step {step}", rules=rules)


def prepare_dispatch(settings: TrainSettings, step: int) -> tuple[Curriculum, str]:
    """What the manager does before a training step's dispatch: check the simulator, close the steps before
    it, stop the run if they call for it, and return the curriculum and the attempt id to dispatch under."""
    check_before_dispatch(settings, step)
    curriculum, attempt = begin_step(settings, step)
    raise_if_stopped(settings)
    return curriculum, attempt


def _record_closed(settings: TrainSettings, curriculum: Curriculum, step: int) -> None:
    curriculum.step = step
    state = _read(settings)
    save_curriculum(settings, curriculum, {**state["history"], str(step): curriculum.state_dict()}, state["attempts"])


def close_through(settings: TrainSettings, step: int) -> Curriculum:
    """Close every dispatched step up to `step` that is still open; returns the curriculum after it."""
    curriculum = load_curriculum(settings)
    attempts = _read(settings)["attempts"]
    for pending in range(curriculum.step + 1, step + 1):
        if close_step(settings, curriculum, pending, attempts.get(str(pending))) is None:
            logger.warning("no episode records for step %d; the curriculum holds at level %d", pending,
                           curriculum.level)
            _record_closed(settings, curriculum, pending)
    return curriculum


def begin_step(settings: TrainSettings, step: int) -> tuple[Curriculum, str]:
    """The curriculum `step` draws from and the attempt id it is dispatched under.

    Steps before it are closed first. If the state is already past it (the trainer restarted from an
    earlier checkpoint and redoes steps), the state is rolled back to what it was after step - 1, and the
    metrics rows of the steps to redo are dropped.
    """
    state = _read(settings)
    if int(state.get("step", 0)) >= step:
        before = state["history"].get(str(step - 1))
        curriculum = _fresh(settings)
        if before is not None:
            curriculum.load_state_dict(before)
        logger.warning("redoing step %d after a restart: curriculum back to level %d", step, curriculum.level)
        history = {k: v for k, v in state["history"].items() if int(k) < step}
        attempts = {k: v for k, v in state["attempts"].items() if int(k) < step}
        drop_steps_after(metrics_path(settings), None, step - 1)
        save_curriculum(settings, curriculum, history, attempts)
    curriculum = close_through(settings, step - 1)
    attempt = uuid.uuid4().hex[:12]
    state = _read(settings)
    save_curriculum(settings, curriculum, state["history"], {**state["attempts"], str(step): attempt})
    return curriculum, attempt


class CurriculumAgentLoopManager(AgentLoopManagerTQ):
    """Before each step's dispatch: check the simulator, close the steps before it (and stop the run when
    they call for it), then write this step's curriculum draw into every prompt row (its n rollouts share
    it, hence one task). Validation rows keep their held-out task and get this step's number."""

    def generate_sequences(self, prompts) -> None:
        settings = TrainSettings.from_env()
        step = int(prompts["global_steps"])
        if "validate" in prompts.keys() and bool(prompts["validate"]):
            check_before_dispatch(settings, step)  # validation before training is a first dispatch too
            prompts["extra_info"] = NonTensorStack(*validation_rows(list(prompts["extra_info"]), step, settings.mode))
            return super().generate_sequences(prompts)
        curriculum, attempt = prepare_dispatch(settings, step)
        logger.info("curriculum: step %d at level %d, derived %s", step, curriculum.level,
                    curriculum.derived().as_dict())
        # One generator per step: a step redone after a restart draws the same tasks at the same level,
        # which the simulator requires of a task key it has already written.
        rng = random.Random(f"{settings.seed}-{step}")
        specs = assign_specs(list(prompts["uid"]), curriculum, step=step,
                             key_prefix=task_key_prefix(settings.run_state(), settings.run), rng=rng,
                             attempt=attempt, seed=settings.seed)
        prompts["extra_info"] = NonTensorStack(*specs)
        return super().generate_sequences(prompts)


class PublishingCheckpointCallback(CheckpointCallback):
    """After each verl save: close the saved step (its episodes are done), then publish
    `<checkpoint_dir>/actor/huggingface` as `step_NNNN` with a manifest."""

    def on_save(self, trainer, global_step: int, checkpoint_dir: str, async_save: bool = False, **kwargs) -> None:
        settings = TrainSettings.from_env()
        if not curriculum_path(settings).exists():
            raise ContractError(str(curriculum_path(settings)), "the curriculum state the agent-loop manager writes",
                                "no such file", "Set agent_loop_manager_class to CurriculumAgentLoopManager")
        curriculum = close_through(settings, global_step)
        source = Path(checkpoint_dir) / "actor" / "huggingface"
        base_model = str(self.config.actor_rollout_ref.model.path) if self.config is not None else "unknown"
        publish_folder(source, settings.run_checkpoints(), run=settings.run, step=global_step,
                       base_model=base_model, curriculum_level=curriculum.level,
                       enable_thinking=recipe_thinking(self.config))
        # After the publish: verl will not call this again for a step it saved, so a stop found while closing
        # it must not cost the step its announcement.
        raise_if_stopped(settings)


def recipe_thinking(config) -> bool:
    """The chat-template mode the policy trains in, which its checkpoints must be served in."""
    kwargs = (config.data.get("apply_chat_template_kwargs") or {}) if config is not None else {}
    thinking = kwargs.get("enable_thinking")
    if not isinstance(thinking, bool):
        raise ContractError("data.apply_chat_template_kwargs.enable_thinking",
                            "true or false, set by the recipe", repr(thinking),
                            "Set it in the recipe so that checkpoints are served in the mode they trained in")
    return thinking
