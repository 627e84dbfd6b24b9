"""One evaluation pass of one served checkpoint, read top to bottom: `run_pass` runs the phases in order.

    1. resolve inputs  the checkpoint and its weights hash, the item ids (the run's sample.json), the rows the
                       run's CSV already holds; then the pass folder is locked and claimed (guards
                       reused-folder, unknown-ids)
    2. preflight       probe the server before any BFCL request (guard preflight); size the pass from what it reports
                       (toolcanary.evaluate.sizing: output cap, threads, stall guard)
    3. generate        bfcl-eval generate in a fresh subprocess (a resume keeps only whole, answered results)
    4. refuse errors   read every result strictly; a failed or empty request refuses the pass (guards
                       failed-requests, unknown-ids)
    5. evaluate        bfcl-eval evaluate in a fresh subprocess; read its score files strictly (guard score-files)
    6. count           per-item outcomes (overlong and truncated ones marked, guards overlong-items and
                       truncated-answers, and the kind of each answer), the rows, the manifest
    7. append          the rows into `<results>/<run>/bfcl_by_category.csv`, all at once, under its lock; then
                       the same scores as TensorBoard scalars (toolcanary.evaluate.tracker)

`python -m toolcanary.evaluate guards` lists the guards. Rows are appended only after every guard passed; a
refused pass leaves `failure.json` in its folder and no rows. A rerun with `--resume` picks up a pass killed
at any point and ends with exactly the rows and outcomes of an uninterrupted pass.

The pass folder, `<results>/<run>/passes/step_NNNN_pass_P/` (`PassPaths`):
    request.json    PassRequest (toolcanary.contract.pass_files): what the pass scores; a resume must match it
    bfcl/           BFCL_PROJECT_ROOT for this pass only: test_case_ids_to_generate.json, result/, score/
    logs/           generate.log, evaluate.log
    outcomes.jsonl  ItemOutcome lines (toolcanary.contract.pass_files): "correct" or the error type, and the
                    kind of answer (toolcanary.evaluate.answers)
    counts.json     the rows, written before they are appended to bfcl_by_category.csv
    manifest.json   EvalPassManifest; `finished_at` is set only for a pass whose rows were written
    failure.json    why the pass was refused, when it was

    python -m toolcanary.evaluate run --run demo --step 0 --pass 1 --base-url http://127.0.0.1:8000/v1 \\
        --model demo-step0000 --base-model Qwen/Qwen3-4B --sample 5 --seed 0
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock

from toolcanary.contract import CONTRACT_VERSION
from toolcanary.contract.append_only import lock_path
from toolcanary.contract.bfcl import OFFLINE_CATEGORIES
from toolcanary.contract.csv_schemas import BFCL_BY_CATEGORY, BfclRow, append_bfcl_rows, read_bfcl_by_category
from toolcanary.contract.errors import BusyError, ContractError, UsageError
from toolcanary.contract.manifests import (
    PASS_MANIFEST,
    CheckpointManifest,
    EvalPassManifest,
    verify_as_published,
)
from toolcanary.contract.pass_files import (
    CORRECT,
    COUNTS_FILE,
    FAILURE_FILE,
    OUTCOMES_FILE,
    REQUEST_FILE,
    SAMPLE_FILE,
    TRUNCATED,
    UNPARSED_CALL,
    FailedItem,
    ItemOutcome,
    PassFailure,
    PassRequest,
    RunSample,
    error_counts,
    read_counts,
    read_request,
    read_sample,
    write_counts,
    write_failure,
    write_json,
    write_outcomes,
    write_request,
    write_sample,
)
from toolcanary.evaluate import guards, preflight, sizing
from toolcanary.evaluate.bfcl_data import (
    bfcl_version,
    category_ids,
    check_categories,
    check_ids,
    choose_sample,
)
from toolcanary.evaluate.bfcl_files import (
    OVERLONG_ERROR,
    build_outcomes,
    classify,
    clean_for_resume,
    count_rows,
    read_results,
    read_scores,
)
from toolcanary.evaluate.bfcl_process import GenerateProgress, bfcl_env, run_phase
from toolcanary.evaluate.bfcl_wrapper import HANDLER_NAME
from toolcanary.evaluate.settings import EvalSettings
from toolcanary.evaluate.sizing import PassSizing
from toolcanary.evaluate.tracker import write_pass_scalars

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
    sample_multi_turn: int | None = None
    seed: int = 0
    ids_file: Path | None = None
    checkpoint_dir: Path | None = None
    base_model: str | None = None
    resume: bool = False
    stop_after: str | None = None


@dataclass(frozen=True)
class PassPaths:
    run_dir: Path
    folder: Path

    @classmethod
    def of(cls, results_dir: str | Path, run: str, step: int, pass_index: int) -> PassPaths:
        run_dir = Path(results_dir) / run
        return cls(run_dir, run_dir / "passes" / f"step_{step:04d}_pass_{pass_index}")

    csv = property(lambda self: self.run_dir / BFCL_BY_CATEGORY)
    sample = property(lambda self: self.run_dir / SAMPLE_FILE)
    bfcl_root = property(lambda self: self.folder / "bfcl")
    result_dir = property(lambda self: self.folder / "bfcl" / "result")
    score_dir = property(lambda self: self.folder / "bfcl" / "score")
    ids_file = property(lambda self: self.folder / "bfcl" / "test_case_ids_to_generate.json")
    logs = property(lambda self: self.folder / "logs")
    request = property(lambda self: self.folder / REQUEST_FILE)
    outcomes = property(lambda self: self.folder / OUTCOMES_FILE)
    counts = property(lambda self: self.folder / COUNTS_FILE)
    manifest = property(lambda self: self.folder / PASS_MANIFEST)
    failure = property(lambda self: self.folder / FAILURE_FILE)


@dataclass(frozen=True)
class PassInputs:
    """What phase 1 resolved: everything the later phases score, checked before any request."""

    request: PassRequest
    checkpoint: CheckpointManifest | None
    subset: bool
    """The ids are a subset of their categories (a sample or an ids file), not every item."""
    scored: bool
    """The run's CSV already holds rows of this (step, pass)."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def run_pass(settings: EvalSettings, opts: PassOptions) -> list[BfclRow]:
    """Score one pass and return its rows ([] when stopped early by `stop_after`).

    Raises:
        ContractError: bad input or a guard refused the pass (PassRefused); nothing was appended.
    """
    started, t0 = _now(), time.monotonic()
    paths = PassPaths.of(settings.results_dir, opts.run, opts.step, opts.pass_index)
    inputs = resolve_inputs(settings, opts, paths)
    lock_fd = lock(paths)
    try:
        resuming = claim(paths, inputs.request, opts.resume, inputs.scored)
        if resuming and paths.counts.exists():
            # Killed after counting (only the append is left), or finished: the scalars are written again.
            return track(settings, opts.run, append_rows(paths, inputs.scored))
        paths.failure.unlink(missing_ok=True)
        report = preflight.probe(settings.base_url, opts.served_model, settings.api_key, settings.probe_timeout_s,
                                 max_tokens=settings.max_tokens or None)
        sized = size_pass(settings, paths, inputs.request, report, resuming)
        timings = {"preflight": round(time.monotonic() - t0, 3)}
        manifest = _start_folder(settings, opts, paths, inputs, report, sized, started)
        try:
            timings["generate"] = generate(settings, paths, inputs, sized, resuming)
            results = refuse_errors(settings, paths, inputs.request)
            if opts.stop_after == "generate":
                return []
            scores, timings["evaluate"] = evaluate(settings, paths, inputs.request, sized)
        except PassRefused:
            raise
        except ContractError as err:
            raise PassRefused(err.where, err.expected, err.got, err.fix) from err
        rows = count(settings, paths, inputs.request, manifest, results, scores, timings, t0)
        if opts.stop_after == "evaluate":
            return []
        # counts.json is what phase 7 appends, and what a resume of a pass killed during the append finds.
        write_counts(paths.counts, rows)
        return track(settings, opts.run, append_rows(paths, scored=False))
    except ContractError as err:
        # Before request.json exists the folder holds nothing, and a retry must find it fresh.
        if paths.request.exists() and not paths.failure.exists():
            write_failure(paths.failure, PassFailure(reason=str(err), at=_now()))
        raise
    finally:
        os.close(lock_fd)


# Phase 1: resolve inputs


def resolve_inputs(settings: EvalSettings, opts: PassOptions, paths: PassPaths) -> PassInputs:
    """The checkpoint, the ids and the run's existing rows, all checked; nothing is sent to the server."""
    if "_" in settings.registry_key or "FC" not in settings.registry_key:
        # bfcl-eval maps "_" in result folder names back to "/" and only takes the FC path for keys with "FC".
        raise ContractError("TOOLCANARY_EVALUATE_REGISTRY_KEY", "a key without '_' that contains 'FC'",
                            repr(settings.registry_key), "Use the default toolcanary-served-FC")
    checkpoint = resolve_checkpoint(settings.checkpoints_dir, opts.run, opts.step, opts.checkpoint_dir,
                                    opts.base_model)
    categories, ids, subset = resolve_ids(paths.run_dir, opts.categories, opts.sample, opts.seed, opts.ids_file,
                                          opts.sample_multi_turn)
    rows_before = existing_rows(paths.csv, categories)
    request = PassRequest(
        run=opts.run, step=opts.step, pass_index=opts.pass_index, served_model=opts.served_model,
        registry_key=settings.registry_key, weights_sha256=checkpoint.weights_sha256 if checkpoint else None,
        categories=categories, ids=ids, temperature=settings.temperature,
        overlong_counted_wrong=settings.overlong_counted_wrong,
    )
    scored = any((r.step, r.pass_index) == (opts.step, opts.pass_index) for r in rows_before)
    return PassInputs(request, checkpoint, subset, scored)


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
    manifest = verify_as_published(folder)  # the model scored is the one published, every file of it
    if manifest.step != step:
        raise ContractError(str(folder), f"the checkpoint of step {step}", f"one of step {manifest.step}",
                            "Pass the --step the checkpoint was saved at")
    return manifest


@guards.enforces(guards.UNKNOWN_IDS)
def resolve_ids(
    run_dir: Path, categories: list[str] | None, sample: int | None, seed: int, ids_file: Path | None,
    sample_multi_turn: int | None = None,
) -> tuple[list[str], dict[str, list[str]], bool]:
    """(categories, ids per category, whether ids are a subset).

    A sample is pinned per run in `sample.json`, so every pass of a run scores the same items.
    `sample_multi_turn` (with `sample`) takes that many items from each multi-turn category instead.
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
        if sample_multi_turn is not None:
            raise UsageError("--sample-multi-turn", "--sample as well (it sizes the other categories)",
                             f"--sample-multi-turn {sample_multi_turn} alone", "Add --sample K")
        return categories, {c: list(category_ids(c)) for c in categories}, False
    ids = choose_sample(categories, sample, seed, sample_multi_turn)
    pinned = run_dir / SAMPLE_FILE
    pinned.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(lock_path(pinned)):  # two first passes at once (--gpus, --passes-at-once) pin one sample
        if pinned.exists():
            old = read_sample(pinned)
            if (old.size, old.multi_turn_size, old.seed) != (sample, sample_multi_turn, seed):
                raise ContractError(str(pinned), f"{_sample_flags(old.size, old.multi_turn_size, old.seed)} for "
                                    "every pass of this run", _sample_flags(sample, sample_multi_turn, seed),
                                    "Use the run's sample, or another --run")
            ids = {c: old.ids[c] if c in old.ids else v for c, v in ids.items()}
            check_ids(ids, str(pinned))
        else:
            write_sample(pinned, RunSample(size=sample, multi_turn_size=sample_multi_turn, seed=seed, ids=ids))
    return categories, ids, True


def _sample_flags(size: int, multi_turn: int | None, seed: int) -> str:
    return f"--sample {size}" + (f" --sample-multi-turn {multi_turn}" if multi_turn else "") + f" --seed {seed}"


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


def csv_lock(csv_path: Path) -> FileLock:
    """The run CSV's exclusive lock (`.bfcl_by_category.csv.lock` beside it): every append of a pass's rows,
    and every read that decides what to append, holds it, since passes of different steps (eval-all, watch,
    make eval) can finish at the same moment and two first writers would each write a header."""
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(lock_path(csv_path))


def lock(paths: PassPaths) -> int:
    """An exclusive lock on the pass folder, released when this process ends however it ends."""
    paths.folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(paths.folder / ".lock", os.O_CREAT | os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise BusyError(str(paths.folder), "a pass folder no other client is using", "it is locked",
                        "Another evaluation of this pass is running; wait for it or stop it") from None
    return fd


@guards.enforces(guards.REUSED_FOLDER)
def claim(paths: PassPaths, request: PassRequest, resume: bool, scored: bool) -> bool:
    """Returns True when the folder already holds this pass's partial (or finished) work to resume.

    Raises:
        ContractError: the folder or the CSV already holds results and this is not an explicit resume of
            the same request (same checkpoint weights, ids and served model).
    """
    used = paths.folder.exists() and any(p.name != ".lock" for p in paths.folder.iterdir())
    if not resume:
        if scored:
            raise ContractError(
                str(paths.csv), f"no rows yet for step {request.step}, pass {request.pass_index}",
                "rows for that pass", f"Score a new repeat with --pass {request.pass_index + 1}",
            )
        if used:
            raise ContractError(
                str(paths.folder), "a fresh result folder", "one that already holds results",
                "bfcl-eval would mix old and new answers; rerun with --resume to finish that pass, or use another --pass",
            )
        return False
    if not used:
        if scored:
            raise ContractError(str(paths.csv), "rows with their pass folder", f"rows but no {paths.folder}",
                                "The pass folder was removed; score a new repeat with another --pass")
        return False
    if not paths.request.is_file():
        raise ContractError(str(paths.folder), "a pass folder with request.json", "none",
                            "This folder was not made by this client; move it away and start the pass again")
    old = read_request(paths.request)
    if old.weights_sha256 != request.weights_sha256:
        raise ContractError(
            str(paths.folder), f"results of checkpoint weights {request.weights_sha256}",
            f"results of weights {old.weights_sha256}", "Never mix checkpoints in one pass; use another --pass",
        )
    diffs = request.differences(old)
    if diffs:
        raise ContractError(str(paths.request), "the same arguments as the interrupted pass", "; ".join(diffs),
                            "Resume with the original arguments, or score a new --pass")
    return True


# Phase 2, preflight, is toolcanary.evaluate.preflight.probe; what it found goes into the manifest.


def size_pass(settings: EvalSettings, paths: PassPaths, request: PassRequest, report: preflight.ProbeReport,
              resuming: bool) -> PassSizing:
    """The pass's output cap, threads and stall guard; a resume must keep the cap its first answers had."""
    items = sum(len(v) for v in request.ids.values())
    sized = sizing.plan(settings, report.max_model_len, sizing.kv_cache_tokens(settings.base_url), items)
    log.info("sizing: max_tokens %d, %d threads, stall guard %.0f s (%s)", sized.max_tokens, sized.threads,
             sized.stall_timeout_s, sized.derived_from)
    if resuming and paths.manifest.exists():
        before = EvalPassManifest.model_validate_json(paths.manifest.read_text()).max_tokens
        if before != sized.max_tokens:
            raise ContractError(str(paths.manifest), f"the output cap the pass started with ({before})",
                                f"{sized.max_tokens} now", "Resume with --max-tokens "
                                f"{before} (answers under two caps do not mix), or score a new --pass")
    return sized


def _start_folder(settings: EvalSettings, opts: PassOptions, paths: PassPaths, inputs: PassInputs,
                  report: preflight.ProbeReport, sized: PassSizing, started: str) -> EvalPassManifest:
    """Write request.json, BFCL's id list and the manifest as far as it is known before generate."""
    request, checkpoint = inputs.request, inputs.checkpoint
    manifest = EvalPassManifest(
        contract_version=CONTRACT_VERSION, run=opts.run, step=opts.step, pass_index=opts.pass_index,
        checkpoint=checkpoint, weights_sha256=request.weights_sha256, served_model=opts.served_model,
        base_url=settings.base_url, base_model=None if checkpoint else opts.base_model,
        registry_key=settings.registry_key, served_max_model_len=report.max_model_len,
        served_enable_thinking=report.enable_thinking, probe_forced_call=report.forced_with,
        bfcl_eval_version=bfcl_version(), handler=f"{HANDLER_NAME} (chat completions, FC, underscore_to_dot)",
        categories=request.categories, sample_size=opts.sample, sample_seed=opts.seed if opts.sample else None,
        sample_ids=request.ids if inputs.subset else {}, threads=sized.threads, max_tokens=sized.max_tokens,
        sizing=sized.derived_from,
        temperature=settings.temperature, overlong_counted_wrong=settings.overlong_counted_wrong,
        started_at=started,
    )
    paths.bfcl_root.mkdir(parents=True, exist_ok=True)
    paths.logs.mkdir(exist_ok=True)
    write_request(paths.request, request)
    write_json(paths.ids_file, request.ids)
    write_json(paths.manifest, manifest.model_dump(mode="json"))
    return manifest


# Phase 3: generate


def generate(settings: EvalSettings, paths: PassPaths, inputs: PassInputs, sized: PassSizing, resuming: bool) -> float:
    """Run bfcl-eval generate for the request's ids; return its wall time in seconds."""
    request = inputs.request
    total = sum(len(v) for v in request.ids.values())
    kept = clean_for_resume(paths.result_dir, settings.registry_key, request.ids) if resuming else {}
    if resuming:
        log.info("resume: %d of %d results kept, the rest regenerated", sum(kept.values()), total)
    progress = GenerateProgress(paths.result_dir, total, sum(kept.values()))
    # --run-ids makes bfcl-eval rewrite a whole result file per item; whole categories append instead.
    selection = ["--run-ids"] if inputs.subset else ["--test-category", ",".join(request.categories)]
    args = ["generate", "--model", settings.registry_key, *selection, "--num-threads", str(sized.threads),
            "--temperature", str(settings.temperature)]
    try:
        return round(run_phase("generate", args, _env(settings, paths, request, sized), paths.logs / "generate.log",
                               sized.stall_timeout_s, sized.phase_timeout_s, progress), 3)
    finally:
        progress.close()


def _env(settings: EvalSettings, paths: PassPaths, request: PassRequest, sized: PassSizing) -> dict[str, str]:
    return bfcl_env(paths.bfcl_root, settings.base_url, settings.api_key, request.served_model,
                    settings.registry_key, settings.request_timeout_s, settings.request_retries, sized.max_tokens)


# Phase 4: refuse errors


@guards.enforces(guards.FAILED_REQUESTS)
def refuse_errors(settings: EvalSettings, paths: PassPaths, request: PassRequest) -> dict[str, dict[str, dict]]:
    """Every requested item's result; any errored or empty request fails the pass, since bfcl-eval would
    score it, often as correct. Overlong items are not errors here: phase 6 marks them."""
    results = read_results(paths.result_dir, settings.registry_key, request.ids)
    bad = {(c, i): kind for c, by_id in results.items() for i, e in by_id.items()
           if (kind := classify(e)) not in (None, OVERLONG_ERROR)}
    if not bad:
        return results
    kinds: dict[str, int] = {}
    for kind in bad.values():
        kinds[kind] = kinds.get(kind, 0) + 1
    first_category, first_id = min(bad)
    sample = results[first_category][first_id].get("result", "")
    write_failure(paths.failure, PassFailure(
        reason="failed requests", counts=kinds, example=str(sample)[:500], at=_now(),
        items=[FailedItem(category=c, id=i, error=k) for (c, i), k in sorted(bad.items())]))
    raise PassRefused(
        str(paths.folder), "every request answered", f"{len(bad)} failed requests {kinds}, e.g. {str(sample)[:200]!r}",
        "bfcl-eval would score these (as correct abstentions in irrelevance); fix the server, then rerun with --resume",
    )


# Phase 5: evaluate


def evaluate(settings: EvalSettings, paths: PassPaths, request: PassRequest, sized: PassSizing):
    """Run bfcl-eval evaluate; return (the score of every category, read strictly, wall time in seconds)."""
    shutil.rmtree(paths.score_dir, ignore_errors=True)
    args = ["evaluate", "--model", settings.registry_key, "--test-category", ",".join(request.categories),
            "--partial-eval"]
    not_before = time.time() - 1
    wall = run_phase("evaluate", args, _env(settings, paths, request, sized), paths.logs / "evaluate.log",
                     sized.stall_timeout_s, sized.phase_timeout_s)
    return read_scores(paths.score_dir, request.ids, not_before), round(wall, 3)


# Phase 6: count


def count(settings: EvalSettings, paths: PassPaths, request: PassRequest, manifest: EvalPassManifest,
          results: dict[str, dict[str, dict]], scores: dict, timings: dict[str, float], t0: float) -> list[BfclRow]:
    """Write outcomes.jsonl and the manifest's error counts, overlong, truncated and unparsed-credit items,
    answer kinds and timings; return the rows (with the counts beside correct/total, `count_rows`)."""
    outcomes = build_outcomes(request.ids, results, scores)
    rows = count_rows(request.step, request.pass_index, outcomes, settings.overlong_counted_wrong)
    write_outcomes(paths.outcomes, outcomes)
    manifest.error_counts = error_counts(outcomes)
    overlong = {c: [i for i in v if classify(results[c][i]) == OVERLONG_ERROR] for c, v in request.ids.items()}
    manifest.overlong_items = {c: v for c, v in overlong.items() if v}
    cut = {c: [o.id for o in outcomes if o.category == c and o.outcome == TRUNCATED] for c in request.ids}
    manifest.truncated_items = {c: v for c, v in cut.items() if v}
    # What BFCL's number hides: cut answers it would have scored correct (mostly abstentions in irrelevance).
    credited = {c: [i for i in v if i not in scores[c].failed] for c, v in manifest.truncated_items.items()}
    manifest.truncated_bfcl_correct = {c: v for c, v in credited.items() if v}
    if manifest.truncated_items:
        log.warning("pass %s: %d items had an answer cut at max_tokens=%s and count wrong (BFCL alone would have "
                    "credited %d); see truncated_items in %s, raise TOOLCANARY_EVALUATE_MAX_TOKENS if many",
                    paths.folder.name, sum(map(len, cut.values())), manifest.max_tokens,
                    sum(map(len, credited.values())), paths.manifest)
    record_answer_kinds(paths, manifest, outcomes)
    reasoning_only = {r.category: r.correct_empty_reasoning for r in rows if r.correct_empty_reasoning}
    if reasoning_only:
        log.warning("pass %s: BFCL counted %d items correct whose answer had no content although the server "
                    "generated tokens for it, a reasoning trace alone (%s); BFCL's count keeps them, "
                    "correct_empty_reasoning in %s counts them", paths.folder.name, sum(reasoning_only.values()),
                    ", ".join(f"{c}: {n}" for c, n in reasoning_only.items()), BFCL_BY_CATEGORY)
    manifest.timings_s = {**timings, "total": round(time.monotonic() - t0, 3)}
    write_json(paths.manifest, manifest.model_dump(mode="json"))
    return rows


def record_answer_kinds(paths: PassPaths, manifest: EvalPassManifest, outcomes: list[ItemOutcome]) -> None:
    """Put the answer kinds per category and the unparsed-credit items in the manifest, and warn of the latter:
    BFCL credits a call the server could not parse as an abstention, and its count keeps them."""
    kinds: dict[str, dict[str, int]] = {}
    credited: dict[str, list[str]] = {}
    for item in outcomes:
        if item.answer is None:
            continue
        tally = kinds.setdefault(item.category, {})
        tally[item.answer] = tally.get(item.answer, 0) + 1
        if item.outcome == CORRECT and item.answer == UNPARSED_CALL:
            credited.setdefault(item.category, []).append(item.id)
    manifest.answer_kinds = {c: dict(sorted(t.items())) for c, t in kinds.items()}
    manifest.unparsed_credit_items = credited
    if credited:
        log.warning("pass %s: BFCL counted %d items correct whose answer held a tool call the server did not "
                    "parse (%s); BFCL's count keeps them, correct_unparsed in %s counts them; see "
                    "unparsed_credit_items in %s", paths.folder.name, sum(map(len, credited.values())),
                    ", ".join(f"{c}: {len(v)}" for c, v in credited.items()), BFCL_BY_CATEGORY, paths.manifest)


# Phase 7: append


def append_rows(paths: PassPaths, scored: bool) -> list[BfclRow]:
    """Append the pass's rows that the CSV does not hold yet and mark the manifest finished.

    `scored`: run_pass saw rows of this pass before it started (a killed earlier run appended them, or a crash
    tore the last of them off, which are then appended again). Which rows are there is decided at the moment
    of the append, under the CSV's lock: another pass may be appending its own rows right now.
    """
    rows = read_counts(paths.counts)
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


def track(settings: EvalSettings, run: str, rows: list[BfclRow]) -> list[BfclRow]:
    """The appended rows, after writing them as TensorBoard scalars beside the run's training curves."""
    write_pass_scalars(settings.tensorboard_folder(run), rows)
    return rows
