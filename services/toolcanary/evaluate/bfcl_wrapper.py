"""bfcl-eval's own CLI with the served model registered at run time (BFCL's "Path A").

bfcl-eval has no registry entry for an arbitrary OpenAI-compatible server. This module adds one to
`MODEL_CONFIG_MAPPING` before handing over to `bfcl`: chat completions with server-side tool parsing
(`OpenAICompletionsHandler`), function-calling mode, and `underscore_to_dot=True` so that dotted BFCL
function names, which the handler sends as `a_b`, are mapped back before checking. The same wrapper must run
both `generate` and `evaluate`; plain `bfcl evaluate` does not know the key.

The client runs it as a fresh subprocess per phase with BFCL_PROJECT_ROOT set to the pass folder:

    TOOLCANARY_EVALUATE_SERVED_MODEL=run1-step0200 BFCL_PROJECT_ROOT=volumes/results/run1/passes/step_0200_pass_1/bfcl OPENAI_BASE_URL=http://127.0.0.1:8000/v1 \\
      OPENAI_API_KEY=EMPTY python -m toolcanary.evaluate.bfcl_wrapper generate --model toolcanary-served-FC --run-ids
"""

from __future__ import annotations

import os
import sys

HANDLER_NAME = "OpenAICompletionsHandler"


def register(registry_key: str, served_model: str, timeout_s: float, retries: int) -> None:
    """Add the served model to BFCL's registry, with an explicit request timeout and retry count."""
    from bfcl_eval.constants.model_config import MODEL_CONFIG_MAPPING, ModelConfig
    from bfcl_eval.model_handler.api_inference.openai_completion import OpenAICompletionsHandler

    class ServedChatHandler(OpenAICompletionsHandler):
        """OpenAICompletionsHandler whose client gives up after a bounded time instead of the SDK default."""

        def _build_client_kwargs(self):
            kwargs = super()._build_client_kwargs()
            kwargs.update(timeout=timeout_s, max_retries=retries)
            return kwargs

    ServedChatHandler.__name__ = HANDLER_NAME
    MODEL_CONFIG_MAPPING[registry_key] = ModelConfig(
        model_name=served_model,
        display_name=f"{served_model} (FC)",
        url="",
        org="ToolCanary",
        license="",
        model_handler=ServedChatHandler,
        input_price=None,
        output_price=None,
        is_fc_model=True,
        underscore_to_dot=True,
    )


def main(argv: list[str]) -> None:
    key = os.environ.get("TOOLCANARY_EVALUATE_REGISTRY_KEY", "toolcanary-served-FC")
    if "_" in key or "FC" not in key:
        raise SystemExit(f"registry key {key!r}: expected no '_' and the substring 'FC' (BFCL's key rules)")
    served = os.environ.get("TOOLCANARY_EVALUATE_SERVED_MODEL")
    if not served:
        raise SystemExit("TOOLCANARY_EVALUATE_SERVED_MODEL is not set: expected the server's model name")
    register(
        key, served,
        float(os.environ.get("TOOLCANARY_EVALUATE_REQUEST_TIMEOUT_S", "600")),
        int(os.environ.get("TOOLCANARY_EVALUATE_REQUEST_RETRIES", "2")),
    )
    from bfcl_eval.__main__ import cli

    cli(args=argv, prog_name="bfcl")


if __name__ == "__main__":
    main(sys.argv[1:])
