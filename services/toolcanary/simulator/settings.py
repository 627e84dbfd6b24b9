"""Every setting of the simulator service, with its default, in one place.

Precedence: CLI flag > environment variable > default here. Each field `name` reads the variable
`TOOLCANARY_SIMULATOR_<NAME>` (the runs root is shared by all services: `TOOLCANARY_RUNS_DIR`); the CLI flag is
`--<name with dashes>`. Lists (`upstreams`) are comma-separated in the environment.

    settings = SimulatorSettings.from_env(run="demo", backend="scripted")
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from toolcanary.contract import ContractError
from toolcanary.simulator.library_index import DEFAULT_LIBRARY_PATH

REPO_ROOT = Path(__file__).resolve().parents[3]
ENV_PREFIX = "TOOLCANARY_SIMULATOR_"
RUNS_DIR_ENV = "TOOLCANARY_RUNS_DIR"


class SimulatorSettings(BaseModel):
    """The simulator's configuration; field descriptions are the CLI help."""

    host: str = Field("127.0.0.1", description="interface to listen on (0.0.0.0 inside a container)")
    port: int = Field(8300, ge=1, le=65535, description="TCP port")
    backend: Literal["scripted", "llm"] = Field("scripted", description="who plays the four roles")
    run: str = Field("default", min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._-]+$",
                     description="run id: records go to <runs_dir>/<run>/simulator/")
    runs_dir: Path = Field(REPO_ROOT / "volumes" / "runs", description="root of all run folders")
    library: Path = Field(DEFAULT_LIBRARY_PATH, description="tool library JSON in TRUSTEE's format")
    seed: int = Field(0, description="seed of the scripted backend (tasks, arguments, results)")
    no_call_fraction: float = Field(0.0, ge=0.0, le=1.0,
                                    description="share of task keys made abstention tasks (no offered tool serves)")
    token: str | None = Field(None, description="bearer token required on every endpoint but /health")
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024, description="largest accepted request body")
    upstreams: list[str] = Field(default_factory=list, description="OpenAI-compatible base URLs (llm backend)")
    upstream_api_key: str | None = Field(None, description="API key sent to the upstreams, if they need one")
    model: str = Field("Qwen3-8B", description="served model name at the upstreams")
    timeout_s: float = Field(120.0, gt=0, description="per-attempt timeout of one upstream call")
    retries: int = Field(3, ge=0, le=10, description="extra attempts after a failed upstream call")
    backoff_s: float = Field(0.5, ge=0, description="first retry delay; doubles per attempt")
    max_tokens: int = Field(2048, ge=16, description="completion budget of a tool, user or verifier call")
    max_tokens_task: int = Field(8192, ge=16, description="completion budget of a task-author call")
    temperature: float = Field(0.7, ge=0, le=2, description="sampling temperature at the upstream")
    enable_thinking: bool = Field(True, description="ask Qwen3 upstreams to think before answering")
    health_timeout_s: float = Field(2.0, gt=0, description="timeout of the probe /health sends each upstream "
                                                           "(llm backend); below the container health check's 5 s")
    health_cache_s: float = Field(5.0, ge=0, description="how long /health reuses the last upstream probe, in "
                                                         "seconds (0: probe on every request)")
    task_cache_size: int = Field(256, ge=1, description="answered tasks kept in memory; older ones are read back "
                                                        "from an on-disk index, so memory stays flat over a run")
    log_level: str = Field("info", description="logging level")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: object) -> SimulatorSettings:
        """Defaults, then the environment, then `overrides` (CLI values that are not None).

        Raises:
            ContractError: a value does not fit its field, naming the variable and what it takes.
        """
        environ = dict(os.environ if environ is None else environ)
        values: dict[str, object] = {}
        for name in cls.model_fields:
            raw = environ.get(ENV_PREFIX + name.upper())
            if raw is None and name == "runs_dir":
                raw = environ.get(RUNS_DIR_ENV)
            if raw is not None and raw != "":
                values[name] = [u.strip() for u in raw.split(",") if u.strip()] if name == "upstreams" else raw
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls(**values)
        except ValidationError as err:
            first = err.errors()[0]
            field = str(first["loc"][0]) if first["loc"] else "?"
            raise ContractError(
                f"setting {field} (--{field.replace('_', '-')} or {ENV_PREFIX}{field.upper()})",
                first["msg"], repr(first.get("input"))[:200], "Fix the flag or the environment variable.",
            ) from err

    @property
    def records_dir(self) -> Path:
        return self.runs_dir / self.run / "simulator"
