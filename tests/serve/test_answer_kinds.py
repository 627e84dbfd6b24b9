"""The evaluation's answer kinds over what vLLM's Hermes tool parser (the server's `--tool-call-parser hermes`)
really makes of hand-written model outputs: a call it decodes comes back as structured calls, one it cannot
decode comes back as text, which BFCL credits as an abstention in irrelevance and the evaluation counts as
"unparsed_call" (toolcanary.evaluate.answers).

The tokenizer is the tiny policy's Qwen3-style one (built offline, `<tool_call>` as one token); the parser runs
on CPU and nothing is served, so the test takes seconds (most of them importing vLLM).

Run: .venvs/serve/bin/python -m pytest tests/serve/test_answer_kinds.py -q
"""

import json

import pytest
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.tool_parsers.hermes_tool_parser import Hermes2ProToolParser

from toolcanary.evaluate.answers import answer_kind
from toolcanary.train.cpu.policy_files import chat_template_text
from toolcanary.train.cpu.tiny_tokenizer import build_tokenizer

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
OFFERED = ["get_weather"]
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'

OUTPUTS = {
    "well-formed call": (f"<tool_call>\n{CALL}\n</tool_call>", "calls"),
    "two well-formed calls": (f"<tool_call>\n{CALL}\n</tool_call>\n<tool_call>\n{CALL}\n</tool_call>", "calls"),
    "reasoning, then a call": (f"<think>\nThe user wants Paris.\n</think>\n\n<tool_call>\n{CALL}\n</tool_call>",
                               "calls"),
    # The parser reads a call up to the end of the text when the closing tag never came.
    "complete JSON, no closing tag": (f"<tool_call>\n{CALL}", "calls"),
    # It does not check the name against the tools offered: BFCL judges that call.
    "a call of a tool not offered": ('<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>', "calls"),
    "broken JSON in the tags": ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par\n</tool_call>',
                                "unparsed_call"),
    "misspelled closing tag": (f"<tool_call>\n{CALL}\n</tool_cal>", "unparsed_call"),
    "closed with >": (f"<tool_call>\n{CALL}>", "unparsed_call"),
    "one good call, one broken": (f"<tool_call>\n{CALL}\n</tool_call>\n<tool_call>\n{{\"name\": \"get_weather\"",
                                  "unparsed_call"),
    "a call in prose": ('Let me check.\nget_weather(city="Paris")', "unparsed_call"),
    "a JSON call without tags": (CALL, "unparsed_call"),
    "a fenced JSON call": (f"```json\n{CALL}\n```", "unparsed_call"),
    "plain text": ("I cannot help with that; the weather tool does not apply.", "text"),
    "reasoning alone": ("<think>\nNo tool fits.\n</think>\n\n", "empty"),
    "nothing": ("", "empty"),
}


@pytest.fixture(scope="module")
def parser():
    tokenizer = build_tokenizer(chat_template_text())
    assert len(tokenizer.encode("<tool_call>", add_special_tokens=False)) == 1
    return Hermes2ProToolParser(tokenizer)


@pytest.mark.parametrize("name", list(OUTPUTS))
def test_the_kind_of_what_vllms_hermes_parser_returns(parser, name):
    output, expected = OUTPUTS[name]
    request = ChatCompletionRequest(model="policy", messages=[{"role": "user", "content": "-"}], tools=TOOLS)
    parsed = parser.extract_tool_calls(output, request)
    # What the server sends: the parsed calls, or none and the whole output as content.
    calls = len(parsed.tool_calls) if parsed.tools_called else 0
    assert calls == 0 or all(json.loads(c.function.arguments) is not None for c in parsed.tool_calls)
    assert answer_kind(parsed.content, calls, OFFERED) == expected, (output, parsed)
    if expected == "unparsed_call":
        assert not parsed.tools_called and parsed.content == output
