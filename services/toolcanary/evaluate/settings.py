"""Every default of the evaluation client, in one place, with its environment-variable override.

Each field `name` can be set with `TOOLCANARY_EVALUATE_<NAME>` (the two shared folders also read
`TOOLCANARY_RESULTS_DIR` and `TOOLCANARY_CHECKPOINTS_DIR`, the run the stack's `TOOLCANARY_RUN`); the CLI flags of
the same name beat both (toolcanary.settings). `repeat_steps` is comma-separated in the environment. The options
of one command (`PassChoice` for `run`, `ItemChoice` for every scoring command, `WatchLimits` for `watch`) are
flags only; the command line hands them, typed, to the runner and the schedule.

    from toolcanary.evaluate.settings import EvalSettings
    settings = EvalSettings.from_env()
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import NoDecode

from toolcanary.contract.bfcl import OFFLINE_CATEGORIES
from toolcanary.contract.run_id import RunId
from toolcanary.contract.volumes import TENSORBOARD_DIR
from toolcanary.serve.command import SERVED_MODEL_TEMPLATE
from toolcanary.settings import Cli, Options, ServiceSettings, env, project_root, volume

REPO_ROOT = project_root()
ENV_PREFIX = "TOOLCANARY_EVALUATE_"


class EvalSettings(ServiceSettings, env_prefix=ENV_PREFIX):
    """Defaults for `python -m toolcanary.evaluate`; see docs/evaluate.md for the meaning of each."""

    # The run id when --run is not given (the compose stack sets TOOLCANARY_RUN).
    run: RunId | Literal[""] = Field("", validation_alias=env(ENV_PREFIX + "RUN", "TOOLCANARY_RUN"),
                                     description="run id (the stack sets TOOLCANARY_RUN)")
    results_dir: Path = Field(volume("results"), validation_alias=env(ENV_PREFIX + "RESULTS_DIR",
                                                                      "TOOLCANARY_RESULTS_DIR"),
                              description="root of the result folders")
    checkpoints_dir: Path = Field(volume("checkpoints"), validation_alias=env(ENV_PREFIX + "CHECKPOINTS_DIR",
                                                                              "TOOLCANARY_CHECKPOINTS_DIR"),
                                  description="root of the checkpoint folders")
    base_url: str = Field("http://127.0.0.1:8000/v1", description="the server's OpenAI API root, ending in /v1")
    api_key: str = Field("EMPTY", description="API key sent to the server")
    # Zeros are derived per pass from the served context, the server's KV cache and the item count
    # (toolcanary.evaluate.sizing, which says how); a value set here wins.
    threads: int = Field(0, ge=0, description="concurrent BFCL requests (0: as many as the server's KV cache holds "
                                              "at once, 8 when it does not say)")
    max_tokens: int = Field(0, ge=0, description="output cap of one request (0: min(8192, context / 4)); an answer "
                                                 "cut at the cap is counted wrong, as 'truncated'")
    # BFCL's own default; the server may clamp it (vLLM raises it to 0.01).
    temperature: float = Field(0.001, description="sampling temperature sent with each BFCL request")
    # Registry key BFCL files results under: no "_" (BFCL maps it to "/"), and "FC" forces function calling.
    registry_key: str = Field("toolcanary-served-FC", description="BFCL registry key the results are filed "
                                                                  "under (no '_', contains 'FC')")
    request_timeout_s: float = Field(600.0, description="per-request timeout, seconds")
    request_retries: int = Field(2, description="retries before a request counts as failed")
    probe_timeout_s: float = Field(60.0, description="timeout of the pre-flight probe of the server, seconds")
    phase_timeout_s: float = Field(0.0, ge=0, description="hard limit of one BFCL phase (generate, evaluate), "
                                                          "seconds (0: none; the stall guard stops a stuck phase)")
    stall_timeout_s: float = Field(0.0, ge=0, description="a phase with no progress for this long is refused, "
                                                          "seconds (0: (retries + 1) x request timeout + 60)")
    overlong_counted_wrong: Annotated[bool, Cli(flags=("--overlong-wrong",), off="--overlong-excluded")] = Field(
        True, description="items longer than the served context count as wrong (--overlong-excluded: left out of "
                          "the total)")
    # Items per category (0: every item), drawn once per run with `seed` and kept for every pass (--sample).
    sample: int = Field(0, description="items per BFCL category (0: every item)")
    sample_multi_turn: int = Field(0, description="items per multi-turn category, whose items cost many model calls "
                                                  "each (0: as many as sample)")
    seed: int = Field(0, description="seed of the item sample")
    # Served-model name per checkpoint, shared with the serving side (see toolcanary.serve.command).
    served_model_template: str = Field(SERVED_MODEL_TEMPLATE, description="served-model name of a checkpoint")
    # eval-all / watch: passes per step, ToolCanary's noise-floor design (three repeats at 0, 150, 200).
    repeat_steps: Annotated[tuple[int, ...], NoDecode] = Field(
        (0, 150, 200), description="steps that get repeated passes (comma-separated in the environment)")
    repeat_passes: int = Field(3, description="passes at each repeated step")
    # A pass is often bound by its slowest multi-turn chains rather than by the server's throughput; passes
    # of one step scored at once keep the server's batch full. Each pass then derives its threads from its
    # share of the KV cache (toolcanary.evaluate.sizing).
    passes_at_once: int = Field(1, ge=1, description="passes of one step scored at once on its server")
    serving: Literal["local", "compose"] = Field("local", description="who serves the checkpoints for eval-all / watch: local or compose")
    serve_command: str = Field("", description="command line that serves one checkpoint (serving local), with "
                                                "{model_dir} {served_model} {port} {step}")
    reload: bool = Field(True, description="one server for every checkpoint of a run (one per GPU): each later "
                                           "checkpoint's weights are loaded into it in place (toolcanary.serve "
                                           "--reloadable) instead of a new server per checkpoint; a server that "
                                           "cannot reload gets the next checkpoint the old way (--no-reload: always)")
    serve_port: int = Field(8000, description="port of the locally served checkpoint")
    serve_host: str = Field("127.0.0.1", description="host of the locally served checkpoint")
    health_timeout_s: float = Field(1800.0, description="how long eval-all / watch wait for serve to list the "
                                                        "checkpoint, seconds")
    watch_interval_s: float = Field(60.0, description="how often watch looks for new checkpoints, seconds")
    gpus: Annotated[tuple[str, ...], NoDecode, Cli(metavar="GPU")] = Field(
        (), description="eval-all / watch: serve this many checkpoints at once, one server per listed GPU, on "
                        "serve_port, serve_port + 1, ... (comma-separated in the environment; empty: one server "
                        "on the configured GPU)")
    compose_command: str = Field("docker compose", description="the Compose command (serving compose)")
    compose_service: str = Field("serve", description="the Compose service that serves checkpoints")
    # verl's tensorboard logger reads TENSORBOARD_DIR; one value puts both in the same folder.
    tensorboard_dir: Annotated[Path | None, Cli(metavar="DIR")] = Field(
        None, validation_alias=env(ENV_PREFIX + "TENSORBOARD_DIR", "TENSORBOARD_DIR"),
        description="the run's TensorBoard folder, the one verl's tensorboard logger writes; each pass's scores go "
                    "to its bfcl/ sub-folder (default: <results_dir>/<run>/tensorboard)")
    report_command: str = Field("", description="command eval-all / watch run after each scored step, {run} "
                                                "replaced by the run id, e.g. 'make_figures --run {run} --report' "
                                                "(empty: none)")

    @field_validator("repeat_steps", "gpus", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        return tuple(part.strip() for part in value.split(",") if part.strip()) if isinstance(value, str) else value

    def tensorboard_folder(self, run: str) -> Path:
        return self.tensorboard_dir if self.tensorboard_dir is not None else self.results_dir / run / TENSORBOARD_DIR

    def replace(self, **changes: object) -> EvalSettings:
        """A copy with the CLI values that were given (None means not given)."""
        return self.model_copy(update={k: v for k, v in changes.items() if v is not None})


# The settings only eval-all and watch read (serving and repeats), and only watch.
SCHEDULE_ONLY = ("serving", "reload", "serve_command", "serve_port", "health_timeout_s", "repeat_steps", "repeat_passes",
                 "watch_interval_s", "gpus", "report_command")
WATCH_ONLY = ("watch_interval_s",)


class ItemChoice(Options):
    """Which BFCL items a pass scores, besides the sample settings (sample, sample_multi_turn, seed)."""

    categories: Annotated[list[str] | None, Cli(nargs="+", metavar="CATEGORY")] = Field(
        None, description=f"BFCL categories to score (default: the {len(OFFLINE_CATEGORIES)} offline ones)")
    ids_file: Path | None = Field(None, description='JSON {"category": ["id", ...]}: score exactly these items')


class PassChoice(Options):
    """Which pass `run` scores, of which served model."""

    step: int = Field(description="training step of the checkpoint")
    pass_index: Annotated[int, Cli(flags=("--pass",))] = Field(1, ge=1, description="1-based repeat index")
    model: str | None = Field(None, description="the server's --served-model-name (default: <run>-stepNNNN)")
    checkpoint_dir: Path | None = Field(None, description="the checkpoint folder (default: "
                                                          "<checkpoints>/<run>/step_NNNN)")
    base_model: str | None = Field(None, description="name of the untrained model served when there is no "
                                                     "checkpoint")
    resume: Annotated[bool, Cli(off="")] = Field(False, description="finish an interrupted pass with the same "
                                                                    "arguments")
    stop_after: Literal["generate", "evaluate"] | None = Field(None, description="stop after this phase; finish "
                                                                                "with --resume")


class WatchLimits(Options):
    """When `watch` stops."""

    until_step: int | None = Field(None, description="stop once this step is scored")
    max_idle_s: float | None = Field(None, description="stop after this long without a new checkpoint, seconds")


class Verbosity(Options):
    verbose: Annotated[bool, Cli(flags=("-v", "--verbose"))] = Field(False, description="log at debug level")
