"""`python -m toolcanary.evaluate`: score served checkpoints on BFCL V4 over HTTP.

Subcommands: `run` (one pass of one served checkpoint), `eval-all` (every published checkpoint not yet
scored, plus the repeats), `watch` (score checkpoints as they are published), `ls` (categories and item
counts), `bank` (write a fixed item bank for --ids-file), `guards` (the phases of a pass and the guards each one runs). Defaults live in
toolcanary.evaluate.settings.EvalSettings; environment variables override them and flags override both.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from toolcanary.contract.bfcl import BY_NAME, OFFLINE_CATEGORIES
from toolcanary.contract.errors import ContractError, UsageError
from toolcanary.evaluate.runner import PassOptions, PassRefused, run_pass
from toolcanary.evaluate.settings import (
    SCHEDULE_ONLY,
    WATCH_ONLY,
    EvalSettings,
    ItemChoice,
    PassChoice,
    Verbosity,
    WatchLimits,
)
from toolcanary.serve.command import served_model_name
from toolcanary.settings import add_flags, given, resolve_defaults

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


GLOBAL_EXAMPLES = """examples:
  python -m toolcanary.evaluate ls
  python -m toolcanary.evaluate run --run grpo1 --step 200 --pass 1 --base-url http://serve:8000/v1
  python -m toolcanary.evaluate eval-all --run grpo1 --serving compose
  python -m toolcanary.evaluate run --help        # every flag of a subcommand, with its default
"""
LS_EXAMPLES = """examples:
  python -m toolcanary.evaluate ls
"""
BANK_EXAMPLES = """examples:
  python -m toolcanary.evaluate bank --sizes irrelevance=0 live_irrelevance=80 simple_python=10 --out bank.json
  python -m toolcanary.evaluate eval-all --run grpo1 --serving compose --ids-file bank.json
"""
SETTINGS_TITLE = "settings (each also TOOLCANARY_EVALUATE_<NAME>; results and checkpoints also TOOLCANARY_<NAME>_DIR)"


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The evaluation's command line; every flag comes from EvalSettings or an options class of its subcommand."""
    defaults = resolve_defaults(EvalSettings, argv)
    parser = argparse.ArgumentParser(prog="python -m toolcanary.evaluate", description=__doc__,
                                     epilog=GLOBAL_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(parser, Verbosity)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="score one pass of one served checkpoint", epilog=RUN_EXAMPLES,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(run, PassChoice, title="pass")
    add_flags(run, ItemChoice, title="items")
    add_flags(run, EvalSettings, skip=SCHEDULE_ONLY, defaults=defaults, title=SETTINGS_TITLE)
    for name, text in (("eval-all", "score every published checkpoint not yet scored, plus the repeats"),
                       ("watch", "score checkpoints as they are published")):
        sub = commands.add_parser(name, help=text, epilog=ALL_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
        if name == "watch":
            add_flags(sub, WatchLimits, title="when to stop")
        add_flags(sub, ItemChoice, title="items")
        add_flags(sub, EvalSettings, skip=() if name == "watch" else WATCH_ONLY, defaults=defaults,
                  title=SETTINGS_TITLE)
    commands.add_parser("ls", help="list BFCL categories, item counts and which run by default", epilog=LS_EXAMPLES,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    bank = commands.add_parser("bank", help="write a fixed item bank for --ids-file: each category at its own size",
                               epilog=BANK_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    bank.add_argument("--sizes", nargs="+", required=True, metavar="CATEGORY=K",
                      help="items per category (0: every item), drawn with --seed as --sample draws them")
    bank.add_argument("--seed", type=int, default=0, help="seed of the draw (default: 0)")
    bank.add_argument("--out", required=True, help='the JSON file to write, {"category": ["id", ...]}')
    commands.add_parser("guards", help="list the phases of a pass and every guard: its phase and the failure it prevents",
                        epilog=GUARDS_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    return parser


def settings_from(args: argparse.Namespace) -> EvalSettings:
    """The settings of a parsed command line: the flags it gave over the environment over the defaults."""
    return EvalSettings.from_env(**given(args, EvalSettings))


def write_bank(sizes: list[str], seed: int, out: str) -> int:
    from toolcanary.evaluate.bfcl_data import item_bank

    parsed = {}
    for size in sizes:
        category, _, count = size.partition("=")
        if not count.isdigit():
            print(f"error: --sizes: expected CATEGORY=K with K a number of items (0: every item), got {size!r}",
                  file=sys.stderr)
            return 2
        parsed[category] = int(count)
    try:
        bank = item_bank(parsed, seed)
    except ContractError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    Path(out).write_text(json.dumps(bank, indent=1) + "\n")
    print(f"{sum(map(len, bank.values()))} items in {len(bank)} categories -> {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "ls":
        for category in BY_NAME.values():
            default = "default" if category.name in OFFLINE_CATEGORIES else "opt-in"
            print(f"{category.name:26s} {category.group:10s} {category.items:5d}  {default}")
        return 0
    if args.command == "bank":
        return write_bank(args.sizes, args.seed, args.out)
    if args.command == "guards":
        from toolcanary.evaluate.guards import describe

        print(describe(), end="")
        return 0
    try:
        settings = settings_from(args)
        run = settings.run
        if not run:
            raise UsageError("--run", "a run id", "nothing", "Pass --run RUN or set TOOLCANARY_RUN")
        items = ItemChoice.of(args)
        if args.command == "run":
            chosen = PassChoice.of(args)
            served = chosen.model or served_model_name(run, chosen.step, settings.served_model_template)
            opts = PassOptions(
                run=run, step=chosen.step, pass_index=chosen.pass_index, served_model=served,
                categories=items.categories, sample=settings.sample or None,
                sample_multi_turn=settings.sample_multi_turn or None, seed=settings.seed, ids_file=items.ids_file,
                checkpoint_dir=chosen.checkpoint_dir, base_model=chosen.base_model, resume=chosen.resume,
                stop_after=chosen.stop_after,
            )
            rows = run_pass(settings, opts)
            for row in rows:
                print(f"{row.category:26s} {row.correct:5d}/{row.total:<5d} {100.0 * row.correct / max(row.total, 1):6.2f}%")
            if not rows:
                print(f"stopped after {chosen.stop_after}; finish with --resume")
            return 0
        from toolcanary.evaluate.schedule import eval_all, watch

        if args.command == "eval-all":
            done = eval_all(settings, run, items)
        else:
            done = watch(settings, run, items, WatchLimits.of(args))
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
