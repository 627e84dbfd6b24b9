"""Check a verl recipe without a GPU: run verl's own entry point up to the moment it would start Ray.

`python -m verl.trainer.main_ppo` composes the recipe with verl's Hydra configuration, validates it
(`validate_config`) and only then starts Ray and asks for GPUs. This module runs that very entry point
with the given arguments, stops it at `ray.init`, and then checks what would otherwise fail minutes
later on the GPU workers: the dataclass configs verl's workers build, the classes and files the recipe
names, the attention implementation, the chat-template mode that publishing records, the agent loop's mode
(in mode trustee, the TRUSTEE checkout it reads, verified against its commit), the environment handed to every Ray
worker, and the folders the trainer writes.

    python -m toolcanary.train check-recipe -- --config-path recipes/trustee-qwen3-4b \
        --config-name trustee_qwen3_4b actor_rollout_ref.rollout.agent.agent_loop_config_path=...

`recipes/trustee-qwen3-4b/train.sh` runs it before the real launch, with the same arguments.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from toolcanary.contract.errors import ContractError

# What each attention implementation needs installed besides torch and transformers: (module, distribution).
ATTENTION_PACKAGES = {"flash_attention_2": ("flash_attn", "flash-attn"),
                      "flash_attention_3": ("flash_attn_interface", "flash-attn-3"), "sdpa": None, "eager": None}


@dataclass
class RecipeReport:
    """What verl would have started with, and the checks that passed."""

    config: Any
    ray_init: dict
    checks: list[str] = field(default_factory=list)

    def passed(self, text: str) -> None:
        self.checks.append(text)


class _StopBeforeRay(SystemExit):
    """Raised from the stand-in for `ray.init`; a SystemExit so that Hydra's error handler lets it through."""


def compose_like_main_ppo(argv: list[str]) -> tuple[Any, dict]:
    """(config, ray.init kwargs) exactly as `python -m verl.trainer.main_ppo ARGV` would reach `ray.init`.

    Raises:
        ContractError: Hydra or verl's `validate_config` rejected the recipe (the message is verl's).
    """
    import ray
    from verl.trainer import main_ppo

    captured: dict[str, Any] = {}
    real_run_ppo = main_ppo.run_ppo

    def run_ppo(config, task_runner_class) -> None:
        captured["config"] = config
        real_run_ppo(config, task_runner_class)

    def stop(**kwargs) -> None:
        captured["ray_init"] = kwargs
        raise _StopBeforeRay(0)

    saved_argv = sys.argv
    sys.argv = ["verl.trainer.main_ppo", *argv]
    try:
        with mock.patch.object(main_ppo, "run_ppo", run_ppo), mock.patch.object(ray, "init", stop), \
                mock.patch.object(ray, "is_initialized", lambda: False):
            main_ppo.main()
    except _StopBeforeRay:
        pass
    except SystemExit as stop_code:  # Hydra reports an invalid config or a failed check this way
        raise ContractError("the recipe", "a configuration verl's main_ppo accepts",
                            f"main_ppo stopped with exit code {stop_code.code} (its message is printed above)",
                            "Fix the key it names in the recipe YAML or in the overrides") from None
    finally:
        sys.argv = saved_argv
    if "ray_init" not in captured:
        raise ContractError("the recipe", "main_ppo to reach ray.init", "it returned without starting Ray",
                            "Check trainer.use_v1 and the entry point")
    return captured["config"], captured["ray_init"]


def check_recipe(argv: list[str]) -> RecipeReport:
    """Compose `argv` as main_ppo does, then run every check a GPU run would otherwise discover late.

    Raises:
        ContractError: the first check that fails, naming the key and what to do.
    """
    from omegaconf import OmegaConf

    config, ray_init = compose_like_main_ppo(argv)
    report = RecipeReport(config=config, ray_init=ray_init)
    report.passed("composed with verl's ppo_trainer and accepted by verl's validate_config")
    OmegaConf.resolve(config)  # what verl's TaskRunner does first; a missing variable fails here
    report.passed("every interpolation resolves")
    _check_worker_configs(config, report)
    _check_classes(config, report)
    _check_attention(config, report)
    _check_model(config, report)
    _check_thinking(config, report)
    _check_agent_loop_mode(config, report)
    _check_ray_environment(ray_init, report)
    _check_data(config, report)
    _check_writable(config, ray_init, report)
    return report


def _check_worker_configs(config, report: RecipeReport) -> None:
    """The dataclasses verl's workers build from the config (each validates its own fields)."""
    from verl.utils.config import omega_conf_to_dataclass

    for key in ("actor_rollout_ref.actor", "actor_rollout_ref.rollout", "actor_rollout_ref.rollout.checkpoint_engine",
                "algorithm"):
        try:
            omega_conf_to_dataclass(_select(config, key))
        except Exception as err:  # verl raises assorted types from __post_init__
            raise ContractError(key, "a section verl's workers accept", f"{type(err).__name__}: {err}",
                                "Fix that section of the recipe") from err
    report.passed("actor, rollout, checkpoint engine and algorithm sections build verl's dataclass configs")


def _check_model(config, report: RecipeReport) -> None:
    """With a local model folder: verl's model config, and the model class built with the attention
    implementation the workers will ask transformers for (on the meta device: no weights are loaded)."""
    import torch
    from transformers import AutoModelForCausalLM
    from verl.utils.config import omega_conf_to_dataclass

    path = str(config.actor_rollout_ref.model.path)
    if not Path(path).is_dir():
        report.passed(f"model {path!r} is a hub id: its config is read when the workers download it")
        return
    try:
        model_config = omega_conf_to_dataclass(config.actor_rollout_ref.model)
        with torch.device("meta"):
            AutoModelForCausalLM.from_config(model_config.hf_config)
    except Exception as err:
        raise ContractError("actor_rollout_ref.model", "a model verl's workers can build",
                            f"{type(err).__name__}: {err}", "See override_config.attn_implementation") from err
    report.passed(f"model {Path(path).name!r} builds with attention "
                  f"{model_config.hf_config._attn_implementation!r}")


def _check_classes(config, report: RecipeReport) -> None:
    import yaml
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.trainer.ppo.checkpoint_callback import CheckpointCallback
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, AdvantageEstimator
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ
    from verl.utils.import_utils import load_class_from_fqn

    agent = config.actor_rollout_ref.rollout.agent
    named = {"actor_rollout_ref.rollout.agent.agent_loop_manager_class": (agent.agent_loop_manager_class,
                                                                            AgentLoopManagerTQ),
             "trainer.checkpoint_callback_class": (config.trainer.checkpoint_callback_class, CheckpointCallback)}
    for key, (fqn, base) in named.items():
        if not fqn:
            continue
        try:
            loaded = load_class_from_fqn(fqn, base.__name__)
        except Exception as err:
            raise ContractError(key, f"an importable {base.__name__} subclass", f"{fqn!r} ({err})") from err
        if not issubclass(loaded, base):
            raise ContractError(key, f"a subclass of {base.__name__}", fqn)
    estimator = config.algorithm.adv_estimator
    if estimator not in ADV_ESTIMATOR_REGISTRY and estimator not in {e.value for e in AdvantageEstimator}:
        raise ContractError("algorithm.adv_estimator", f"a registered estimator {sorted(ADV_ESTIMATOR_REGISTRY)}",
                            repr(estimator), "Register it in a module the recipe's hooks import")
    path = agent.agent_loop_config_path
    if not path or not Path(path).is_file():
        raise ContractError("actor_rollout_ref.rollout.agent.agent_loop_config_path",
                            "the absolute path of an existing agent-loop registry YAML", repr(path),
                            "train.sh passes <recipe folder>/agent_loops.yaml")
    for entry in yaml.safe_load(Path(path).read_text()):
        target = entry.get("_target_", "")
        module, _, name = target.rpartition(".")
        if importlib.util.find_spec(module) is None or not hasattr(importlib.import_module(module), name):
            raise ContractError(f"{path}: {entry.get('name')}", "an importable _target_", repr(target))
    if agent.default_agent_loop not in _agent_loop_registry:
        raise ContractError("actor_rollout_ref.rollout.agent.default_agent_loop",
                            f"a registered agent loop {sorted(_agent_loop_registry)}", repr(agent.default_agent_loop))
    report.passed(f"classes resolve: manager, callback, estimator {estimator!r}, agent loop "
                  f"{agent.default_agent_loop!r}")


def attention_implementation(config) -> str:
    """verl's model config asks transformers for flash_attention_2 unless the recipe says otherwise."""
    return config.actor_rollout_ref.model.get("override_config", {}).get("attn_implementation", "flash_attention_2")


def _check_attention(config, report: RecipeReport) -> None:
    implementation = attention_implementation(config)
    if implementation not in ATTENTION_PACKAGES:
        raise ContractError("actor_rollout_ref.model.override_config.attn_implementation",
                            f"one of {sorted(ATTENTION_PACKAGES)}", repr(implementation))
    package = (ATTENTION_PACKAGES[implementation] or (None, None))[0]
    if package is not None and importlib.util.find_spec(package) is None:
        raise ContractError("actor_rollout_ref.model.override_config.attn_implementation",
                            f"an implementation this environment can run ({package} for {implementation})",
                            f"{implementation} without {package} installed",
                            "Set it to sdpa, or install a wheel of it that matches torch and CUDA")
    report.passed(f"attention {implementation!r} is installed")


def _check_thinking(config, report: RecipeReport) -> None:
    thinking = config.data.get("apply_chat_template_kwargs", {}).get("enable_thinking")
    if not isinstance(thinking, bool):
        raise ContractError("data.apply_chat_template_kwargs.enable_thinking",
                            "true or false, set explicitly (checkpoints are served in the mode they trained in)",
                            repr(thinking))
    report.passed(f"chat template thinking mode set ({thinking})")


def _check_agent_loop_mode(config, report: RecipeReport) -> None:
    """The agent loop's mode and, in mode trustee, its checkout; the curriculum must play the same mode."""
    from omegaconf import OmegaConf

    from toolcanary.common.trustee_checkout import PINNED_COMMIT, TrusteeCheckout
    from toolcanary.train.settings import TrainSettings

    agent = config.actor_rollout_ref.rollout.agent
    path = agent.agent_loop_config_path
    entries = [e for e in OmegaConf.to_container(OmegaConf.load(path), resolve=True)
               if e.get("name") == agent.default_agent_loop]
    options = entries[0] if entries else {}
    mode = options.get("mode", "toolcanary")
    curriculum_mode = TrainSettings.from_env().mode
    if mode != curriculum_mode:
        raise ContractError(f"{path}: mode", f"the curriculum's mode (TOOLCANARY_TRAIN_MODE={curriculum_mode})",
                            repr(mode), "Set TOOLCANARY_TRAIN_MODE for both (train.sh does)")
    if mode == "trustee":
        commit = options.get("trustee_commit") or PINNED_COMMIT
        checkout = TrusteeCheckout.open(options.get("trustee_dir") or "", commit)
        checkout.tool_parser_module()  # the agent loop reads calls with it: it must import in this environment
        report.passed(f"agent loop mode trustee: the TRUSTEE checkout at {checkout.root} has every file the mode "
                      f"reads, byte for byte those of commit {commit}, and its tool parser imports")
    else:
        report.passed(f"agent loop mode {mode}")


def _check_ray_environment(ray_init: dict, report: RecipeReport) -> None:
    """Values verl hands to Ray reach workers on every node as they are: an unresolved one is a bug."""
    env_vars = (ray_init.get("runtime_env") or {}).get("env_vars") or {}
    unresolved = {k: v for k, v in env_vars.items() if not isinstance(v, str) or "${" in v}
    if unresolved:
        raise ContractError("ray_kwargs.ray_init.runtime_env.env_vars", "plain strings for Ray's workers",
                            json.dumps(unresolved)[:300], "Pass them as concrete values (train.sh does)")
    report.passed(f"Ray workers get {len(env_vars)} environment variables")


def _check_data(config, report: RecipeReport) -> None:
    import pyarrow.parquet as pq

    from toolcanary.train.episode import EpisodeSpec

    for key in ("train_files", "val_files"):
        for name in _as_list(config.data[key]):
            if not Path(name).is_file():
                raise ContractError(f"data.{key}", "an existing parquet file", repr(name),
                                    "Write it with `python -m toolcanary.train seed-data --out <folder>`")
    for name in _as_list(config.data.val_files):
        for row in pq.read_table(name, columns=["extra_info"]).column("extra_info").to_pylist():
            try:
                EpisodeSpec.model_validate(row)
            except Exception as err:
                raise ContractError(f"{name}: extra_info", "an episode spec per validation row",
                                    repr(row)[:200], "Rewrite it with `seed-data`") from err
    report.passed("training and validation parquet present; validation rows carry episode specs")


def _check_writable(config, ray_init: dict, report: RecipeReport) -> None:
    env_vars = (ray_init.get("runtime_env") or {}).get("env_vars") or {}
    if "tensorboard" in list(config.trainer.logger) and "TENSORBOARD_DIR" not in env_vars:
        raise ContractError("ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR",
                            "the folder verl's tensorboard logger writes to",
                            "nothing (verl would write ./tensorboard_log in the working directory)",
                            "train.sh passes it; when launching main_ppo yourself, pass it too")
    folders = [Path(config.trainer.default_local_dir)]
    folders += [Path(env_vars[name]) for name in ("TENSORBOARD_DIR", "TOOLCANARY_CHECKPOINTS_DIR",
                                                  "TOOLCANARY_RESULTS_DIR") if name in env_vars]
    for folder in folders:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe = folder / f".write-check-{os.getpid()}"
            probe.write_text("")
            probe.unlink()
        except OSError as err:
            raise ContractError(str(folder), "a folder the trainer's user can write", f"{type(err).__name__}: {err}",
                                "Give the container user write access (compose runs it as your uid)") from err
    report.passed("writable: " + ", ".join(str(f) for f in folders))


def _select(config, key: str):
    node = config
    for part in key.split("."):
        node = node[part]
    return node


def _as_list(value) -> list[str]:
    return [value] if isinstance(value, str) else [str(v) for v in value]
