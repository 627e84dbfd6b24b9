"""Score one served checkpoint: one pass = preflight, generate, guards, evaluate, guards, rows.

Rows are appended to `<results>/<run>/bfcl_by_category.csv` all at once and only after every guard
passed; a refused pass leaves `failure.json` in its folder and no rows. A rerun with `--resume` picks up
a pass killed at any point and ends with exactly the rows and outcomes of an uninterrupted pass.

    python -m toolcanary.evaluate run --run demo --step 0 --pass 1 --base-url http://127.0.0.1:8000/v1 \\
        --model demo-step0000 --base-model Qwen/Qwen3-4B --sample 5 --seed 0
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from toolcanary.contract import CONTRACT_VERSION
from toolcanary.contract.csv_schemas import BfclRow, append_bfcl_rows, read_bfcl_by_category
from toolcanary.contract.errors import ContractError
from toolcanary.contract.manifests import CheckpointManifest, EvalPassManifest
from toolcanary.evaluate import preflight
from toolcanary.evaluate.bfcl_data import bfcl_version
from toolcanary.evaluate.bfcl_wrapper import HANDLER_NAME
from toolcanary.evaluate.outcomes import build_outcomes, count_rows, error_counts, write_outcomes
from toolcanary.evaluate.pass_folder import PassPaths, PassRequest, claim, csv_lock, lock, write_json
from toolcanary.evaluate.pass_inputs import existing_rows, resolve_checkpoint, resolve_ids
from toolcanary.evaluate.phases import GenerateProgress, bfcl_env, run_phase
from toolcanary.evaluate.result_files import OVERLONG_ERROR, classify, clean_for_resume, read_results
from toolcanary.evaluate.settings import EvalSettings

log = logging.getLogger(__name__)


class PassRefused(ContractError):
    """A guard refused the pass: no rows were written."""


@dataclass
class PassOptions:
    run: str
    step: int
    pass_index: int
    served_model: str
    categories: list[str] | None = None
    sample: int | None = None
    seed: int = 0
    ids_file: Path | None = None
    checkpoint_dir: Path | None = None
    base_model: str | None = None
    resume: bool = False
    stop_after: str | None = None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def run_pass(settings: EvalSettings, opts: PassOptions) -> list[BfclRow]:
    """Score one pass and return its rows ([] when stopped early by `stop_after`).

    Raises:
        ContractError: bad input or a guard refused the pass (PassRefused); nothing was appended.
    """
    started, t0 = _now(), time.monotonic()
    if "_" in settings.registry_key or "FC" not in settings.registry_key:
        # bfcl-eval maps "_" in result folder names back to "/" and only takes the FC path for keys with "FC".
        raise ContractError("TOOLCANARY_EVALUATE_REGISTRY_KEY", "a key without '_' that contains 'FC'",
                            repr(settings.registry_key), "Use the default toolcanary-served-FC")
    paths = PassPaths.of(settings.results_dir, opts.run, opts.step, opts.pass_index)
    checkpoint = resolve_checkpoint(settings.checkpoints_dir, opts.run, opts.step, opts.checkpoint_dir,
                                    opts.base_model)
    categories, ids, subset = resolve_ids(paths.run_dir, opts.categories, opts.sample, opts.seed, opts.ids_file)
    rows_before = existing_rows(paths.csv, categories)
    scored = any((r.step, r.pass_index) == (opts.step, opts.pass_index) for r in rows_before)
    request = PassRequest(
        run=opts.run, step=opts.step, pass_index=opts.pass_index, served_model=opts.served_model,
        registry_key=settings.registry_key, weights_sha256=checkpoint.weights_sha256 if checkpoint else None,
        categories=categories, ids=ids, temperature=settings.temperature,
        overlong_counted_wrong=settings.overlong_counted_wrong,
    )
    lock_fd = lock(paths)
    try:
        resuming = claim(paths, request, opts.resume, scored)
        if resuming and paths.counts.exists():
            return _finish(paths, scored)
        paths.failure.unlink(missing_ok=True)
        return _score(settings, opts, paths, request, checkpoint, subset, resuming, started, t0)
    except ContractError as err:
        # Before request.json exists the folder holds nothing, and a retry must find it fresh.
        if paths.request.exists() and not paths.failure.exists():
            write_json(paths.failure, {"reason": str(err), "at": _now()})
        raise
    finally:
        os.close(lock_fd)


def _score(settings: EvalSettings, opts: PassOptions, paths: PassPaths, request: PassRequest,
           checkpoint: CheckpointManifest | None, subset: bool, resuming: bool, started: str,
           t0: float) -> list[BfclRow]:
    """The body of a pass once the folder is claimed; see run_pass."""
    categories, ids = request.categories, request.ids
    report = preflight.probe(settings.base_url, opts.served_model, settings.api_key, settings.probe_timeout_s)
    timings = {"preflight": round(time.monotonic() - t0, 3)}
    manifest = EvalPassManifest(
        contract_version=CONTRACT_VERSION, run=opts.run, step=opts.step, pass_index=opts.pass_index,
        checkpoint=checkpoint, weights_sha256=request.weights_sha256, served_model=opts.served_model,
        base_url=settings.base_url, base_model=None if checkpoint else opts.base_model,
        registry_key=settings.registry_key, served_max_model_len=report.max_model_len,
        probe_forced_call=report.forced_with,
        bfcl_eval_version=bfcl_version(), handler=f"{HANDLER_NAME} (chat completions, FC, underscore_to_dot)",
        categories=categories, sample_size=opts.sample, sample_seed=opts.seed if opts.sample else None,
        sample_ids=ids if subset else {}, threads=settings.threads, temperature=settings.temperature,
        overlong_counted_wrong=settings.overlong_counted_wrong, started_at=started,
    )
    paths.bfcl_root.mkdir(parents=True, exist_ok=True)
    paths.logs.mkdir(exist_ok=True)
    write_json(paths.request, request.__dict__)
    write_json(paths.ids_file, ids)
    write_json(paths.manifest, manifest.model_dump(mode="json"))
    try:
        _generate(settings, opts, paths, request, timings, resuming, subset)
        results = read_results(paths.result_dir, settings.registry_key, ids)
        _refuse_errors(paths, results)
        if opts.stop_after == "generate":
            return []
        scores, timings["evaluate"] = _evaluate(settings, opts, paths, request)
    except PassRefused:
        raise
    except ContractError as err:
        raise PassRefused(err.where, err.expected, err.got, err.fix) from err
    outcomes = build_outcomes(ids, results, scores)
    rows = count_rows(opts.step, opts.pass_index, outcomes, settings.overlong_counted_wrong)
    write_outcomes(paths.outcomes, outcomes)
    manifest.error_counts = error_counts(outcomes)
    manifest.overlong_items = {c: [i for i in v if classify(results[c][i]) == OVERLONG_ERROR] for c, v in ids.items()}
    manifest.overlong_items = {c: v for c, v in manifest.overlong_items.items() if v}
    manifest.timings_s = {**timings, "total": round(time.monotonic() - t0, 3)}
    write_json(paths.manifest, manifest.model_dump(mode="json"))
    if opts.stop_after == "evaluate":
        return []
    write_json(paths.counts, [r.__dict__ for r in rows])
    return _finish(paths, scored=False)


def _generate(settings: EvalSettings, opts: PassOptions, paths: PassPaths, request: PassRequest,
              timings: dict[str, float], resuming: bool, subset: bool) -> None:
    total = sum(len(v) for v in request.ids.values())
    kept = clean_for_resume(paths.result_dir, settings.registry_key, request.ids) if resuming else {}
    if resuming:
        log.info("resume: %d of %d results kept, the rest regenerated", sum(kept.values()), total)
    progress = GenerateProgress(paths.result_dir, total, sum(kept.values()))
    env = bfcl_env(paths.bfcl_root, settings.base_url, settings.api_key, opts.served_model,
                   settings.registry_key, settings.request_timeout_s, settings.request_retries)
    # --run-ids makes bfcl-eval rewrite a whole result file per item; whole categories append instead.
    selection = ["--run-ids"] if subset else ["--test-category", ",".join(request.categories)]
    args = ["generate", "--model", settings.registry_key, *selection, "--num-threads", str(settings.threads),
            "--temperature", str(settings.temperature)]
    try:
        timings["generate"] = round(run_phase("generate", args, env, paths.logs / "generate.log",
                                              settings.phase_timeout_s, progress), 3)
    finally:
        progress.close()


def _refuse_errors(paths: PassPaths, results: dict[str, dict[str, dict]]) -> None:
    """Guard 2: any errored or empty request fails the pass; bfcl-eval would score it, often as correct."""
    bad = {(c, i): kind for c, by_id in results.items() for i, e in by_id.items()
           if (kind := classify(e)) not in (None, OVERLONG_ERROR)}
    if not bad:
        return
    kinds: dict[str, int] = {}
    for kind in bad.values():
        kinds[kind] = kinds.get(kind, 0) + 1
    first_category, first_id = min(bad)
    sample = results[first_category][first_id].get("result", "")
    write_json(paths.failure, {"reason": "failed requests", "counts": kinds,
                               "items": [{"category": c, "id": i, "error": k} for (c, i), k in sorted(bad.items())],
                               "example": str(sample)[:500], "at": _now()})
    raise PassRefused(
        str(paths.folder), "every request answered", f"{len(bad)} failed requests {kinds}, e.g. {str(sample)[:200]!r}",
        "bfcl-eval would score these (as correct abstentions in irrelevance); fix the server, then rerun with --resume",
    )


def _evaluate(settings: EvalSettings, opts: PassOptions, paths: PassPaths, request: PassRequest):
    from toolcanary.evaluate.score_files import read_scores

    shutil.rmtree(paths.score_dir, ignore_errors=True)
    env = bfcl_env(paths.bfcl_root, settings.base_url, settings.api_key, opts.served_model,
                   settings.registry_key, settings.request_timeout_s, settings.request_retries)
    args = ["evaluate", "--model", settings.registry_key, "--test-category", ",".join(request.categories),
            "--partial-eval"]
    not_before = time.time() - 1
    wall = run_phase("evaluate", args, env, paths.logs / "evaluate.log", settings.phase_timeout_s)
    return read_scores(paths.score_dir, request.ids, not_before), round(wall, 3)


def _finish(paths: PassPaths, scored: bool) -> list[BfclRow]:
    """Append the pass's rows that the CSV does not hold yet and mark the manifest finished.

    `scored`: run_pass saw rows of this pass before it started (a killed earlier run appended them, or a crash
    tore the last of them off, which are then appended again). Which rows are there is decided at the moment
    of the append, under the CSV's lock: another pass may be appending its own rows right now.
    """
    rows = [BfclRow(**r) for r in json.loads(paths.counts.read_text())]
    csv = csv_lock(paths.csv)
    with csv:
        present = {(r.step, r.pass_index, r.category)
                   for r in read_bfcl_by_category(paths.csv, complete=False)} if paths.csv.exists() else set()
        missing = [r for r in rows if (r.step, r.pass_index, r.category) not in present]
        if missing:
            append_bfcl_rows(paths.csv, missing, lock=csv)
            if scored:
                log.warning("pass %s: %d of its rows were missing from %s (torn by a crash); appended again",
                            paths.folder.name, len(missing), paths.csv)
    manifest = EvalPassManifest.model_validate_json(paths.manifest.read_text())
    if manifest.finished_at is None:
        manifest.finished_at = _now()
        write_json(paths.manifest, manifest.model_dump(mode="json"))
    log.info("pass %s: %d rows in %s", paths.folder.name, len(rows), paths.csv)
    return rows
