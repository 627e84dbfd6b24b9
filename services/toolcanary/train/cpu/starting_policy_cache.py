"""Warm-started starting policies kept for later runs, keyed by everything that made them.

A warm start is the slow part of a pretrained policy's CPU run, and a rerun of the same recipe on the same
gold conversations would train the same policy again. With `--starting-policy-cache DIR` the CPU run keys the
warm-started policy by a sha256 over its recipe: the base policy's weights, the token ids and loss masks of
every gold conversation (so the simulator's library, mode and templates are in the key through what they
produced), the warm start's settings and source code, and the torch version. A later run with the same key
copies the cached folder and its loss curve instead of training; anything different is a miss, never a stale
hit. Entries are written under a temporary name and renamed into place, so a killed run leaves no half entry.

The warm-start tasks of a cached run are keyed `<cache tag>-warm-...`, with a tag of the cache folder's own
(toolcanary.train.task_keys); what each task is comes from its draw, `warm-<seed>-<i>`, not from the key, so
any two runs of the same seed and settings imitate the same gold conversations, on any machine.

    key = recipe_key(settings, base_folder, examples)
    if restore(cache / key, reference, warm_record): ...
    store(cache / key, reference, warm_record)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import torch

import toolcanary.train.cpu.warm_start as warm_start_module
from toolcanary.contract.csv_schemas import WARM_START
from toolcanary.contract.manifests import weights_sha256

WARM_START_BATCH = 4


def recipe_key(settings, base_folder: Path, examples: list[tuple[list[int], list[int]]]) -> str:
    """sha256 hex of what the warm-started policy depends on (see the module docstring)."""
    digest = hashlib.sha256()
    recipe = {"policy": settings.policy, "seed": settings.policy_seed, "steps": settings.warm_start_steps,
              "lr": settings.warm_start_lr, "batch": WARM_START_BATCH, "thinking": settings.enable_thinking,
              "torch": torch.__version__}
    digest.update(json.dumps(recipe, sort_keys=True).encode())
    digest.update(Path(warm_start_module.__file__).read_bytes())
    digest.update(weights_sha256(base_folder, [p.name for p in Path(base_folder).glob("*.safetensors")]).encode())
    digest.update(json.dumps(examples).encode())
    return digest.hexdigest()


def restore(entry: Path, reference: Path, warm_record: Path) -> bool:
    """Copy a cached policy to `reference` and its loss curve to `warm_record`; False when there is none."""
    if not (entry / "policy" / "config.json").exists():
        return False
    shutil.rmtree(reference, ignore_errors=True)
    shutil.copytree(entry / "policy", reference)
    warm_record.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(entry / WARM_START, warm_record)
    return True


def store(entry: Path, reference: Path, warm_record: Path) -> None:
    """Keep `reference` and its loss curve under `entry` (atomically; a concurrent equal entry wins)."""
    draft = entry.with_name(f".{entry.name}.{os.getpid()}")
    shutil.rmtree(draft, ignore_errors=True)
    shutil.copytree(reference, draft / "policy")
    shutil.copy2(warm_record, draft / WARM_START)
    try:
        draft.rename(entry)
    except OSError:  # another run stored the same key first: its entry is the same policy
        shutil.rmtree(draft, ignore_errors=True)
