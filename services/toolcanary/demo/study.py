"""`python -m toolcanary.demo.study` (`make study`): the abstention ablation measured on CPU, with seeds.

Two arms that differ only in the share of abstention tasks GRPO trains on (none, as TRUSTEE; `--no-call-fraction`
of them), each trained from one starting policy with every seed of `--seeds`. Every run is the demo's pipeline
(`toolcanary.demo.pipeline`) with the study's settings:

- **one starting policy**: every run warm-starts with `--starting-policy-seed` (its weights, its warm-start tasks,
  a quarter of them abstention tasks so that declining is in its repertoire, and the task pool), so the second
  and later runs copy it from the starting-policy cache; the seed of a run moves only its GRPO sampling;
- **an item bank chosen for what can move**, the same for every run (`python -m toolcanary.evaluate bank`): every
  `irrelevance` item, a seeded sample of `live_irrelevance`, a sample of each of the ten single-turn call
  categories (the "Tool call required" aggregate), and one item of each multi-turn category (the headline table
  needs every aggregate; a small policy scores none of them);
- **three checkpoints** (the first, middle and last step; the first and last under 4 steps) scored once each:
  the spread between seeds carries the sampling noise of the passes as well as that of training.

Then `make_figures --compare` over the arms (its table, the training table, the figure and the report page under
`<results>/_compare/`), and the closing screen: the per-arm changes with intervals, B − A with the between-seed
interval, whether each run's policy moved, and the time per phase. The bank and the timings are kept under
`<results>/_study/<prefix>/`. A study that stopped resumes with the same `--run`.

    make study                                       # the tiny policy, two seeds per arm
    make study POLICY=smollm2                        # SmolLM2-135M: far slower on 2 cores (LOG.md)
    python -m toolcanary.demo.study --seeds 1 2 3 --steps 30 --no-call-fraction 0.25
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from toolcanary.demo.pipeline import run_demo
from toolcanary.demo.processes import ChildFailed
from toolcanary.demo.settings import VENVS, DemoSettings, StudyOptions, fresh_run_id
from toolcanary.demo.timing import PhaseClock, breakdown_lines, timings
from toolcanary.settings import add_flags

EPILOG = """examples:
  make study
  make study POLICY=smollm2
  python -m toolcanary.demo.study --quick --seeds 1 2                  # the plumbing in minutes
  python -m toolcanary.demo.study --run study-a --seeds 1 2 3 --no-call-fraction 0.25
"""
STUDY_DIR = "_study"
BANK_FILE, TIMINGS_FILE = "bank.json", "study_timings.json"
# The ten single-turn call categories: "Tool call required" needs every one of them; the headline table needs
# every aggregate, so a few multi-turn items too.
CALL_CATEGORIES = ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
                   "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
MULTI_TURN_CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m toolcanary.demo.study",
        description="The abstention ablation on CPU with seeds: two arms x seeds from one starting policy, their "
                    "first, middle and last checkpoints scored on one BFCL item bank, then one table of the "
                    "per-arm changes and B - A with an interval across seeds. The other settings are the demo's "
                    "(TOOLCANARY_DEMO_<NAME>, python -m toolcanary.demo --help).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_flags(parser, StudyOptions)
    return parser


def bank_sizes(options: StudyOptions) -> dict[str, int]:
    """Items per category of the bank (0: every item)."""
    return {"irrelevance": options.irrelevance_items, "live_irrelevance": options.live_irrelevance_items,
            **dict.fromkeys(CALL_CATEGORIES, options.call_items),
            **dict.fromkeys(MULTI_TURN_CATEGORIES, options.multi_turn_items)}


def study_runs(prefix: str, options: StudyOptions, bank: Path) -> dict[str, list[DemoSettings]]:
    """The runs of each arm ("a": no abstention tasks, "b": the share), one per seed, alike but for the seed."""
    shares = {"a": ("baseline", 0.0), "b": ("abstain", options.no_call_fraction)}
    save_every = options.steps // 2 if options.steps >= 4 else options.steps
    return {side: [DemoSettings.from_env(
        run=f"{prefix}-{name}-s{seed}", policy=options.policy, seed=seed, no_call_fraction=share,
        steps=options.steps, save_every=save_every, repeat_passes=1, ids_file=bank,
        starting_policy_seed=options.starting_policy_seed, lr=options.lr,
        warm_start_no_call_fraction=options.warm_start_no_call_fraction)
        for seed in options.seeds] for side, (name, share) in shares.items()}


def write_bank(options: StudyOptions, path: Path) -> None:
    if path.is_file():
        return  # a resumed study scores the bank its first runs scored
    path.parent.mkdir(parents=True, exist_ok=True)
    sizes = [f"{category}={size}" for category, size in bank_sizes(options).items()]
    done = subprocess.run([str(VENVS / "eval" / "bin" / "python"), "-m", "toolcanary.evaluate", "bank", "--sizes",
                           *sizes, "--seed", str(options.bank_seed), "--out", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise ChildFailed(f"the item bank could not be written: {done.stderr.strip()}")


def compare(runs: dict[str, list[DemoSettings]]) -> Path:
    """`make_figures --compare A1,A2 B1,B2 --report`; returns the comparison's folder."""
    results = runs["a"][0].results
    argv = [str(VENVS / "analysis" / "bin" / "make_figures"), "--results-dir", str(results), "--compare",
            *(",".join(s.run for s in runs[side]) for side in ("a", "b")), "--report"]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise ChildFailed(f"make_figures --compare failed (status {done.returncode}): {done.stderr.strip()[-2000:]}")
    written = [line.removeprefix("wrote ") for line in done.stderr.splitlines() if line.startswith("wrote ")]
    table = next(Path(p) for p in written if p.endswith("compare.md"))
    return table.parent.parent


def closing(folder: Path, spent: dict, wall_s: float) -> str:
    """The comparison's B-against-A section (its table, prose and training table), then the time per phase."""
    text = (folder / "tables" / "compare.md").read_text()
    section = text[text.rindex("## ", 0, text.index(" (B) against ")):]
    return "\n".join([
        "", f"ToolCanary study finished in {wall_s / 60:.1f} min", "", section.rstrip(), "",
        *breakdown_lines(spent), "",
        f"  report page  {folder / 'report' / 'index.html'}",
        f"  tables       {folder / 'tables'}/ (compare.md, compare.csv, compare.json)",
    ])


def main(argv: Sequence[str] | None = None) -> int:
    options = StudyOptions.of(build_parser().parse_args(argv))
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if not 0 < options.no_call_fraction <= 1:
        print(f"error: --no-call-fraction: expected a share in (0, 1], got {options.no_call_fraction}; the baseline "
              "arm already has none", file=sys.stderr)
        return 2
    if len(set(options.seeds)) < 2:
        print(f"error: --seeds: expected two different seeds or more (the interval between arms rests on the "
              f"spread between seeds), got {options.seeds}", file=sys.stderr)
        return 2
    options = options.sized()
    prefix = options.run or fresh_run_id("study")
    folder = DemoSettings.from_env(run=prefix).results / STUDY_DIR / prefix
    bank = folder / BANK_FILE
    started, clock = time.monotonic(), PhaseClock()
    try:
        with clock.phase("item bank"):
            write_bank(options, bank)
        runs = study_runs(prefix, options, bank)
        print(f"study {prefix}: {len(options.seeds)} seeds x 2 arms (abstention share 0 and "
              f"{options.no_call_fraction:g}), {options.steps} GRPO steps each, {options.policy} policy; item bank "
              f"{bank} ({sum(map(len, json.loads(bank.read_text()).values()))} items)", flush=True)
        for side in ("a", "b"):
            for run in runs[side]:
                print(f"\n=== {run.run}: abstention share {run.no_call_fraction:g}, seed {run.seed} ===", flush=True)
                run_demo(run, clock)
        with clock.phase("compare"):
            compared = compare(runs)
    except ChildFailed as err:
        print(f"\nstudy failed: {err}\nResume after fixing it with: make study RUN={prefix}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\nstudy interrupted; every process it started was stopped. Resume: make study RUN={prefix}",
              file=sys.stderr)
        return 130
    spent = timings(clock, [s.result_dir for side in runs.values() for s in side])
    (folder / TIMINGS_FILE).write_text(json.dumps(spent, indent=2) + "\n")
    print(closing(compared, spent, time.monotonic() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
