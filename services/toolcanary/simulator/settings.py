"""Every setting of the simulator service, with its default, in one place.

Precedence: CLI flag > environment variable > default here. Each field `name` reads the variable
`TOOLCANARY_SIMULATOR_<NAME>` (the runs root is shared by all services: `TOOLCANARY_RUNS_DIR`); the CLI flag is
`--<name with dashes>`. Lists (`upstreams`) are comma-separated in the environment.

`mode` picks whose behaviour the llm backend plays. `trustee` (the GPU recipe's): TRUSTEE's prompt templates and
ToolBench library read from the checkout at `trustee_dir`, its sampling (no temperature sent, frequency penalty
0.1), its attempts (3 per role with a fixed 0.5 s pause; the task author 2 within 60 s), the OpenAI SDK's 2 re-sends of
a failed request within each attempt, and its tolerant reading of answers. `toolcanary`: the project's own prompts and library, with the choices docs/simulator.md justifies. The
fields MODE_DEFAULTS names (the class's presets) take the mode's value unless set; their help lists it. "none" in
the environment means "not sent".

    settings = SimulatorSettings.from_env(run="demo", backend="scripted")
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import NoDecode

from toolcanary.common.trustee_checkout import CommitId, TrusteeCheckout, pinned_commit
from toolcanary.contract.run_id import RunId
from toolcanary.settings import Cli, Options, Presets, ServiceSettings, env, project_root, volume
from toolcanary.simulator.library_index import DEFAULT_LIBRARY_PATH

REPO_ROOT = project_root()
ENV_PREFIX = "TOOLCANARY_SIMULATOR_"
RUNS_DIR_ENV = "TOOLCANARY_RUNS_DIR"
# Secrets are read from the environment only, never from a flag (a flag shows in the process list).
ENV_ONLY = ("token", "upstream_api_key")  # their fields say Cli(env_only=True)
Mode = Literal["trustee", "toolcanary"]
MIN_TOKEN_CHARS = 16  # a guessable token is no guard
# What each mode puts in the fields left unset. TRUSTEE's values: trustee_reference.yaml in the GPU recipe.
MODE_DEFAULTS: dict[str, dict[str, Any]] = {
    "trustee": {"temperature": None, "frequency_penalty": 0.1, "retries": 2, "backoff": "fixed",
                "retries_task": 1, "timeout_s_task": 60.0, "backoff_s_task": 1.0,
                # TRUSTEE's AsyncOpenAI clients keep the SDK's default max_retries=2 inside each attempt.
                "sdk_retries": 2},
    # The task author's attempts, timeout and pause follow the role calls' (unset: None). Mode trustee's library
    # is the checkout's, found from trustee_dir once the settings are read.
    "toolcanary": {"temperature": 0.7, "frequency_penalty": None, "retries": 3, "backoff": "exponential",
                   "sdk_retries": 0, "library": DEFAULT_LIBRARY_PATH},
}


class SimulatorSettings(ServiceSettings, env_prefix=ENV_PREFIX):
    """The simulator's configuration; field descriptions are the CLI help."""

    whole_model_field: ClassVar[str | None] = "mode"  # the checks across fields are the mode's
    presets: ClassVar[Presets] = Presets(("mode",), {(mode,): values for mode, values in MODE_DEFAULTS.items()})

    host: str = Field("127.0.0.1", description="interface to listen on (0.0.0.0 inside a container)")
    port: int = Field(8300, ge=1, le=65535, description="TCP port")
    backend: Literal["scripted", "llm"] = Field("scripted", description="who plays the four roles")
    mode: Mode = Field("toolcanary", description="whose prompts, library and call rules the llm backend plays: "
                                                 "trustee (TRUSTEE's, from trustee_dir) or toolcanary (ours)")
    trustee_dir: Path | None = Field(None, description="a TRUSTEE checkout at trustee_commit (mode trustee)")
    trustee_commit: CommitId = Field(default_factory=pinned_commit, description="the TRUSTEE commit played (mode trustee): the "
                                     "checkout's files are hashed against it before use; default the pinned one")
    run: RunId = Field("default", description="run id: records go to <runs_dir>/<run>/simulator/")
    runs_dir: Path = Field(volume("runs"), validation_alias=env(ENV_PREFIX + "RUNS_DIR", RUNS_DIR_ENV),
                           description="root of all run folders")
    library: Path | None = Field(None, description="tool library JSON in TRUSTEE's format (none in mode trustee: "
                                                   "the checkout's toolbench_tools.json)")
    seed: int = Field(0, description="seed of the scripted backend (tasks, arguments, results)")
    replay_tasks_of: RunId | None = Field(None, description="serve the tasks this run's simulator authored (under "
                                          "runs_dir), matched by each request's draw, instead of authoring new ones")
    no_call_fraction: float = Field(0.0, ge=0.0, le=1.0,
                                    description="share of task keys made abstention tasks (no offered tool serves); "
                                                "mode toolcanary only: in mode trustee the trainer's "
                                                "TOOLCANARY_TRAIN_NO_CALL_FRACTION asks for them")
    token: Annotated[str | None, Cli(env_only=True)] = Field(None, description="bearer token required on every endpoint but /health; `serve` "
                                                "refuses to start without one unless --insecure")
    insecure: bool = Field(False, description="serve without a bearer token: anyone who reaches the port can ask "
                                              "for tasks and rewards (tests, a private loopback)")
    max_json_depth: int = Field(32, ge=4, le=1000, description="deepest nesting of arrays and objects accepted in "
                                                               "a request body")
    limit_concurrency: int = Field(2048, ge=8, description="most connections and requests served at once; more "
                                                           "get a 503 at once instead of queueing (above the "
                                                           "trainer's concurrent episodes)")
    timeout_keep_alive_s: int = Field(5, ge=1, description="seconds an idle keep-alive connection stays open, "
                                                           "whatever bytes trickle in")
    head_timeout_s: float = Field(10.0, gt=0, description="seconds a connection has to send a whole request "
                                                          "head (from opening, or from a head's first bytes) "
                                                          "before it is closed")
    body_timeout_s: float = Field(60.0, gt=0, description="seconds a request has, from its head, to send its "
                                                          "whole body before the connection is closed")
    max_connections_per_client: int = Field(1024, ge=1, description="most connections one peer address holds at "
                                                                    "once; more are answered 503 and closed")
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024, description="largest accepted request body")
    upstreams: Annotated[list[str], NoDecode, Cli(flags=("--upstream",), repeat=True, nargs="+", metavar="URL")] = (
        Field(default_factory=list, description="OpenAI-compatible base URLs (llm backend): several after one "
                                                "flag or the flag repeated; comma-separated in the environment"))
    upstream_api_key: Annotated[str | None, Cli(env_only=True)] = Field(
        None, description="API key sent to the upstreams, if they need one")
    model: str = Field("Qwen3-8B", description="served model name at the upstreams")
    timeout_s: float = Field(120.0, gt=0, description="per-attempt timeout of one upstream call")
    # The mode's values (MODE_DEFAULTS) are listed in each flag's help.
    retries: int | None = Field(None, ge=0, le=10, description="extra attempts after a failed tool, user or "
                                                               "verifier call")
    backoff: Literal["fixed", "exponential"] | None = Field(
        None, description="retry delay: fixed at backoff_s, or doubling from it with jitter")
    backoff_s: float = Field(0.5, ge=0, description="(first) retry delay of a role call, seconds")
    retries_task: int | None = Field(None, ge=0, le=10, description="extra attempts of a task-author call (none: "
                                                                    "retries)")
    timeout_s_task: float | None = Field(None, gt=0, description="per-attempt timeout of a task-author call (none: "
                                                                 "timeout_s)")
    backoff_s_task: float | None = Field(None, ge=0, description="retry delay of a task-author call (none: "
                                                                 "backoff_s)")
    sdk_retries: int | None = Field(None, ge=0, le=10, description="re-sends of one upstream request within an "
                                                                   "attempt, by the OpenAI SDK's rule (timeouts, "
                                                                   "connection errors, 408/409/429/5xx), for every "
                                                                   "role and the task author")
    max_tokens: int = Field(2048, ge=16, description="completion budget of a tool, user or verifier call")
    max_tokens_task: int = Field(8192, ge=16, description="completion budget of a task-author call")
    temperature: Annotated[float | None, Cli(kind=str)] = Field(
        None, ge=0, le=2, description="sampling temperature sent to the upstream; none: not sent, the server's "
                                      "default applies")
    frequency_penalty: Annotated[float | None, Cli(kind=str)] = Field(
        None, ge=-2, le=2, description="frequency penalty sent with every tool, user and verifier call, never the "
                                       "author's; none: not sent")
    enable_thinking: bool = Field(True, description="ask Qwen3 upstreams to think before answering")
    health_timeout_s: float = Field(2.0, gt=0, description="timeout of the probe /health sends each upstream "
                                                           "(llm backend); below the container health check's 5 s")
    health_cache_s: float = Field(5.0, ge=0, description="how long /health reuses the last upstream probe, in "
                                                         "seconds (0: probe on every request)")
    task_cache_size: int = Field(256, ge=1, description="answered tasks kept in memory; older ones are read back "
                                                        "from an on-disk index, so memory stays flat over a run")
    log_level: str = Field("info", description="logging level")

    @field_validator("token")
    @classmethod
    def _long_enough(cls, value: str | None) -> str | None:
        if value is not None and len(value.strip()) < MIN_TOKEN_CHARS:
            raise ValueError(f"a token of at least {MIN_TOKEN_CHARS} characters (make env writes one of 43: "
                             "python3 -c 'import secrets; print(secrets.token_urlsafe(32))')")
        return value

    @field_validator("upstreams", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        return [u.strip() for u in value.split(",") if u.strip()] if isinstance(value, str) else value

    @field_validator("temperature", "frequency_penalty", mode="before")
    @classmethod
    def _none_means_not_sent(cls, value: Any) -> Any:
        return None if isinstance(value, str) and value.strip().lower() in {"none", "null"} else value

    @model_validator(mode="after")
    def _mode_fits(self) -> SimulatorSettings:
        if self.replay_tasks_of is not None and self.replay_tasks_of == self.run:
            raise ValueError(f"replay_tasks_of names this run ({self.run}) itself: its tasks are kept already; "
                             "name another run whose tasks this one should train on")
        if self.mode == "trustee":
            if self.trustee_dir is None:
                raise ValueError("mode trustee reads TRUSTEE's prompts and library from a checkout: set trustee_dir "
                                 "(TOOLCANARY_SIMULATOR_TRUSTEE_DIR, or TRUSTEE_DIR in .env for the stack)")
            if self.backend != "llm":
                raise ValueError("mode trustee plays TRUSTEE's prompts, so it needs backend llm; the scripted "
                                 "backend runs in mode toolcanary")
            if self.no_call_fraction > 0:
                # One knob for the share of abstention tasks, on the trainer, which records it in its curriculum
                # state: a second one here would let the two disagree.
                raise ValueError(f"mode trustee draws no abstention tasks of its own: expected no_call_fraction 0, "
                                 f"got {self.no_call_fraction}. To train on a share of abstention tasks, set the "
                                 "trainer's TOOLCANARY_TRAIN_NO_CALL_FRACTION instead (its curriculum asks for "
                                 "them, and this mode serves them), or use mode toolcanary")
        self.retries_task = self.retries if self.retries_task is None else self.retries_task
        self.timeout_s_task = self.timeout_s if self.timeout_s_task is None else self.timeout_s_task
        self.backoff_s_task = self.backoff_s if self.backoff_s_task is None else self.backoff_s_task
        if self.library is None and self.mode == "trustee":
            self.library = self.trustee_library()
        return self

    def trustee_library(self) -> Path:
        return TrusteeCheckout.open(self.trustee_dir, self.trustee_commit).library_path

    @property
    def records_dir(self) -> Path:
        return self.runs_dir / self.run / "simulator"


class ServeCheck(Options):
    check: Annotated[bool, Cli(off="")] = Field(False, description="check the settings (in mode trustee, the "
                                                "TRUSTEE checkout and its library) and exit without serving: exit 0 "
                                                "when they hold, 2 with the reason")


class ValidateOptions(Options):
    """What `validate` checks."""

    library: Path | None = Field(None, description="library JSON (default: the packaged one)")
    tasks: int = Field(300, ge=1, description="tasks to generate and check")
    seed: int = Field(0, description="scripted seed")


class BuildLibraryOptions(Options):
    """Where `build-library` writes, or what it compares."""

    out: Path | None = Field(None, description="where to write (default: the packaged file)")
    check: Annotated[bool, Cli(off="")] = Field(False, description="only compare with --out; exit 1 when it differs")
