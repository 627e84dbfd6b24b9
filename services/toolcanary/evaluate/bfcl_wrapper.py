"""bfcl-eval's own CLI with the served model registered at run time (BFCL's "Path A").

bfcl-eval has no registry entry for an arbitrary OpenAI-compatible server. This module adds one to
`MODEL_CONFIG_MAPPING` before handing over to `bfcl`: chat completions with server-side tool parsing
(`OpenAICompletionsHandler`), function-calling mode, and `underscore_to_dot=True` so that dotted BFCL
function names, which the handler sends as `a_b`, are mapped back before checking. The same wrapper must run
both `generate` and `evaluate`; plain `bfcl evaluate` does not know the key.

The handler adds three things bfcl-eval lacks: every request carries the pass's output cap (`max_tokens`,
toolcanary.evaluate.sizing); every result line records how many of the item's responses the server cut at
that cap (`TRUNCATED_FIELD`, from finish_reason "length"), since bfcl-eval would score a cut answer like any
other and the client counts the item as truncated instead; and every result line records each response's
number of structured tool calls and raw `message.content` (`ANSWERS_FIELD`). The server returns a text answer
with `tool_calls: []`, which bfcl-eval stores as `[]`, losing the text; the client reads the record to tell
call markup the server did not parse from a real abstention (toolcanary.evaluate.answers).

Its settings (`WrapperSettings`: the served model and the pass's request timeout, retries, output cap and registry
key) are read from the same `TOOLCANARY_EVALUATE_<NAME>` variables as the client's, with the client's defaults.
The client runs it as a fresh subprocess per phase with BFCL_PROJECT_ROOT set to the pass folder:

    TOOLCANARY_EVALUATE_SERVED_MODEL=run1-step0200 BFCL_PROJECT_ROOT=volumes/results/run1/passes/step_0200_pass_1/bfcl OPENAI_BASE_URL=http://127.0.0.1:8000/v1 \\
      OPENAI_API_KEY=EMPTY python -m toolcanary.evaluate.bfcl_wrapper generate --model toolcanary-served-FC --run-ids
"""

from __future__ import annotations

import sys
import threading

from pydantic import Field, field_validator

from toolcanary.contract.errors import ContractError
from toolcanary.evaluate.settings import ENV_PREFIX, EvalSettings
from toolcanary.settings import ServiceSettings

HANDLER_NAME = "OpenAICompletionsHandler"
# bfcl-eval writes every key of an inference's metadata into the item's result line.
TRUNCATED_FIELD = "toolcanary_truncated_responses"
# One {"calls": structured tool calls, "content": message.content} per response of the item, in order.
ANSWERS_FIELD = "toolcanary_answers"


class WrapperSettings(ServiceSettings, env_prefix=ENV_PREFIX):
    """What one BFCL phase needs from the client; every field but `served_model` is the client's own."""

    served_model: str = Field(min_length=1, description="the server's --served-model-name")
    registry_key: str = EvalSettings.model_fields["registry_key"]
    request_timeout_s: float = EvalSettings.model_fields["request_timeout_s"]
    request_retries: int = EvalSettings.model_fields["request_retries"]
    max_tokens: int = EvalSettings.model_fields["max_tokens"]

    @field_validator("registry_key")
    @classmethod
    def _bfcl_key(cls, key: str) -> str:
        if "_" in key or "FC" not in key:
            raise ValueError("a key without '_' that contains 'FC' (BFCL's key rules)")
        return key


def register(registry_key: str, served_model: str, timeout_s: float, retries: int, max_tokens: int) -> None:
    """Add the served model to BFCL's registry, with an explicit request timeout, retry count and output cap."""
    from bfcl_eval.constants.model_config import MODEL_CONFIG_MAPPING, ModelConfig
    from bfcl_eval.model_handler.api_inference.openai_completion import OpenAICompletionsHandler

    class ServedChatHandler(OpenAICompletionsHandler):
        """OpenAICompletionsHandler with a bounded client, a capped output, a count of capped responses and a
        record of every response's calls and content."""

        # bfcl-eval runs one item per thread from start to end, so a thread's count and record are that item's.
        _cut = threading.local()

        def _build_client_kwargs(self):
            kwargs = super()._build_client_kwargs()
            kwargs.update(timeout=timeout_s, max_retries=retries)
            return kwargs

        def generate_with_backoff(self, **kwargs):
            if max_tokens:
                kwargs.setdefault("max_tokens", max_tokens)
            return super().generate_with_backoff(**kwargs)

        def _parse_query_response_FC(self, api_response):
            if api_response.choices:
                choice = api_response.choices[0]
                if choice.finish_reason == "length":
                    self._cut.count = getattr(self._cut, "count", 0) + 1
                answers = getattr(self._cut, "answers", None)
                if answers is not None:
                    answers.append({"calls": len(choice.message.tool_calls or []), "content": choice.message.content})
            return super()._parse_query_response_FC(api_response)

        def inference(self, test_entry, include_input_log, exclude_state_log):
            self._cut.count, self._cut.answers = 0, []
            result, metadata = super().inference(test_entry, include_input_log, exclude_state_log)
            metadata[TRUNCATED_FIELD] = self._cut.count
            metadata[ANSWERS_FIELD] = self._cut.answers
            return result, metadata

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
    try:
        settings = WrapperSettings.from_env()
    except ContractError as err:
        raise SystemExit(f"bfcl_wrapper: {err}") from err
    register(settings.registry_key, settings.served_model, settings.request_timeout_s, settings.request_retries,
             settings.max_tokens)
    from bfcl_eval.__main__ import cli

    cli(args=argv, prog_name="bfcl")


if __name__ == "__main__":
    main(sys.argv[1:])
