"""Every default of the evaluation client, in one place, with its environment-variable override.

Each field `name` can be set with `TOOLCANARY_EVALUATE_<NAME>` (the two shared folders use
`TOOLCANARY_RESULTS_DIR`, `TOOLCANARY_CHECKPOINTS_DIR` and the stack's `TOOLCANARY_RUN`); the CLI flags of the same name beat both.

    from toolcanary.evaluate.settings import EvalSettings
    settings = EvalSettings.from_env()
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from toolcanary.contract.errors import ContractError

REPO_ROOT = Path(__file__).resolve().parents[3]
SHARED_NAMES = {"results_dir": "TOOLCANARY_RESULTS_DIR", "checkpoints_dir": "TOOLCANARY_CHECKPOINTS_DIR", "run": "TOOLCANARY_RUN"}
ENV_PREFIX = "TOOLCANARY_EVALUATE_"


@dataclass
class EvalSettings:
    """Defaults for `python -m toolcanary.evaluate`; see docs/evaluate.md for the meaning of each."""

    # The run id when --run is not given (the compose stack sets TOOLCANARY_RUN).
    run: str = ""
    results_dir: Path = REPO_ROOT / "volumes" / "results"
    checkpoints_dir: Path = REPO_ROOT / "volumes" / "checkpoints"
    base_url: str = "http://127.0.0.1:8000/v1"
    api_key: str = "EMPTY"
    threads: int = 8
    # BFCL's own default; the server may clamp it (vLLM raises it to 0.01).
    temperature: float = 0.001
    # Registry key BFCL files results under: no "_" (BFCL maps it to "/"), and "FC" forces function calling.
    registry_key: str = "toolcanary-served-FC"
    request_timeout_s: float = 600.0
    request_retries: int = 2
    probe_timeout_s: float = 60.0
    phase_timeout_s: float = 6 * 3600.0
    overlong_counted_wrong: bool = True
    # Items per category (0: every item), drawn once per run with `seed` and kept for every pass (--sample).
    sample: int = 0
    seed: int = 0
    # Served-model name per checkpoint, shared with the serving side (see toolcanary.serve.command).
    served_model_template: str = "{run}-step{step:04d}"
    # eval-all / watch: passes per step, ToolCanary's noise-floor design (three repeats at 0, 150, 200).
    repeat_steps: tuple[int, ...] = (0, 150, 200)
    repeat_passes: int = 3
    serving: str = "local"
    serve_command: str = ""
    serve_port: int = 8000
    serve_host: str = "127.0.0.1"
    health_timeout_s: float = 1800.0
    watch_interval_s: float = 60.0
    compose_command: str = "docker compose"
    compose_service: str = "serve"

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> EvalSettings:
        """Defaults overridden by TOOLCANARY_* variables, converted to each field's type."""
        environ = dict(os.environ if environ is None else environ)
        values: dict[str, object] = {}
        for spec in dataclasses.fields(cls):
            name = SHARED_NAMES.get(spec.name, ENV_PREFIX + spec.name.upper())
            if name in environ:
                values[spec.name] = convert(name, environ[name], getattr(cls(), spec.name))
        return cls(**values)

    def replace(self, **changes: object) -> EvalSettings:
        """A copy with the CLI values that were given (None means not given)."""
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})


def convert(name: str, raw: str, default: object) -> object:
    """Parse one environment value into the type of its default, or say what was expected."""
    try:
        if isinstance(default, bool):
            if raw.lower() not in ("1", "0", "true", "false", "yes", "no"):
                raise ValueError(raw)
            return raw.lower() in ("1", "true", "yes")
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
        if isinstance(default, Path):
            return Path(raw)
        if isinstance(default, tuple):
            return tuple(int(part) for part in raw.split(",") if part.strip())
    except ValueError:
        raise ContractError(
            f"environment variable {name}", f"a value of type {type(default).__name__}", repr(raw),
            f"Fix or unset {name}",
        ) from None
    return raw
