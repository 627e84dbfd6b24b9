"""Start serving one checkpoint, wait until it is healthy, stop it: for local processes and for compose.

eval-all and watch only use this small interface, so the same scheduling code drives a vLLM process on a
CPU box and the `serve` container of the GPU stack. Healthy means the server lists the expected
served-model name, so a container still serving the previous step is never scored by mistake.
`python -m toolcanary.evaluate eval-all --serving local|compose` runs it.

`ReloadingServing` (eval-all's default, `--reload`) keeps one server for every checkpoint of a run: it starts the
first checkpoint it is given as the others would, under a name for the whole run, and loads each later one into
it in place (`toolcanary.serve.reload`), which answers with the step and weights hash it loaded; those must be the
ledger's, or the step is refused. A server that cannot reload (started without `--reloadable`, or an older
vLLM) is stopped with a warning, and that checkpoint and every later one get a server of their own under the
step's own name, as without reloading.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from toolcanary.common.loopback import wait_until_ok
from toolcanary.contract.errors import ContractError, UsageError
from toolcanary.contract.manifests import read_checkpoint_manifest
from toolcanary.evaluate import gpu_share
from toolcanary.evaluate.bfcl_process import die_with_parent
from toolcanary.serve.reload import LOAD_METHOD

log = logging.getLogger(__name__)


class Serving(Protocol):
    def start(self, step: int, model_dir: Path | None, served_model: str) -> None: ...
    def stop(self) -> None: ...


def wait_healthy(base_url: str, served_model: str, timeout_s: float, alive: Callable[[], bool] = lambda: True) -> float:
    """Poll GET /models until it lists `served_model`; return the seconds waited.

    Raises:
        ContractError: the server died or did not list the model within `timeout_s`.
    """
    def listed(body: bytes) -> bool:
        return served_model in [m.get("id") for m in json.loads(body).get("data", [])]

    start = time.monotonic()
    if wait_until_ok(f"{base_url.rstrip('/')}/models", timeout_s, alive=alive, accept=listed, poll_s=1.0,
                     request_timeout_s=10.0):
        return time.monotonic() - start
    if not alive():
        raise ContractError(f"serving {served_model}", "a running server", "the server process exited",
                            "See the serving log in <results>/<run>/serving/")
    raise ContractError(f"serving {served_model} at {base_url}", f"the model listed within {timeout_s:.0f} s",
                        "no answer that lists it", "Check the serving log; raise --health-timeout-s for slow starts")


class LocalProcessServing:
    """A serving command run as a child process, e.g. the vLLM command of toolcanary.serve.command."""

    def __init__(self, template: str, port: int, log_dir: Path, env: dict[str, str] | None = None) -> None:
        if not template:
            raise UsageError("--serve-command", "a command template with {model_dir} {served_model} {port}",
                             "nothing", "Set TOOLCANARY_EVALUATE_SERVE_COMMAND or pass --serve-command")
        self.template, self.port, self.log_dir, self.env = template, port, log_dir, dict(env or {})
        self.process: subprocess.Popen | None = None

    def argv(self, step: int, model_dir: Path | None, served_model: str) -> list[str]:
        """The command line: the template is split first, then each argument is filled in.

        A folder name with spaces, quotes or `--flags` in it stays one argument, never extra options.
        """
        values = {"model_dir": str(model_dir or ""), "served_model": served_model, "port": self.port, "step": step}
        try:
            return [part.format(**values) for part in shlex.split(self.template)]
        except (KeyError, IndexError, ValueError) as err:
            raise UsageError("--serve-command", "a command template whose only fields are {model_dir} "
                             "{served_model} {port} {step}", f"{self.template!r} ({err})",
                             "Fix TOOLCANARY_EVALUATE_SERVE_COMMAND or --serve-command") from None

    def start(self, step: int, model_dir: Path | None, served_model: str) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_file = (self.log_dir / f"step_{step:04d}.log").open("ab")
        argv = self.argv(step, model_dir, served_model)
        log.info("serving step %d: %s", step, " ".join(argv))
        self.process = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        preexec_fn=die_with_parent, env={**os.environ, **self.env})
        log_file.close()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


class ComposeServing:
    """`docker compose up -d serve` with STEP set, then `docker compose stop serve`. With `reloadable` the server
    is started with TOOLCANARY_SERVE_RELOADABLE set, for `ReloadingServing`.

    With `gpu`, the server runs in a Compose project of its own (`<project>-gpu<N>`) with SERVE_GPU and
    SERVE_PORT set, so that several checkpoints are served at once, one per GPU.
    """

    def __init__(self, compose_command: str, service: str, execute: Callable[..., object] | None = None,
                 gpu: str | None = None, port: int | None = None, reloadable: bool = False) -> None:
        self.compose, self.service, self.gpu = shlex.split(compose_command), service, gpu
        self.env = {"SERVE_GPU": gpu, "SERVE_PORT": str(port)} if gpu is not None else {}
        if reloadable:
            self.env["TOOLCANARY_SERVE_RELOADABLE"] = "true"
        self.project = ["-p", f"toolcanary-serve-gpu{gpu}"] if gpu is not None else []
        self.execute = execute or (lambda argv, env: subprocess.run(argv, env=env, check=True))

    def commands(self, step: int, served_model: str) -> tuple[list[str], dict[str, str], list[str]]:
        """(up argv, the variables it adds to the environment, stop argv)."""
        env = {"STEP": str(step), "TOOLCANARY_SERVE_STEP": str(step), "TOOLCANARY_SERVE_MODEL_NAME": served_model,
               **self.env}
        compose = [*self.compose, *self.project]
        return [*compose, "up", "-d", self.service], env, [*compose, "stop", self.service]

    def check_gpus(self) -> None:
        """Refuse a serve GPU that the running training profile holds (toolcanary.evaluate.gpu_share)."""
        try:
            gpu_share.check(self.compose, None if self.gpu is None else [self.gpu])
        except gpu_share.GpuShared as err:
            raise ContractError("SERVE_GPU", "a GPU the running training profile does not hold", str(err)) from err

    def start(self, step: int, model_dir: Path | None, served_model: str) -> None:
        up, env, _ = self.commands(step, served_model)
        log.info("serving step %d: %s (%s)", step, " ".join(up), env)
        self.execute(up, {**os.environ, **env})

    def alive(self) -> bool:
        return True

    def stop(self) -> None:
        stop = [*self.compose, *self.project, "stop", self.service]
        log.info("stopping: %s", " ".join(stop))
        self.execute(stop, {**os.environ, **self.env})


class ReloadRefused(ContractError):
    """The server could not load the checkpoint in place (no reload endpoint, or the load failed)."""


class ReloadingServing:
    """One server for every checkpoint of a run: `start` starts it once, `load` puts a checkpoint's weights in it,
    `stop` leaves it running and `close` stops it.

    The server is named for the run (`served_model`), not for a step: which step it holds is what `load` checked.
    A checkpoint trained in another thinking mode than the one the server was started in (the chat template's
    default is set at start) gets a new server.
    """

    def __init__(self, inner: Serving, base_url: str, served_model: str, timeout_s: float = 600.0) -> None:
        self.inner, self.served_model, self.timeout_s = inner, served_model, timeout_s
        self.root = base_url.rstrip("/").removesuffix("/v1")
        self.started: tuple[int, bool | None] | None = None  # (step, thinking mode) the server was started with
        self.reloads = 0
        self.usable = True  # False once a server could not reload: then a server per checkpoint, the old way

    def alive(self) -> bool:
        return getattr(self.inner, "alive", lambda: True)()

    def start(self, step: int, model_dir: Path | None, served_model: str) -> None:
        if not self.usable:
            self.inner.start(step, model_dir, served_model)
            return
        thinking = read_checkpoint_manifest(model_dir).enable_thinking if model_dir is not None else None
        if self.started is not None and (not self.alive() or thinking != self.started[1]):
            self.close()
        if self.started is None:
            self.inner.start(step, model_dir, self.served_model)
            self.started = (step, thinking)

    def load(self, step: int, model_dir: Path, weights_sha256: str) -> None:
        """Put checkpoint `model_dir` in the healthy server (nothing to do for the one it was started with).

        Raises:
            ReloadRefused: the server has no reload endpoint or could not load it.
            ContractError: the server loaded another step or other weights than the ledger's.
        """
        if self.started is not None and self.started[0] == step:
            return
        loaded = self._rpc("/collective_rpc", {"method": LOAD_METHOD, "args": [model_dir.name]})["results"]
        wrong = [r for r in loaded if (r or {}).get("step") != step or r.get("weights_sha256") != weights_sha256]
        if not loaded or wrong:
            raise ContractError(f"reloading step {step} into the server", f"step {step} with weights {weights_sha256}",
                                f"{wrong or 'no worker answered'}", "Rerun with --no-reload and report the case")
        self._rpc("/reset_prefix_cache", {})  # its cached prefixes were computed with the old weights
        self.reloads += 1
        log.info("step %d loaded into the running server (%d reloads)", step, self.reloads)

    def _rpc(self, path: str, body: dict) -> dict:
        request = urllib.request.Request(f"{self.root}{path}", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                text = response.read()
        except (urllib.error.URLError, OSError) as err:
            detail = err.read().decode(errors="replace")[:300] if isinstance(err, urllib.error.HTTPError) else ""
            raise ReloadRefused(f"POST {self.root}{path}", "an answer of a server started with toolcanary.serve "
                                "--reloadable", f"{err} {detail}".strip(), "Start it with --reloadable") from None
        return json.loads(text) if text else {}

    def stop(self) -> None:
        """The server stays up for the next checkpoint; `close` stops it."""
        if not self.usable:
            self.inner.stop()

    def give_up(self) -> None:
        """This server cannot reload: stop it, and serve every later checkpoint with a server of its own, under
        the checkpoint's own name."""
        self.close()
        self.usable = False

    def close(self) -> None:
        self.inner.stop()
        self.started = None
