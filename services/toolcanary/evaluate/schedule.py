"""eval-all and watch: score every published checkpoint of a run, plus the repeats, through a Serving.

Published checkpoints are the lines of `<checkpoints>/<run>/published.jsonl`
(`toolcanary.contract.manifests.PublishedCheckpoint`, read with `read_published`). A (step, pass) is done
when its rows are in the run's CSV; a pass folder without rows is resumed, so an interrupted eval-all picks
up where it stopped.

Before a step is served its folder must lie directly inside `<checkpoints>/<run>/` (no link, no path
elsewhere) and its weights are hashed again against the manifest and the published line
(`toolcanary.contract.manifests.verify_checkpoint`). A step that fails that, or whose server never becomes
healthy, is recorded and skipped; the other steps are still scored, and eval-all exits non-zero at the end with
one line per failure.

After each step scored (or partly scored), `report_command` (when set) runs with `{run}` replaced by the run id:
`make watch` sets it to the analysis's `make_figures --run {run} --report`, so the run's report page grows as
the checkpoints are scored. A report that fails is logged as an error and scoring goes on: the page is a view
of the CSV, which holds every score.

    python -m toolcanary.evaluate eval-all --run grpo1 --serving compose
    python -m toolcanary.evaluate watch --run grpo1 --serving local --serve-command "..." --until-step 200
"""

from __future__ import annotations

import logging
import queue
import shlex
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from toolcanary.contract.csv_schemas import read_bfcl_by_category
from toolcanary.contract.errors import ContractError, UsageError
from toolcanary.contract.manifests import read_published, verify_checkpoint
from toolcanary.evaluate.runner import PassOptions, PassPaths, csv_lock, run_pass
from toolcanary.evaluate.serving import (
    ComposeServing,
    LocalProcessServing,
    ReloadingServing,
    ReloadRefused,
    Serving,
    wait_healthy,
)
from toolcanary.evaluate.settings import EvalSettings, ItemChoice, WatchLimits
from toolcanary.serve.command import RUN_SERVED_MODEL_TEMPLATE, served_model_name

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Published:
    step: int
    path: Path
    weights_sha256: str


def published_checkpoints(checkpoints_dir: Path, run: str) -> list[Published]:
    """Published checkpoints in step order, read with the contract's ledger reader (its append-only rule: a
    torn last line and fenced torn lines are skipped with a warning, any other bad line is refused with its
    number). A step announced twice counts once, by its last line; a path that is not an absolute, existing
    folder is taken as the name of a folder beside the ledger (it was written on another machine)."""
    folder = checkpoints_dir / run
    found: dict[int, Published] = {}
    for record in read_published(folder):
        path = Path(record.path)
        if not path.is_absolute() or not path.exists():
            path = folder / path.name
        found[record.step] = Published(record.step, path, record.weights_sha256)
    return [found[s] for s in sorted(found)]


def checked_checkpoint(checkpoints_dir: Path, run: str, entry: Published) -> Path:
    """The entry's folder, once it is a real folder directly inside `<checkpoints>/<run>/` whose weights still
    hash to what was published.

    Raises:
        ContractError: a folder elsewhere (a link, `..`, an absolute path), or weights that changed.
    """
    run_folder = (checkpoints_dir / run).resolve()
    if entry.path.is_symlink() or entry.path.resolve().parent != run_folder:
        raise ContractError(f"{checkpoints_dir / run / 'published.jsonl'}: step {entry.step}",
                            f"a checkpoint folder directly inside {run_folder}",
                            f"{str(entry.path)!r}" + (" (a link)" if entry.path.is_symlink() else ""),
                            "Only the run's own checkpoints are served; republish the step")
    verify_checkpoint(entry.path, entry.weights_sha256)
    return entry.path


def passes_for(step: int, settings: EvalSettings) -> list[int]:
    return list(range(1, settings.repeat_passes + 1)) if step in settings.repeat_steps else [1]


def scored_passes(results_dir: Path, run: str) -> set[tuple[int, int]]:
    csv_path = PassPaths.of(results_dir, run, 0, 1).csv
    if not csv_path.exists():
        return set()
    with csv_lock(csv_path):
        rows = read_bfcl_by_category(csv_path, complete=False)
    # A pass that lost rows to a crash is not done: eval-all resumes it, which appends them again.
    every = {r.category for r in rows}
    by_pass: dict[tuple[int, int], set[str]] = {}
    for row in rows:
        by_pass.setdefault((row.step, row.pass_index), set()).add(row.category)
    return {key for key, categories in by_pass.items() if categories == every}


def make_serving(settings: EvalSettings, run: str) -> Serving:
    if settings.serving == "compose":
        return ComposeServing(settings.compose_command, settings.compose_service, reloadable=settings.reload)
    if settings.serving == "local":
        return LocalProcessServing(settings.serve_command, settings.serve_port, settings.results_dir / run / "serving")
    raise UsageError("--serving", "local or compose", repr(settings.serving))


def reloading(settings: EvalSettings, run: str, server: Serving) -> Serving:
    """With `settings.reload`, the server kept for every checkpoint of the run (toolcanary.evaluate.serving)."""
    if not settings.reload or isinstance(server, ReloadingServing):
        return server
    return ReloadingServing(server, settings.base_url, served_model_name(run, 0, RUN_SERVED_MODEL_TEMPLATE))


def local_url(settings: EvalSettings) -> EvalSettings:
    """With local serving the client reaches the server it starts (serve_host:serve_port), not base_url."""
    if settings.serving != "local":
        return settings
    return settings.replace(base_url=f"http://{settings.serve_host}:{settings.serve_port}/v1")


def servers(settings: EvalSettings, run: str) -> list[tuple[EvalSettings, Serving]]:
    """One (settings, serving) per server eval-all runs at once: one per GPU of `settings.gpus` (on serve_port,
    serve_port + 1, ...), else the one server as configured."""
    if not settings.gpus:
        return [(local_url(settings), make_serving(settings, run))]
    if settings.serving not in ("local", "compose"):
        raise UsageError("--serving", "local or compose", repr(settings.serving))
    out: list[tuple[EvalSettings, Serving]] = []
    for offset, gpu in enumerate(settings.gpus):
        port = settings.serve_port + offset
        mine = settings.replace(serve_port=port, base_url=f"http://{settings.serve_host}:{port}/v1")  # compose too
        if settings.serving == "local":
            out.append((mine, LocalProcessServing(settings.serve_command, port, settings.results_dir / run / "serving",
                                                  env={"CUDA_VISIBLE_DEVICES": gpu})))
        else:
            out.append((mine, ComposeServing(settings.compose_command, settings.compose_service, gpu=gpu, port=port,
                                             reloadable=settings.reload)))
    return out


def eval_all(settings: EvalSettings, run: str, items: ItemChoice | None = None,
             serving: Serving | None = None) -> list[tuple[int, int]]:
    """Score every missing (step, pass) on `items` (default: every offline category); return those scored.
    Raises after trying all if any pass failed.

    With several servers (`settings.gpus`), each takes the next published step not yet taken, so the steps are
    served at once, one per GPU; rows are appended under the CSV's lock as with one server.
    """
    items = items or ItemChoice()
    pool = [(local_url(settings), serving)] if serving is not None else servers(settings, run)
    for _, server in pool:
        if isinstance(server, ComposeServing):
            server.check_gpus()  # before any step: every one would be served on the same GPU
    pool = [(mine, reloading(mine, run, server)) for mine, server in pool]
    done = scored_passes(settings.results_dir, run)
    work: queue.SimpleQueue = queue.SimpleQueue()
    for entry in published_checkpoints(settings.checkpoints_dir, run):
        todo = [p for p in passes_for(entry.step, settings) if (entry.step, p) not in done]
        if todo:
            work.put((entry, todo))
    scored, failures = [], []

    def serve_steps(mine: EvalSettings, server: Serving) -> None:
        while True:
            try:
                entry, todo = work.get_nowait()
            except queue.Empty:
                return
            try:
                scored.extend(score_step(mine, run, items, server, entry, todo))
            except StepFailed as err:
                scored.extend(err.scored)
                failures.append((entry.step, f"step {entry.step} {err.got}"))
            except ContractError as err:
                log.error("step %d refused: %s", entry.step, err)
                failures.append((entry.step, f"step {entry.step}: {err}"))
                continue
            refresh_report(settings, run)

    try:
        if len(pool) == 1:
            serve_steps(*pool[0])
        else:
            with ThreadPoolExecutor(max_workers=len(pool), thread_name_prefix="serve") as executor:
                for future in [executor.submit(serve_steps, *server) for server in pool]:
                    future.result()
    finally:
        for _, server in pool:
            if isinstance(server, ReloadingServing):
                server.close()
    scored.sort()
    failures = [text for _, text in sorted(failures)]
    if failures:
        done_text = ", ".join(f"step {s} pass {p}" for s, p in scored) or "none"
        raise ContractError(f"eval-all of run {run!r}", "every pass scored",
                            f"{len(failures)} refused: " + " | ".join(failures) +
                            f" ({len(scored)} passes scored: {done_text})",
                            "Fix the cause and rerun eval-all; it resumes those passes")
    return scored


REPORT_LOCK = threading.Lock()  # one report at a time when several servers finish steps together


def refresh_report(settings: EvalSettings, run: str) -> bool:
    """Run `settings.report_command` for `run`; True when it succeeded (False also when there is none)."""
    if not settings.report_command:
        return False
    command = shlex.split(settings.report_command.replace("{run}", run))
    with REPORT_LOCK:
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
        except (OSError, subprocess.TimeoutExpired) as error:
            log.error("report of run %s not refreshed: %s could not run (%s); scoring goes on", run, command[0], error)
            return False
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        log.error("report of run %s not refreshed: %s exited %d: %s; scoring goes on", run, shlex.join(command),
                  done.returncode, " / ".join(tail))
        return False
    log.info("report of run %s refreshed", run)
    return True


def score_step(settings: EvalSettings, run: str, items: ItemChoice, serving: Serving, entry: Published,
               todo: list[int]) -> list[tuple[int, int]]:
    """Check, serve and score one published step; return the passes scored.

    Raises:
        ContractError: the step's checkpoint or its server was refused (nothing scored).
        StepFailed: some of its passes were refused, after every pass of the step was tried.
    """
    folder = checked_checkpoint(settings.checkpoints_dir, run, entry)
    reload = isinstance(serving, ReloadingServing) and serving.usable
    served = serving.served_model if reload else served_model_name(run, entry.step, settings.served_model_template)
    scored, failures = [], []
    serving.start(entry.step, folder, served)
    try:
        waited = wait_healthy(settings.base_url, served, settings.health_timeout_s, getattr(serving, "alive", lambda: True))
        if reload:
            try:
                serving.load(entry.step, folder, entry.weights_sha256)
            except ReloadRefused as err:
                log.warning("step %d: the server cannot load it in place (%s); this step and the later ones get a "
                            "server each", entry.step, err)
                serving.give_up()
                served = served_model_name(run, entry.step, settings.served_model_template)
                serving.start(entry.step, folder, served)
                waited += wait_healthy(settings.base_url, served, settings.health_timeout_s, serving.alive)
        log.info("step %d healthy after %.1f s; passes %s", entry.step, waited, todo)
        def score(pass_index: int) -> None:
            pass_folder = PassPaths.of(settings.results_dir, run, entry.step, pass_index).folder
            opts = PassOptions(run=run, step=entry.step, pass_index=pass_index, served_model=served,
                               categories=items.categories, sample=settings.sample or None,
                               sample_multi_turn=settings.sample_multi_turn or None, seed=settings.seed,
                               ids_file=items.ids_file, checkpoint_dir=folder, resume=pass_folder.exists())
            try:
                run_pass(settings, opts)
                scored.append((entry.step, pass_index))
            except ContractError as err:
                log.error("step %d pass %d refused: %s", entry.step, pass_index, err)
                failures.append(f"pass {pass_index}: {err}")

        # Passes append their rows under the CSV's lock, as the servers of several GPUs do.
        with ThreadPoolExecutor(max_workers=settings.passes_at_once, thread_name_prefix="pass") as executor:
            list(executor.map(score, todo))
    finally:
        serving.stop()
    if failures:
        raise StepFailed(sorted(scored), " | ".join(sorted(failures)))
    return sorted(scored)


class StepFailed(ContractError):
    """Some passes of a step were refused; `scored` holds those that were not."""

    def __init__(self, scored: list[tuple[int, int]], failures: str) -> None:
        super().__init__("passes", "every pass scored", failures)
        self.scored = scored


def watch(settings: EvalSettings, run: str, items: ItemChoice | None = None, limits: WatchLimits | None = None,
          serving: Serving | None = None) -> list[tuple[int, int]]:
    """eval-all every `watch_interval_s` until `limits.until_step` is fully scored or `limits.max_idle_s` pass
    without a new checkpoint (neither: until stopped)."""
    limits = limits or WatchLimits()
    scored, idle_since = [], time.monotonic()
    while True:
        new = eval_all(settings, run, items, serving)
        scored += new
        if new:
            idle_since = time.monotonic()
        done = scored_passes(settings.results_dir, run)
        until = limits.until_step
        if until is not None and all((until, p) in done for p in passes_for(until, settings)):
            return scored
        if limits.max_idle_s is not None and time.monotonic() - idle_since > limits.max_idle_s:
            log.info("no new checkpoint for %.0f s; stopping", limits.max_idle_s)
            return scored
        time.sleep(settings.watch_interval_s)
