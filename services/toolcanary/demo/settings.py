"""The demo's settings: one place for its defaults, the full demo and the shortened one (`--quick`).

    python -c "from toolcanary.demo.settings import DemoSettings; print(DemoSettings.make(quick=True))"
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
VENVS = REPO_ROOT / ".venvs"


def volume(name: str) -> Path:
    """A data root, from TOOLCANARY_<NAME>_DIR or volumes/<name> (the same variables every service reads)."""
    return Path(os.environ.get(f"TOOLCANARY_{name.upper()}_DIR", REPO_ROOT / "volumes" / name)).resolve()


# Steps, checkpoint interval, BFCL items per category and passes at the repeated checkpoints, per policy.
# A SmolLM2 GRPO step costs minutes on 2 cores (the tiny policy's: seconds), so its demo is shorter.
SIZES = {
    "tiny": {"full": dict(steps=12, save_every=4, sample=2, repeat_passes=3),
             "quick": dict(steps=2, save_every=2, sample=1, repeat_passes=2)},
    "smollm2": {"full": dict(steps=2, save_every=2, sample=1, repeat_passes=2),
                "quick": dict(steps=1, save_every=1, sample=1, repeat_passes=1)},
}
# SmolLM2's window is 8,192 positions; vLLM refuses a longer --max-model-len. Longer BFCL prompts are
# refused per request and scored as failed items.
POLICY_SERVING = {"smollm2": dict(max_model_len=8192)}


@dataclass(frozen=True)
class DemoSettings:
    run: str
    quick: bool
    policy: str
    # Training: GRPO steps and a checkpoint every `save_every` (step 0, the warm-started policy, too).
    steps: int
    save_every: int
    # Evaluation: items per BFCL category (the same ids every pass) and repeats at first/middle/last.
    sample: int
    repeat_passes: int
    seed: int = 0
    # The tiny policy rarely earns a mean reward >= 0.5, so the curriculum would sit at its floor of 1;
    # starting higher lets the demo show the level moving (down, by 3 per step with reward <= 0).
    level_initial: int = 40
    max_model_len: int = 32768
    # BFCL's chat path sends no max_tokens; a tiny policy that never emits its end token would generate up
    # to the whole window on every turn, so the demo's server caps each answer.
    max_new_tokens: int = 128
    health_timeout_s: float = 900.0
    checkpoints: Path = field(default_factory=lambda: volume("checkpoints"))
    runs: Path = field(default_factory=lambda: volume("runs"))
    results: Path = field(default_factory=lambda: volume("results"))

    @classmethod
    def make(cls, run: str | None = None, quick: bool = False, policy: str = "tiny", **overrides) -> DemoSettings:
        if policy not in SIZES:
            raise ValueError(f"policy {policy!r}: expected one of {sorted(SIZES)}")
        base = dict(SIZES[policy]["quick" if quick else "full"], **POLICY_SERVING.get(policy, {}))
        base.update({k: v for k, v in overrides.items() if v is not None})
        run = run or time.strftime("demo-%Y%m%d-%H%M%S", time.gmtime())
        return cls(run=run, quick=quick, policy=policy, **base)

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
