"""Refuse to serve a checkpoint on a GPU that the running training profile holds.

`make eval`, `make eval-all` and `make watch` serve checkpoints on SERVE_GPU. While the train profile runs, its
simulator and trainer hold their GPUs (SIMULATOR_GPU_*, TRAINER_GPU_*): a vLLM started on one of them either
fails its free-memory check (every step skipped) or takes memory the trainer needs at its next wake-up. This
asks Compose itself which services run and which devices each one reserves, and stops with the free ones named.
Standard library only, so the host's python3 runs it before anything is installed.

    PYTHONPATH=services python3 -m toolcanary.evaluate.gpu_share --compose "docker compose"
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys

TRAINING = ("simulator", "trainer")
SERVE = "serve"


class GpuShared(RuntimeError):
    """The serve GPU is one the running training profile holds."""


def reserved(config: dict, service: str) -> list[str]:
    """The device ids `service` reserves in a resolved Compose configuration (`config --format json`)."""
    reservations = config.get("services", {}).get(service, {}).get("deploy", {}).get("resources", {})
    return [str(device_id) for device in reservations.get("reservations", {}).get("devices", []) or []
            for device_id in device.get("device_ids", []) or []]


def shared_gpus(config: dict, running: set[str], serving: list[str] | None = None) -> str | None:
    """Why serving on `serving` (default: the GPU serve reserves) would share a GPU with training (None when it
    would not)."""
    held = {gpu: name for name in TRAINING if name in running for gpu in reserved(config, name)}
    serving = reserved(config, SERVE) if serving is None else serving
    clash = [gpu for gpu in serving if gpu in held]
    if not clash:
        return None
    known = sorted({gpu for name in config.get("services", {}) for gpu in reserved(config, name)}, key=_order)
    free = [gpu for gpu in known if gpu not in held]
    where = ", ".join(f"GPU {gpu} ({held[gpu]})" for gpu in clash)
    hint = (f"serve on a free one ({', '.join(free)}): SERVE_GPU for make eval, GPUS= for make eval-all" if free else
            "no GPU the stack names is free while training runs: score after training (make eval-all), or name a "
            "GPU outside the stack's in SERVE_GPU")
    return (f"serve would run on {where}, which the running training profile holds: vLLM would fail its "
            f"free-memory check or take memory the trainer needs. Expected a GPU training does not hold; {hint}")


def _order(gpu: str) -> tuple[int, str]:
    return (int(gpu), gpu) if gpu.isdigit() else (1 << 30, gpu)


def running_services(compose: list[str]) -> set[str]:
    done = subprocess.run([*compose, "--profile", "train", "ps", "--status", "running", "--services"],
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise GpuShared(f"'{' '.join(compose)} ps' failed: {done.stderr.strip()[-500:]}")
    return {line.strip() for line in done.stdout.splitlines() if line.strip()}


def resolved_config(compose: list[str]) -> dict:
    done = subprocess.run([*compose, "--profile", "train", "--profile", "eval", "config", "--format", "json"],
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise GpuShared(f"'{' '.join(compose)} config' failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)


def check(compose: list[str], serving: list[str] | None = None) -> None:
    """Raises GpuShared when serve's GPU (or one of `serving`) is held by a running simulator or trainer."""
    running = running_services(compose)
    if not running & set(TRAINING):
        return
    problem = shared_gpus(resolved_config(compose), running, serving)
    if problem:
        raise GpuShared(problem)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m toolcanary.evaluate.gpu_share", description=" ".join(__doc__.split("\n\n")[0].split()),
        epilog='examples:\n  PYTHONPATH=services python3 -m toolcanary.evaluate.gpu_share --compose "docker compose"',
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compose", default="docker compose", help="the Compose command (default: docker compose)")
    args = parser.parse_args(argv)
    try:
        check(shlex.split(args.compose))
    except GpuShared as err:
        sys.stderr.write(f"error: {err}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
