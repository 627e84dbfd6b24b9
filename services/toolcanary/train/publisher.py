"""Atomic checkpoint publishing: `<checkpoints>/<run>/step_NNNN/` appears whole or not at all.

A checkpoint is written into a hidden temporary folder beside its final place (weights, tokenizer, chat
template, and `manifest.json` last), every file and the folder are fsynced, and one `rename` makes it
visible. Only then is a line `{"step", "path", "weights_sha256"}` appended to `published.jsonl`, which
the evaluation's watcher follows; `path` is relative to the folder holding `published.jsonl`. The ledger is
an append-only file under `toolcanary.contract.append_only` (a torn line left by a killed publish is fenced
off, never glued to the next step's line); the one trainer process of a run is its only writer. Weights are
published in one floating dtype (bf16 unless the model's config names another): verl's `hf_model` save
writes FSDP's fp32 master weights under a config that says bf16, twice the size a server needs. The
manifest records that dtype and the chat-template thinking mode the policy trained in.

    publish_checkpoint(model, tokenizer, run_dir, run="demo", step=10, base_model="Qwen/Qwen3-4B",
                       curriculum_level=31, enable_thinking=False)
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from toolcanary.common.git_files import head_commit
from toolcanary.contract import CONTRACT_VERSION
from toolcanary.contract.append_only import fsync_dir
from toolcanary.contract.errors import ContractError
from toolcanary.contract.manifests import (
    CHECKPOINT_MANIFEST,
    CheckpointManifest,
    PublishedCheckpoint,
    append_published,
    checkpoint_files,
    read_checkpoint_manifest,
    read_published,
    verify_checkpoint,  # noqa: F401 (the trainer and its tests import it from here)
    weights_sha256,
)
from toolcanary.train.settings import REPO_ROOT

logger = logging.getLogger(__name__)


def step_dir_name(step: int) -> str:
    return f"step_{step:04d}"


def current_commit() -> str:
    """The code's commit for a manifest: TOOLCANARY_COMMIT (the images, which hold no .git), else the HEAD of
    the checkout the code runs from, else "unknown"."""
    return os.environ.get("TOOLCANARY_COMMIT") or head_commit(REPO_ROOT) or "unknown"


def _fsync_tree(folder: Path) -> None:
    folder.chmod(0o755)
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            path.chmod(0o644)  # readable by the evaluation and serving containers, whatever their uid
            with path.open("rb") as handle:
                os.fsync(handle.fileno())
    fsync_dir(folder)


def remove_partial(run_dir: Path) -> list[Path]:
    """Delete temporary folders a killed publish left behind (they were never visible)."""
    stale = sorted(run_dir.glob(".step_*.tmp-*")) if run_dir.exists() else []
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    return stale


def publish_checkpoint(model, tokenizer, run_dir: Path, *, run: str, step: int, base_model: str,
                       curriculum_level: int, enable_thinking: bool, dtype: torch.dtype = torch.bfloat16) -> Path:
    """Write, then atomically reveal, one checkpoint; an already published step is left as it is."""
    run_dir.mkdir(parents=True, exist_ok=True)
    final = run_dir / step_dir_name(step)
    if final.exists():
        existing = read_checkpoint_manifest(final)  # refuses a folder that is not a whole checkpoint
        announce(run_dir, step, existing.weights_sha256)
        logger.info("step %d already published at %s; keeping it", step, final)
        return final
    tmp = run_dir / f".{step_dir_name(step)}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    state = {name: tensor.detach().to(dtype).contiguous() for name, tensor in model.state_dict().items()}
    model.save_pretrained(tmp, state_dict=state, safe_serialization=True)
    config = json.loads((tmp / "config.json").read_text())
    config.update(torch_dtype=str(dtype).removeprefix("torch."), dtype=str(dtype).removeprefix("torch."))
    (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    tokenizer.save_pretrained(tmp)
    return _seal(tmp, final, run_dir, run=run, step=step, base_model=base_model, curriculum_level=curriculum_level,
                 dtype=dtype, enable_thinking=enable_thinking)


def publish_folder(source: Path, run_dir: Path, *, run: str, step: int, base_model: str,
                   curriculum_level: int, enable_thinking: bool) -> Path:
    """Publish an HF folder already on disk (verl's `actor/huggingface/`): copied, its weights cast to the
    config's floating dtype (bf16 when it names none), then sealed the same way."""
    run_dir.mkdir(parents=True, exist_ok=True)
    final = run_dir / step_dir_name(step)
    if final.exists():
        existing = read_checkpoint_manifest(final)
        announce(run_dir, step, existing.weights_sha256)
        return final
    if not list(Path(source).glob("*.safetensors")):
        raise ContractError(str(source), "an HF folder with safetensors weights", "no *.safetensors",
                            "Add hf_model to actor.checkpoint.save_contents")
    tmp = run_dir / f".{step_dir_name(step)}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(source, tmp, ignore=shutil.ignore_patterns("*.safetensors"))
    dtype = serving_dtype(tmp / "config.json")
    cast_weights(Path(source), tmp, dtype)
    return _seal(tmp, final, run_dir, run=run, step=step, base_model=base_model, curriculum_level=curriculum_level,
                 dtype=dtype, enable_thinking=enable_thinking)


FLOAT_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
# Largest weight shard a publish writes, hence about what one publish holds in memory (a 4B model in bf16 is
# four such shards); a tensor larger than this is a shard of its own.
SHARD_BYTES = 2 * 1024**3


def serving_dtype(config_path: Path) -> torch.dtype:
    """The floating dtype the model's config.json names (`dtype`, or the older `torch_dtype`), else bf16."""
    config = json.loads(config_path.read_text()) if config_path.exists() else {}
    name = str(config.get("dtype") or config.get("torch_dtype") or "bfloat16")
    return FLOAT_DTYPES.get(name, torch.bfloat16)


def cast_weights(source: Path, target: Path, dtype: torch.dtype, shard_bytes: int = SHARD_BYTES) -> None:
    """Write the weights of every safetensors file of `source` into `target` as shards of at most `shard_bytes`
    (a tensor larger than that gets a shard of its own), floating tensors in `dtype`, with the shard index
    vLLM and transformers read, and config.json naming the dtype.

    Tensors are read one at a time (the source file opened for each) and a shard is written as soon as it is
    full, so a publish holds about two shards (the one filling and its serialised copy) and the largest tensor
    in both dtypes, whatever the size of verl's files (transformers 5 writes a 4B model's fp32 `hf_model` as
    one 16 GB file by default); bench/train_publish_memory.py measures it."""
    shard: dict[str, torch.Tensor] = {}
    written: list[list[str]] = []  # the tensor names of each shard written, in order
    filled = total = 0

    def flush() -> None:
        save_file(shard, target / f".shard-{len(written) + 1:05d}.safetensors", metadata={"format": "pt"})
        written.append(list(shard))
        shard.clear()

    for path in sorted(source.glob("*.safetensors")):
        with safe_open(path, framework="pt") as weights:
            in_file = list(weights.keys())
        for name in in_file:
            # Opened per tensor: safe_open maps the whole file, and every page read stays resident until the
            # file is closed, so reading a 16 GB file through one open would hold 16 GB by the end.
            with safe_open(path, framework="pt") as weights:
                tensor = weights.get_tensor(name)
            tensor = (tensor.to(dtype) if tensor.is_floating_point() else tensor).contiguous()
            size = tensor.numel() * tensor.element_size()
            if shard and filled + size > shard_bytes:
                flush()
                filled = 0
            shard[name] = tensor
            filled += size
            total += size
    flush()
    count = len(written)
    weight_map = {}
    for number, members in enumerate(written, start=1):
        final = "model.safetensors" if count == 1 else f"model-{number:05d}-of-{count:05d}.safetensors"
        (target / f".shard-{number:05d}.safetensors").rename(target / final)
        weight_map.update(dict.fromkeys(members, final))
    index_path = target / "model.safetensors.index.json"  # the source's index names the source's shards
    index_path.unlink(missing_ok=True)
    if count > 1:
        index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
        index_path.write_text(json.dumps(index, indent=2) + "\n")
    name = str(dtype).removeprefix("torch.")
    config_path = target / "config.json"
    if config_path.exists():
        config = json.loads(config_path.read_text())
        config.update(dtype=name, torch_dtype=name)
        config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def _seal(tmp: Path, final: Path, run_dir: Path, *, run: str, step: int, base_model: str,
          curriculum_level: int, dtype: torch.dtype, enable_thinking: bool) -> Path:
    """Write the manifest last, fsync, rename into place, announce."""
    weight_files = sorted(p.name for p in tmp.glob("*.safetensors"))
    manifest = CheckpointManifest(
        contract_version=CONTRACT_VERSION, run=run, step=step, base_model=base_model,
        weights_sha256=weights_sha256(tmp, weight_files), weight_files=weight_files, commit=current_commit(),
        curriculum_level=curriculum_level, created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        dtype=str(dtype).removeprefix("torch."), enable_thinking=enable_thinking, files=checkpoint_files(tmp),
    )
    (tmp / CHECKPOINT_MANIFEST).write_text(manifest.model_dump_json(indent=2) + "\n")
    _fsync_tree(tmp)
    os.rename(tmp, final)
    fsync_dir(run_dir)
    announce(run_dir, step, manifest.weights_sha256)
    logger.info("published step %d -> %s", step, final)
    return final


def announce(run_dir: Path, step: int, sha: str) -> None:
    """Append the watcher's line for a step, once."""
    if any(entry.step == step for entry in read_published(run_dir)):
        return
    append_published(run_dir, PublishedCheckpoint(step=step, path=step_dir_name(step), weights_sha256=sha))
