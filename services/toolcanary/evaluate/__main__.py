"""`python -m toolcanary.evaluate`: score served checkpoints on BFCL V4 over HTTP.

Subcommands: `run` (one pass of one served checkpoint), `eval-all` (every published checkpoint not yet
scored, plus the repeats), `watch` (score checkpoints as they are published), `ls` (categories and item
counts), `guards` (the phases of a pass and the guards each one runs). Defaults live in toolcanary.evaluate.settings.EvalSettings; environment variables override them
and flags override both.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from toolcanary.contract.bfcl import BY_NAME, OFFLINE_CATEGORIES
from toolcanary.contract.errors import ContractError
from toolcanary.evaluate.runner import PassOptions, PassRefused, run_pass
from toolcanary.evaluate.settings import EvalSettings
from toolcanary.serve.command import served_model_name
from toolcanary.settings import add_flags

RUN_EXAMPLES = """examples:
  python -m toolcanary.evaluate run --run grpo1 --step 200 --pass 1 --base-url http://serve:8000/v1 --model grpo1-step0200
  python -m toolcanary.evaluate run --run grpo1 --step 0 --pass 1 --model base --base-model Qwen/Qwen3-4B --sample 20 --seed 0
  python -m toolcanary.evaluate run --step 200 --pass 1 --resume        # run from $TOOLCANARY_RUN, model <run>-step0200
  python -m toolcanary.evaluate run --run smoke --step 0 --pass 1 --model tiny --base-model tiny --categories irrelevance simple_python
"""
ALL_EXAMPLES = """examples:
  python -m toolcanary.evaluate eval-all --run grpo1 --serving compose
  python -m toolcanary.evaluate eval-all --run grpo1 --serving local --serve-command "python -m vllm.entrypoints.openai.api_server --model {model_dir} --served-model-name {served_model} --port {port} --enable-auto-tool-choice --tool-call-parser hermes --reasoning-parser qwen3"
  python -m toolcanary.evaluate watch --run grpo1 --serving compose --until-step 200
  python -m toolcanary.evaluate eval-all --run grpo1 --serving compose --gpus 0 1 2 3 4 5 6 7
"""
GUARDS_EXAMPLES = """examples:
  python -m toolcanary.evaluate guards
"""


# Fields whose flags the subcommands declare themselves (below); the others come from add_flags.
OWN_FLAGS = ("results_dir", "checkpoints_dir", "base_url", "api_key", "threads", "request_timeout_s",
             "request_retries", "phase_timeout_s", "sample", "sample_multi_turn", "seed", "overlong_counted_wrong",
             "run", "serving", "serve_command", "serve_port", "health_timeout_s", "repeat_steps", "repeat_passes",
             "watch_interval_s", "gpus")


def _common(parser: argparse.ArgumentParser) -> None:
    add_flags(parser.add_argument_group("more settings (env TOOLCANARY_EVALUATE_<NAME>)"), EvalSettings,
              skip=OWN_FLAGS)
    wiring = parser.add_argument_group("wiring (env TOOLCANARY_EVALUATE_<NAME>, TOOLCANARY_RESULTS_DIR, TOOLCANARY_CHECKPOINTS_DIR)")
    wiring.add_argument("--results-dir", type=Path, dest="results_dir")
    wiring.add_argument("--checkpoints-dir", type=Path, dest="checkpoints_dir")
    wiring.add_argument("--base-url", dest="base_url", help="the server's OpenAI API root, ending in /v1")
    wiring.add_argument("--api-key", dest="api_key")
    wiring.add_argument("--threads", type=int, help="concurrent BFCL requests")
    wiring.add_argument("--request-timeout-s", type=float, dest="request_timeout_s")
    wiring.add_argument("--request-retries", type=int, dest="request_retries")
    wiring.add_argument("--phase-timeout-s", type=float, dest="phase_timeout_s")
    items = parser.add_argument_group("items")
    items.add_argument("--categories", nargs="+", help=f"default: the {len(OFFLINE_CATEGORIES)} offline categories")
    items.add_argument("--sample", type=int, help="K items per category, the same for every pass of the run "
                       "(default TOOLCANARY_EVALUATE_SAMPLE, else every item)")
    items.add_argument("--sample-multi-turn", type=int, dest="sample_multi_turn",
                       help="with --sample: this many items from each multi-turn category instead (default "
                            "TOOLCANARY_EVALUATE_SAMPLE_MULTI_TURN, else as many as --sample)")
    items.add_argument("--seed", type=int, help="seed of the sample (default TOOLCANARY_EVALUATE_SEED, else 0)")
    items.add_argument("--ids-file", type=Path, help='JSON {"category": ["id", ...]}: score exactly these items')
    overlong = items.add_mutually_exclusive_group()
    overlong.add_argument("--overlong-wrong", dest="overlong_counted_wrong", action="store_const", const=True,
                          help="items longer than the served context count as wrong (default)")
    overlong.add_argument("--overlong-excluded", dest="overlong_counted_wrong", action="store_const", const=False,
                          help="items longer than the served context leave the total")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m toolcanary.evaluate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="score one pass of one served checkpoint", epilog=RUN_EXAMPLES,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("--run", help="run id (default: $TOOLCANARY_RUN)")
    run.add_argument("--step", type=int, required=True)
    run.add_argument("--pass", type=int, default=1, dest="pass_index", help="1-based repeat index")
    run.add_argument("--model", help="the server's --served-model-name (default: <run>-stepNNNN)")
    run.add_argument("--checkpoint-dir", type=Path, help="default: <checkpoints>/<run>/step_NNNN")
    run.add_argument("--base-model", help="name of the untrained model served when there is no checkpoint")
    run.add_argument("--resume", action="store_true", help="finish an interrupted pass with the same arguments")
    run.add_argument("--stop-after", choices=("generate", "evaluate"), help="stop after this phase; finish with --resume")
    _common(run)
    for name, text in (("eval-all", "score every published checkpoint not yet scored, plus the repeats"),
                       ("watch", "score checkpoints as they are published")):
        sub = commands.add_parser(name, help=text, epilog=ALL_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
        sub.add_argument("--run", help="run id (default: $TOOLCANARY_RUN)")
        sub.add_argument("--serving", choices=("local", "compose"))
        sub.add_argument("--serve-command", dest="serve_command",
                         help="local serving: command template with {model_dir} {served_model} {port} {step}")
        sub.add_argument("--serve-port", type=int, dest="serve_port")
        sub.add_argument("--health-timeout-s", type=float, dest="health_timeout_s")
        sub.add_argument("--repeat-steps", type=int, nargs="*", dest="repeat_steps")
        sub.add_argument("--repeat-passes", type=int, dest="repeat_passes")
        sub.add_argument("--gpus", nargs="+", dest="gpus", metavar="GPU",
                         help="serve this many checkpoints at once, one server per GPU, on --serve-port, "
                              "--serve-port + 1, ... (e.g. --gpus 0 1 2 3 after training)")
        if name == "watch":
            sub.add_argument("--until-step", type=int, help="stop once this step is scored")
            sub.add_argument("--watch-interval-s", type=float, dest="watch_interval_s")
            sub.add_argument("--max-idle-s", type=float, help="stop after this long without a new checkpoint")
        _common(sub)
    commands.add_parser("ls", help="list BFCL categories, item counts and which run by default")
    commands.add_parser("guards", help="list the phases of a pass and every guard: its phase and the failure it prevents",
                        epilog=GUARDS_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    return parser


def settings_from(args: argparse.Namespace) -> EvalSettings:
    names = [n for n in EvalSettings.model_fields if n not in ("run", "sample", "sample_multi_turn", "seed",
                                                                "repeat_steps")]
    changes = {n: getattr(args, n, None) for n in names}
    for name in ("repeat_steps", "gpus"):
        if getattr(args, name, None) is not None:
            changes[name] = tuple(getattr(args, name))
    settings = EvalSettings.from_env().replace(**changes)
    # The item sample: a flag wins, then the setting (0 there meaning every item).
    if getattr(args, "sample", None) is None and settings.sample > 0:
        args.sample = settings.sample
    if getattr(args, "sample_multi_turn", None) is None and settings.sample_multi_turn > 0:
        args.sample_multi_turn = settings.sample_multi_turn
    if hasattr(args, "seed") and args.seed is None:
        args.seed = settings.seed
    return settings


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "ls":
        for category in BY_NAME.values():
            default = "default" if category.name in OFFLINE_CATEGORIES else "opt-in"
            print(f"{category.name:26s} {category.group:10s} {category.items:5d}  {default}")
        return 0
    if args.command == "guards":
        from toolcanary.evaluate.guards import describe

        print(describe(), end="")
        return 0
    try:
        settings = settings_from(args)
        args.run = args.run or settings.run
        if not args.run:
            raise ContractError("--run", "a run id", "nothing", "Pass --run RUN or set TOOLCANARY_RUN")
        if args.command == "run":
            served = args.model or served_model_name(args.run, args.step, settings.served_model_template)
            opts = PassOptions(
                run=args.run, step=args.step, pass_index=args.pass_index, served_model=served,
                categories=args.categories, sample=args.sample, sample_multi_turn=args.sample_multi_turn,
                seed=args.seed, ids_file=args.ids_file,
                checkpoint_dir=args.checkpoint_dir, base_model=args.base_model, resume=args.resume,
                stop_after=args.stop_after,
            )
            rows = run_pass(settings, opts)
            for row in rows:
                print(f"{row.category:26s} {row.correct:5d}/{row.total:<5d} {100.0 * row.correct / max(row.total, 1):6.2f}%")
            if not rows:
                print(f"stopped after {args.stop_after}; finish with --resume")
            return 0
        from toolcanary.evaluate.schedule import eval_all, watch

        if args.command == "eval-all":
            done = eval_all(settings, args.run, args)
        else:
            done = watch(settings, args.run, args)
        print(f"{len(done)} passes scored: {', '.join(f'step {s} pass {p}' for s, p in done) or 'none'}")
        return 0
    except PassRefused as err:
        print(f"pass refused, no rows written: {err}", file=sys.stderr)
        return 3
    except ContractError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
