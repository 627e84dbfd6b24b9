"""What a pass scores: the checkpoint (and its weights hash) and the item ids, checked before any request.

    python -c "from toolcanary.evaluate.pass_inputs import resolve_checkpoint; help(resolve_checkpoint)"
"""

from __future__ import annotations

import json
from pathlib import Path

from toolcanary.contract.bfcl import OFFLINE_CATEGORIES
from toolcanary.contract.csv_schemas import BfclRow, read_bfcl_by_category
from toolcanary.contract.errors import ContractError
from toolcanary.contract.manifests import CheckpointManifest, read_checkpoint_manifest
from toolcanary.evaluate.bfcl_data import category_ids, check_categories, check_ids, choose_sample
from toolcanary.evaluate.pass_folder import csv_lock, write_json


def resolve_checkpoint(
    checkpoints_dir: Path, run: str, step: int, checkpoint_dir: Path | None, base_model: str | None,
) -> CheckpointManifest | None:
    """The manifest of the checkpoint being served, or None for a base model named with --base-model.

    Raises:
        ContractError: no checkpoint found and no base model named, or a manifest for another step.
    """
    folder = checkpoint_dir or checkpoints_dir / run / f"step_{step:04d}"
    if checkpoint_dir is None and not folder.exists():
        if base_model:
            return None
        raise ContractError(
            str(folder), f"a published checkpoint of run {run!r} at step {step}", "no such folder",
            "Pass --checkpoint-dir DIR, or --base-model NAME when scoring an untrained base model",
        )
    manifest = read_checkpoint_manifest(folder)
    if manifest.step != step:
        raise ContractError(str(folder), f"the checkpoint of step {step}", f"one of step {manifest.step}",
                            "Pass the --step the checkpoint was saved at")
    return manifest


def resolve_ids(
    run_dir: Path, categories: list[str] | None, sample: int | None, seed: int, ids_file: Path | None,
) -> tuple[list[str], dict[str, list[str]], bool]:
    """(categories, ids per category, whether ids are a subset); guard 6 runs here.

    A sample is pinned per run in `sample.json`, so every pass of a run scores the same items.
    """
    if ids_file is not None:
        try:
            requested = json.loads(Path(ids_file).read_text())
        except (OSError, ValueError) as err:
            raise ContractError(str(ids_file), 'JSON {"category": ["id", ...]}', str(err)) from err
        if not isinstance(requested, dict) or not all(isinstance(v, list) for v in requested.values()):
            raise ContractError(str(ids_file), 'JSON {"category": ["id", ...]}', type(requested).__name__)
        check_ids(requested, str(ids_file))
        return list(requested), {c: list(v) for c, v in requested.items()}, True
    categories = list(categories or OFFLINE_CATEGORIES)
    check_categories(categories)
    if sample is None:
        return categories, {c: list(category_ids(c)) for c in categories}, False
    ids = choose_sample(categories, sample, seed)
    pinned = run_dir / "sample.json"
    if pinned.exists():
        old = json.loads(pinned.read_text())
        if (old["size"], old["seed"]) != (sample, seed):
            raise ContractError(str(pinned), f"--sample {old['size']} --seed {old['seed']} for every pass of this run",
                                f"--sample {sample} --seed {seed}", "Use the run's sample, or another --run")
        ids = {c: old["ids"][c] if c in old["ids"] else v for c, v in ids.items()}
        check_ids(ids, str(pinned))
    else:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_json(pinned, {"size": sample, "seed": seed, "ids": ids})
    return categories, ids, True


def existing_rows(csv_path: Path, categories: list[str]) -> list[BfclRow]:
    """Rows already in the run's CSV; refuses a category set that differs from the run's."""
    if not csv_path.exists():
        return []
    with csv_lock(csv_path):  # not while another pass is halfway through appending its rows
        # A pass missing rows torn off by a crash is read too: resuming that pass appends them again.
        rows = read_bfcl_by_category(csv_path, complete=False)
    scored = sorted({r.category for r in rows})
    if scored != sorted(categories):
        raise ContractError(str(csv_path), f"a run scored on the categories {sorted(categories)}",
                            f"a run scored on {scored}",
                            "Every pass of a run must cover the same categories; pass those, or use another --run")
    return rows
