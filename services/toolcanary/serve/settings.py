"""The settings of `python -m toolcanary.serve`: the server's, read from `TOOLCANARY_SERVE_<NAME>` and the flags
of the same name, and which checkpoint to serve, from the command line.

The checkpoints root also takes the name every service reads, `TOOLCANARY_CHECKPOINTS_DIR`. Precedence: flag >
environment > the default below (toolcanary.settings).

    settings = ServeSettings.from_env(port=8012)
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from toolcanary.contract.run_id import RunId
from toolcanary.settings import Cli, Options, ServiceSettings, env, volume

ENV_PREFIX = "TOOLCANARY_SERVE_"


class ServeSettings(ServiceSettings, env_prefix=ENV_PREFIX):
    """How the checkpoint is served; descriptions are the CLI help."""

    checkpoints_dir: Path = Field(volume("checkpoints"), validation_alias=env(ENV_PREFIX + "CHECKPOINTS_DIR",
                                                                              "TOOLCANARY_CHECKPOINTS_DIR"),
                                  description="root of the checkpoint folders (--run/--step are looked up there)")
    host: str = Field("127.0.0.1", description="interface vLLM listens on (0.0.0.0 inside a container)")
    port: int = Field(8000, ge=1, le=65535, description="TCP port vLLM listens on")
    max_model_len: int | None = Field(None, ge=1, description="context window of the server (default: the "
                                                              "model's)")
    max_new_tokens: int | None = Field(None, ge=1, description="server-wide cap on each answer's length (default: "
                                                               "none, as BFCL's chat path sends no max_tokens); for "
                                                               "small CPU policies that may never emit their end "
                                                               "token")
    reloadable: bool = Field(False, description="let a client load another checkpoint of the same run into the "
                                                "running server (toolcanary.serve.reload; turns on vLLM's development "
                                                "endpoints, so serve on a private network or the loopback only)")
    enable_thinking: bool | None = Field(None, description="the chat template's default thinking mode (default: the "
                                                           "mode the manifest says the policy trained in; BFCL sends "
                                                           "no template kwargs, so this decides how every item is "
                                                           "rendered)")


class ServeChoice(Options):
    """Which checkpoint, under which name, and what else vLLM is told."""

    run: RunId | None = Field(None, description="run id (with --step)")
    step: int | None = Field(None, ge=0, description="training step of the checkpoint (with --run)")
    checkpoint: Path | None = Field(None, description="a checkpoint folder, instead of --run/--step")
    served_model_name: str | None = Field(None, description="the name clients ask for (default: <run>-stepNNNN "
                                                            "from the manifest)")
    dry_run: bool = Field(False, description="print the command instead of running it")
    vllm_args: Annotated[list[str], Cli(positional=True, nargs="*", metavar="VLLM_ARG")] = Field(
        [], description="extra vLLM flags, after --")

    def folder(self, settings: ServeSettings) -> Path | None:
        """The checkpoint folder: --checkpoint, else <checkpoints>/<run>/step_NNNN, else None (neither given)."""
        if self.checkpoint is not None:
            return self.checkpoint
        if self.run is None or self.step is None:
            return None
        return settings.checkpoints_dir / self.run / f"step_{self.step:04d}"
