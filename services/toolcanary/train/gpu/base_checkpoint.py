"""Step 0 of a GPU run: the base model, published through the same publisher as every later step.

verl saves only after a training step, so the first checkpoint its save callback publishes is step 10; every
delta this study reports is measured against the base model scored through the same pipeline, with repeat
passes at step 0. So before verl starts, `recipes/trustee-qwen3-4b/train.sh` composes the recipe exactly as
verl's main_ppo will (`toolcanary.train.gpu.recipe_check`) and publishes `actor_rollout_ref.model.path` as
`step_0000`: weights cast to the config's floating dtype (bf16 for Qwen3), a manifest with the recipe's
thinking mode, the curriculum's first level and the weights' hash, and its line in `published.jsonl`. A hub id
is downloaded into the model cache first (HF_HOME), where verl's workers then find it. A restart finds the
step published and only makes sure it is announced. Before anything is written the run's disk plan is logged
and checked (`toolcanary.train.gpu.disk_plan`): a volume with less free space than the run still needs stops it.

    python -m toolcanary.train publish-base -- --config-path recipes/trustee-qwen3-4b \
        --config-name trustee_qwen3_4b actor_rollout_ref.model.path=/models/Qwen3-4B
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from toolcanary.train.gpu.disk_plan import disk_plan
from toolcanary.train.publisher import publish_folder, step_dir_name
from toolcanary.train.settings import TrainSettings

logger = logging.getLogger(__name__)
# What a servable folder needs from a hub snapshot: weights, configs, tokenizer and chat template files.
SERVABLE_FILES = ["*.safetensors", "*.json", "*.txt", "*.model", "*.jinja", "*.tiktoken"]


def model_folder(path: str) -> Path:
    """A local folder as it is; a hub id downloaded into (or found in) the Hugging Face cache."""
    if Path(path).is_dir():
        return Path(path)
    from huggingface_hub import snapshot_download

    logger.info("downloading %s into the model cache (HF_HOME) for step 0 and verl's workers", path)
    return Path(snapshot_download(path, allow_patterns=SERVABLE_FILES))


def publish_base(argv: list[str], settings: TrainSettings | None = None,
                 free: Callable[[Path], int] | None = None) -> Path:
    """Check the run's disk plan, then publish the recipe's starting model as step 0 of the run; returns the
    checkpoint folder. `free` replaces the free-space reading (tests).

    Raises:
        ContractError: the recipe does not compose or names no thinking mode, its model has no safetensors, or
            a volume has too little free space for the run.
    """
    from omegaconf import OmegaConf

    from toolcanary.train.gpu.recipe_check import compose_like_main_ppo
    from toolcanary.train.gpu.verl_hooks import recipe_thinking

    settings = settings or TrainSettings.from_env()
    config, _ = compose_like_main_ppo(argv)
    OmegaConf.resolve(config)
    model = str(config.actor_rollout_ref.model.path)
    existing = settings.run_checkpoints() / step_dir_name(0)
    source = existing if existing.is_dir() else model_folder(model)  # a restart needs no download
    plan = disk_plan(config, source, settings.run_checkpoints())
    logger.info("%s", plan.describe())
    plan.check(*([free] if free else []))
    return publish_folder(source, settings.run_checkpoints(), run=settings.run, step=0, base_model=model,
                          curriculum_level=settings.level_initial, enable_thinking=recipe_thinking(config))
