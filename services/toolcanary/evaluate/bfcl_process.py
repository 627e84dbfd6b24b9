"""Run bfcl-eval's generate and evaluate phases, each in a fresh subprocess, with a progress bar.

A fresh process per phase matters: bfcl-eval caches multi-turn backends in module globals, so two
phases (or two passes) in one process can leak state into each other. The child is killed if the client
dies, so a killed pass never keeps writing into a folder that a resume is cleaning.

    run_phase("generate", ["generate", "--model", key, "--run-ids"], bfcl_env(...), log_file, stall_timeout_s)
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from toolcanary.contract.errors import ContractError
from toolcanary.evaluate.bfcl_files import progress_counts
from toolcanary.evaluate.sizing import duration_text

log = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass  # not Linux: the pass folder's lock in runner still stops two clients from sharing a folder


def bfcl_env(bfcl_root: Path, base_url: str, api_key: str, served_model: str, registry_key: str,
             timeout_s: float, retries: int, max_tokens: int) -> dict[str, str]:
    """The child's environment: only what this pass sets, so nothing stale (e.g. a .env) redirects it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BFCL_", "REMOTE_OPENAI"))}
    env.update(
        BFCL_PROJECT_ROOT=str(bfcl_root), OPENAI_BASE_URL=base_url, OPENAI_API_KEY=api_key,
        TOOLCANARY_EVALUATE_SERVED_MODEL=served_model, TOOLCANARY_EVALUATE_REGISTRY_KEY=registry_key,
        TOOLCANARY_EVALUATE_REQUEST_TIMEOUT_S=str(timeout_s), TOOLCANARY_EVALUATE_REQUEST_RETRIES=str(retries),
        TOOLCANARY_EVALUATE_MAX_TOKENS=str(max_tokens), HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1",
    )
    return env


def wrapper_argv(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "toolcanary.evaluate.bfcl_wrapper", *args]


def run_phase(
    name: str, args: list[str], env: dict[str, str], log_file: Path, stall_timeout_s: float,
    phase_timeout_s: float | None = None, progress: Callable[[], int] | None = None,
) -> float:
    """Run `python -m toolcanary.evaluate.bfcl_wrapper <args>`; return its wall time in seconds.

    The phase is stopped when nothing moves for `stall_timeout_s` (no item finished by `progress`'s count and
    no byte added to its log), or when it runs past `phase_timeout_s` if one is set.

    Raises:
        ContractError: the phase exited non-zero, stalled or ran past its limit (the log's tail is in the message).
    """
    if (Path(env["BFCL_PROJECT_ROOT"]) / ".env").exists():
        raise ContractError(env["BFCL_PROJECT_ROOT"], "a BFCL project root without .env", "a .env file",
                            "bfcl-eval lets .env override the server address; remove it")
    log_file.parent.mkdir(parents=True, exist_ok=True)
    argv = wrapper_argv(args)
    start = last_move = time.monotonic()
    seen: tuple[int, int] | None = None
    with log_file.open("ab") as out:
        child = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
        try:
            while child.poll() is None:
                now = time.monotonic()
                marker = (progress() if progress else 0, log_file.stat().st_size)
                if marker != seen:
                    seen, last_move = marker, now
                limit = _past_limit(now - start, now - last_move, stall_timeout_s, phase_timeout_s)
                if limit:
                    child.kill()
                    child.wait()
                    raise ContractError(f"bfcl {name}", limit[0], limit[1], f"See {log_file}; check the server, "
                                        f"then rerun with --resume (every answer so far is kept); {limit[2]}")
                time.sleep(0.5)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    if progress:
        progress()
    if child.returncode != 0:
        tail = log_file.read_text(errors="replace")[-1500:]
        raise ContractError(f"bfcl {name}", "exit status 0", f"{child.returncode}; log tail:\n{tail}",
                            f"Full log: {log_file}")
    return time.monotonic() - start


def _past_limit(elapsed: float, still: float, stall_timeout_s: float,
                phase_timeout_s: float | None) -> tuple[str, str, str] | None:
    """(expected, got, what to raise) when the phase must stop, else None."""
    if still > stall_timeout_s:
        return (f"progress at least every {stall_timeout_s:.0f} s", f"nothing for {still:.0f} s",
                "raise TOOLCANARY_EVALUATE_STALL_TIMEOUT_S if single requests take longer")
    if phase_timeout_s and elapsed > phase_timeout_s:
        return (f"to finish within {phase_timeout_s:.0f} s", "a timeout",
                "raise or unset TOOLCANARY_EVALUATE_PHASE_TIMEOUT_S")
    return None


class GenerateProgress:
    """tqdm bar over items done / total with the error count so far, fed by polling the result files; after its
    first minute with a finished item it logs, once, how long the whole phase should take at that rate."""

    FORECAST_AFTER_S = 60.0
    clock = staticmethod(time.monotonic)

    def __init__(self, result_dir: Path, total: int, already: int) -> None:
        self.result_dir, self.errors, self.already = result_dir, -1, already
        self.started, self.forecast = self.clock(), False
        self.bar = tqdm(total=total, initial=already, desc="generate", unit="item", dynamic_ncols=True)

    def __call__(self) -> int:
        done, errors = progress_counts(self.result_dir)
        # bfcl-eval rewrites a whole result file per item, so a read can catch one half written.
        done = min(max(done, self.bar.n), self.bar.total)
        if done != self.bar.n or errors != self.errors:
            self.errors = errors
            self.bar.set_postfix(errors=errors, refresh=False)
            self.bar.update(done - self.bar.n)
        self._forecast(done)
        return done

    def _forecast(self, done: int) -> None:
        elapsed, new = self.clock() - self.started, done - self.already
        if self.forecast or elapsed < self.FORECAST_AFTER_S or new <= 0:
            return
        self.forecast = True
        left = self.bar.total - done
        log.info("generate: %d items in the first %.0f s; the %d left should take about %s more (%s in all)",
                 new, elapsed, left, duration_text(left * elapsed / new),
                 duration_text(elapsed + left * elapsed / new))

    def close(self) -> None:
        self.bar.close()
