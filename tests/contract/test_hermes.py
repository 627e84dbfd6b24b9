"""The Hermes / Qwen3 wire format, both ways: render calls, parse generated text, report malformed calls.

Run: .venvs/dev/bin/python -m pytest tests/contract/test_hermes.py -q
"""

import json

from hypothesis import given
from hypothesis import strategies as st

from toolcanary.contract import ToolCall, parse_assistant_text, render_assistant_turn, render_tool_calls


def call(name, **arguments):
    return ToolCall(function={"name": name, "arguments": arguments})


def test_one_call_renders_exactly_as_qwen3_template_writes_it():
    text = render_tool_calls([call("weather.get_forecast", city="Paris", days=3)])
    assert text == (
        '<tool_call>\n{"name": "weather.get_forecast", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>'
    )


def test_several_calls_in_one_turn_round_trip_in_order():
    calls = [call("a.get", x=1), call("b.put", y=[1, 2], z={"k": "v"}), call("a.get", x=2)]
    parsed = parse_assistant_text(render_tool_calls(calls))
    assert [(c.function.name, c.function.arguments) for c in parsed.tool_calls] == [
        ("a.get", {"x": 1}),
        ("b.put", {"y": [1, 2], "z": {"k": "v"}}),
        ("a.get", {"x": 2}),
    ]
    assert parsed.malformed == [] and parsed.content == ""


def test_think_block_before_calls_is_split_off_as_reasoning():
    text = "<think>\nThe user wants the forecast.\n</think>\n\n" + render_tool_calls([call("f", a=1)])
    parsed = parse_assistant_text(text)
    assert parsed.reasoning == "The user wants the forecast."
    assert [c.function.name for c in parsed.tool_calls] == ["f"]


def test_stray_whitespace_inside_and_between_blocks_is_tolerated():
    text = '  <tool_call>   \n\n {"name": "f", "arguments": {"a": 1}}  \n</tool_call>\n\n\n<tool_call>{"name":"g","arguments":{}}</tool_call>  '
    parsed = parse_assistant_text(text)
    assert [c.function.name for c in parsed.tool_calls] == ["f", "g"]
    assert parsed.content == ""


def test_malformed_json_is_reported_with_its_raw_text_and_never_raised():
    text = '<tool_call>\n{"name": "f", "arguments": {"a": 1}\n</tool_call>\n<tool_call>\n{"name": "g", "arguments": {}}\n</tool_call>'
    parsed = parse_assistant_text(text)
    assert [c.function.name for c in parsed.tool_calls] == ["g"]
    assert len(parsed.malformed) == 1
    assert parsed.malformed[0].raw == '{"name": "f", "arguments": {"a": 1}'
    assert "invalid JSON" in parsed.malformed[0].error
    assert parsed.attempted_call


def test_calls_without_name_or_arguments_or_not_objects_are_malformed():
    texts = {
        '<tool_call>{"arguments": {}}</tool_call>': "name",
        '<tool_call>{"name": "f"}</tool_call>': "arguments",
        "<tool_call>[1, 2]</tool_call>": "JSON object",
        '<tool_call>{"name": "f", "arguments": [1]}</tool_call>': "arguments",
    }
    for text, reason in texts.items():
        parsed = parse_assistant_text(text)
        assert parsed.tool_calls == [] and len(parsed.malformed) == 1, text
        assert reason in parsed.malformed[0].error, (text, parsed.malformed[0].error)


def test_arguments_given_as_a_json_string_are_decoded():
    parsed = parse_assistant_text('<tool_call>{"name": "f", "arguments": "{\\"a\\": 2}"}</tool_call>')
    assert parsed.tool_calls[0].function.arguments == {"a": 2}


def test_truncated_generation_leaves_an_unterminated_block_as_malformed():
    parsed = parse_assistant_text('Let me check.\n<tool_call>\n{"name": "f", "argu')
    assert parsed.tool_calls == []
    assert parsed.malformed[0].error.startswith("unterminated")
    assert parsed.content == "Let me check."


def test_unterminated_think_is_all_reasoning():
    parsed = parse_assistant_text("<think>\nstill thinking about <tool_call>")
    assert parsed.think_unterminated and parsed.content == "" and parsed.tool_calls == []


def test_plain_answer_has_no_calls_and_keeps_its_text():
    parsed = parse_assistant_text("<think>\n\n</think>\n\nI cannot help with that: no tool fits.")
    assert parsed.reasoning == "" and parsed.content == "I cannot help with that: no tool fits."
    assert not parsed.attempted_call


def test_content_before_calls_is_kept_and_openai_form_has_string_arguments():
    turn = render_assistant_turn("Checking now.", [call("f", a=1)], reasoning="why")
    parsed = parse_assistant_text(turn)
    assert parsed.content == "Checking now." and parsed.reasoning == "why"
    wire = parsed.tool_calls[0].to_openai()
    assert json.loads(wire["function"]["arguments"]) == {"a": 1} and wire["type"] == "function"


# The format cannot carry its own closing tag inside a string value (JSON does not escape '<'), as in
# Qwen3 and vLLM's hermes parser; keep the markup out of generated strings.
MARKUP = ("<tool_call>", "</tool_call>")
plain_text = st.text(max_size=20).filter(lambda s: not any(tag in s for tag in MARKUP))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | plain_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(plain_text, inner, max_size=3),
    max_leaves=8,
)


@given(
    st.lists(
        st.tuples(
            st.from_regex(r"[a-z][a-z_]{0,10}(\.[a-z_]{1,10})?", fullmatch=True),
            st.dictionaries(plain_text.filter(bool), json_values, max_size=4),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_any_rendered_calls_parse_back_to_themselves(pairs):
    calls = [ToolCall(function={"name": n, "arguments": a}) for n, a in pairs]
    parsed = parse_assistant_text(render_tool_calls(calls))
    assert [(c.function.name, c.function.arguments) for c in parsed.tool_calls] == pairs
    assert parsed.malformed == []


def test_a_think_tag_inside_arguments_is_data():
    parsed = parse_assistant_text(render_tool_calls([call("f", note="</think> is a tag")]))
    assert parsed.reasoning is None and parsed.tool_calls[0].function.arguments == {
        "note": "</think> is a tag"
    }
