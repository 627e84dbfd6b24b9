"""`python -m toolcanary.demo.ablation`: the abstention ablation in miniature on CPU, then the two runs compared.

Two demo runs that differ only in the share of abstention tasks the curriculum asks for during GRPO (the GPU
ablation's one knob, recipes/trustee-qwen3-4b-abstain/): `<run>-baseline` trains on none, as TRUSTEE does,
`<run>-abstain` on `--no-call-fraction` of them. Both start from the same starting policy (the second copies it
from the starting-policy cache the first filled: its recipe does not depend on that share), are scored on the
same BFCL sample, and `make_figures --compare` then writes the side-by-side table, the difference of their deltas
and the figure under `<results>/_compare/<run>-baseline_vs_<run>-abstain/`. On CPU a 135M policy and a step or
two show that the comparison runs end to end, not what the ablation finds.

    make demo-ablation                              # SmolLM2, the quick sizes, abstention share 0.5
    make demo-ablation POLICY=tiny                  # the tiny random policy: the fast plumbing run
    python -m toolcanary.demo.ablation --run abl --no-call-fraction 0.25 --full
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import time

from toolcanary.demo.pipeline import run_demo
from toolcanary.demo.processes import ChildFailed
from toolcanary.demo.settings import VENVS, AblationOptions, DemoSettings, fresh_run_id
from toolcanary.demo.timing import PhaseClock
from toolcanary.settings import add_flags

EPILOG = """examples:
  make demo-ablation
  make demo-ablation POLICY=tiny
  python -m toolcanary.demo.ablation --run abl --no-call-fraction 0.25 --full
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m toolcanary.demo.ablation",
        description="Two CPU demo runs differing only in the share of abstention tasks, then --compare. The other "
                    "settings are the demo's (TOOLCANARY_DEMO_<NAME>, python -m toolcanary.demo --help).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_flags(parser, AblationOptions)
    return parser


def arms(prefix: str, *, quick: bool, policy: str, no_call_fraction: float) -> list[DemoSettings]:
    """The baseline arm (no abstention tasks) and the abstention arm: the same settings but the run id and share."""
    return [DemoSettings.from_env(run=f"{prefix}-{name}", quick=quick, policy=policy, no_call_fraction=share)
            for name, share in (("baseline", 0.0), ("abstain", no_call_fraction))]


def main(argv: list[str] | None = None) -> int:
    options = AblationOptions.of(build_parser().parse_args(argv))
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if not 0 < options.no_call_fraction <= 1:
        print(f"error: --no-call-fraction: expected a share in (0, 1], got {options.no_call_fraction}; the baseline "
              "arm already has none", file=sys.stderr)
        return 2
    prefix = options.run or fresh_run_id("ablation")
    both = arms(prefix, quick=not options.full, policy=options.policy, no_call_fraction=options.no_call_fraction)
    started = time.monotonic()
    for arm in both:
        print(f"\n=== arm {arm.run}: abstention share {arm.no_call_fraction:g} ===", flush=True)
        try:
            run_demo(arm, PhaseClock())
        except ChildFailed as err:
            print(f"\nablation failed in {arm.run}: {err}\nResume after fixing it with: make demo-ablation "
                  f"RUN={prefix}", file=sys.stderr)
            return 1
    baseline, abstain = both
    compared = subprocess.run([str(VENVS / "analysis" / "bin" / "make_figures"), "--results-dir",
                               str(baseline.results), "--compare", baseline.run, abstain.run])
    if compared.returncode != 0:
        return compared.returncode
    print(f"\nablation miniature finished in {(time.monotonic() - started) / 60:.1f} min: "
          f"{baseline.results / '_compare' / f'{baseline.run}_vs_{abstain.run}'}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
