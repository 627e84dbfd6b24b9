"""The demo's pipeline: simulator, starting policy, GRPO, serving and scoring, audit and analysis, one run.

`python -m toolcanary.demo` runs it once and prints the closing screen; `python -m toolcanary.demo.study`
runs it for each run of the abstention study (two arms x seeds). Every process it starts is stopped at the end, on failure
and on Ctrl-C (`ProcessGroup`).

    run_demo(DemoSettings.from_env(quick=True, policy="tiny"), PhaseClock())
"""

from __future__ import annotations

import os
import secrets

from toolcanary.common.loopback import free_port
from toolcanary.contract.csv_schemas import BFCL_BY_CATEGORY, TRAIN_METRICS, WARM_START
from toolcanary.demo.processes import ChildFailed, ProcessGroup
from toolcanary.demo.progress import FileProgress, row_count, scored_passes
from toolcanary.demo.settings import VENVS, DemoSettings
from toolcanary.demo.timing import PhaseClock, count
from toolcanary.train.settings import TrainSettings

ENVIRONMENTS = ("simulator", "train", "serve", "eval", "analysis")


def run_demo(s: DemoSettings, clock: PhaseClock) -> None:
    missing = [env for env in ENVIRONMENTS if not (VENVS / env / "bin" / "python").exists()]
    if missing:
        raise ChildFailed(f"environments {missing} are missing under .venvs/: run `make setup` first")
    multi_turn = f" ({s.sample_multi_turn} per multi-turn one)" if s.sample_multi_turn else ""
    items = f"the BFCL items of {s.ids_file}" if s.ids_file else f"{s.sample} item(s) per BFCL category{multi_turn}"
    print(
        f"run {s.run}: {count(s.steps, 'GRPO step')}, checkpoints at {s.checkpoint_steps}, "
        f"{items}, {count(s.repeat_passes, 'pass')} at {s.repeat_steps} "
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
        common = ["--quiet", "--run", s.run, "--simulator-url", url, "--policy", s.policy, "--seed", str(s.seed),
                  "--starting-policy-cache", str(s.policy_cache),
                  *given_flags(s, ("starting_policy_seed", "warm_start_no_call_fraction"))]
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
                                *given_flags(s, ("no_call_fraction", "lr"))],
                      s.logs / "train.log", poll=bar.poll, env=token)
        bar.close()
        group.stop("simulator")

        # --- serve each checkpoint with vLLM and score it on BFCL ---------------------------------
        # Each checkpoint is served in the thinking mode its manifest records (the CPU run trains without),
        # and each answer is capped by the client (see DemoSettings.max_tokens).
        # One server for the run: each later checkpoint is loaded into it (eval-all --reload, its default).
        serve = (f"{s.python('serve')} -m toolcanary.serve --checkpoint {{model_dir}} --served-model-name "
                 f"{{served_model}} --port {{port}} --max-model-len {s.max_model_len} --reloadable -- --enforce-eager")
        chosen = (["--ids-file", str(s.ids_file)] if s.ids_file else
                 ["--sample", str(s.sample), "--seed", str(s.seed),
                  *(["--sample-multi-turn", str(s.sample_multi_turn)] if s.sample_multi_turn else [])])
        bar = FileProgress("eval (serve + BFCL)", s.expected_passes,
                           lambda: scored_passes(s.result_dir / BFCL_BY_CATEGORY), "pass")
        with clock.phase("eval"):
            group.run("eval", [s.python("eval"), "-m", "toolcanary.evaluate", "eval-all", "--run", s.run,
                               "--serving", "local", "--serve-command", serve, "--serve-port", str(free_port()),
                               "--health-timeout-s", str(s.health_timeout_s), "--repeat-steps",
                               *map(str, s.repeat_steps), "--repeat-passes", str(s.repeat_passes),
                               "--passes-at-once", str(s.repeat_passes), "--max-tokens", str(s.max_tokens),
                               *chosen],
                      s.logs / "eval.log", poll=bar.poll)
        bar.close()

        # --- audit, then analysis (its report page carries the audit's summary) -------------------------
        with clock.phase("audit"):
            group.run("audit", [s.python("eval"), "-m", "toolcanary.audit", "--run", s.run], s.logs / "audit.log")
        with clock.phase("analysis"):
            group.run("analysis", [str(VENVS / "analysis" / "bin" / "make_figures"), "--data", str(s.result_dir),
                                   "--table", "--findings", "--fig", "all", "--items", "--stability", "--report",
                                   "--checkpoints-dir", str(s.checkpoints)],
                      s.logs / "analysis.log")


def given_flags(s: DemoSettings, names: tuple[str, ...]) -> list[str]:
    """The trainer's flags of the demo settings that are set (unset ones leave the trainer's defaults)."""
    return [part for name in names if getattr(s, name) is not None
            for part in (f"--{name.replace('_', '-')}", str(getattr(s, name)))]
