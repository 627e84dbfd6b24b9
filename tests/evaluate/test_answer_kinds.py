"""The answer-kind rule over hand-written responses: every rule, its edges, the fold of an item's responses and
the reading of a result line.

    .venvs/eval/bin/python -m pytest tests/evaluate/test_answer_kinds.py -q
"""

from __future__ import annotations

import pytest

from toolcanary.contract.errors import ContractError
from toolcanary.evaluate.answers import answer_kind, entry_answer_kind, item_kind, visible_text
from toolcanary.evaluate.bfcl_data import function_names
from toolcanary.evaluate.bfcl_wrapper import ANSWERS_FIELD

OFFERED = ["get_weather", "math.sum"]


def kind(content: str | None, calls: int = 0, names: list[str] = OFFERED) -> str:
    return answer_kind(content, calls, names)


def test_structured_calls_are_calls_whatever_the_content():
    assert kind(None, calls=1) == "calls"
    assert kind('<tool_call>{"name": "get_weather", "arg', calls=2) == "calls"


@pytest.mark.parametrize("content", [
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par',           # broken JSON in the tags
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_cal>',  # wrong closing tag
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}>',        # closed with `>`
    "Sure.</tool_call>",                                                          # a closing tag alone
    "<TOOL_CALL>get weather</Tool_Call>",                                         # any letter case
])
def test_a_tool_call_tag_is_an_unparsed_call(content):
    assert kind(content) == "unparsed_call"


@pytest.mark.parametrize("content", [
    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    'I will call it: {"name": "get_weather", "parameters": {"city": "Paris"}} now.',
    '[{"name": "get_weather", "arguments": {}}, {"name": "math_sum", "arguments": {}}]',
    '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
    '```\n[{"get_weather": {"city": "Paris"}}]\n```',                             # BFCL's own shape, fenced
    '{"math.sum": {"numbers": [1, 2]}}',                                          # BFCL's shape, dotted name
    '{"math_sum": {"numbers": [1, 2]}}',                                          # as the handler sends it
    '{"name": "not_offered_at_all", "arguments": {}}',                            # a name never offered
    'Here {is not json} but {"name": "get_weather", "arguments": {}} is.',        # after a brace that fails
])
def test_a_json_call_object_is_an_unparsed_call(content):
    assert kind(content) == "unparsed_call"


@pytest.mark.parametrize("content", [
    '{"city": "Paris"}',                                # arguments alone: no name
    '{"name": "Paris", "country": "France"}',           # a "name" without arguments
    '{"name": 3, "arguments": {}}',                     # a name that is not a string
    '{"get_time": {"zone": "UTC"}}',                    # BFCL's shape with a name not offered
    '{"get_weather": "Paris"}',                         # BFCL's shape needs an object of arguments
    '[1, 2, {"a": 1}]',
    "The set {1, 2, 3} has three elements.",
])
def test_json_that_is_not_a_call_is_text(content):
    assert kind(content) == "text"


@pytest.mark.parametrize("content", [
    'get_weather(city="Paris")',
    "I would run math.sum(numbers=[1, 2]) for that.",
    "math_sum(numbers=[1, 2])",                          # the dotted name as the handler sends it
    "```python\nget_weather(city='Paris')\n```",
])
def test_an_offered_name_followed_by_a_parenthesis_is_an_unparsed_call(content):
    assert kind(content) == "unparsed_call"


@pytest.mark.parametrize("content", [
    "I cannot get the weather; get_weather only covers cities.",   # the name without a parenthesis
    "get_weather (the tool offered) cannot answer this.",         # a space before the parenthesis
    "Use forget_weather(x) instead.",                             # no word boundary before the name
    'get_time(zone="UTC")',                                       # a name not offered
    "That needs a tool_call, which I will not make.",             # the word, not the tag
    "A call with a name and arguments would not help here.",
])
def test_prose_that_mentions_a_name_or_a_word_is_text(content):
    assert kind(content) == "text"


def test_the_dotted_name_is_matched_only_as_a_whole():
    assert kind("sum(1, 2)", names=["math.sum"]) == "text"
    assert kind("math.sum(1, 2)", names=["math.sum"]) == "unparsed_call"
    assert kind("math_sum(1, 2)", names=["math.sum"]) == "unparsed_call"
    assert kind("math.sum(1, 2)", names=[]) == "text"


@pytest.mark.parametrize(("content", "expected"), [
    ("<think>I could call get_weather(city='Paris').</think>The weather tool does not apply.", "text"),
    ('<think>maybe <tool_call>{"name": "get_weather"}</tool_call></think>', "empty"),
    ("<think>\nlet me think\n</think>\n\n", "empty"),
    ("<think>a trace the cap cut: get_weather(", "empty"),                       # unterminated: all reasoning
    ("No tool fits.<think>get_weather(city='Paris')", "text"),
    ("reasoning whose opener was in the prompt <tool_call></think>\nNo tool fits.", "text"),
    ("<think>ok</think><tool_call>\n{broken", "unparsed_call"),
    ("<think>a</think>get_weather(city='Paris')<think>b</think>", "unparsed_call"),
])
def test_reasoning_is_removed_before_the_rules(content, expected):
    assert kind(content) == expected


@pytest.mark.parametrize("content", [None, "", "   \n\t"])
def test_nothing_but_whitespace_is_empty(content):
    assert kind(content) == "empty"


def test_visible_text_keeps_what_is_outside_the_reasoning():
    assert visible_text("<think>a</think>b<think>c</think>d") == "bd"
    assert visible_text("a</think>b") == "b"
    assert visible_text("a<think>b") == "a"


def test_a_long_answer_full_of_braces_is_scanned_in_bounded_time():
    assert kind("{" * 50_000) == "text"
    assert kind("{ not json } " * 5_000 + '{"name": "get_weather", "arguments": {}}') == "text"  # past the bound


def test_an_item_takes_the_strongest_kind_of_its_responses():
    assert item_kind(["text", "calls", "unparsed_call", "empty"]) == "unparsed_call"
    assert item_kind(["text", "calls", "empty"]) == "calls"
    assert item_kind(["empty", "text"]) == "text"
    assert item_kind(["empty"]) == "empty"
    assert item_kind([]) == "empty"


def test_a_result_line_gives_its_items_kind_or_none_when_it_has_no_record():
    line = {"id": "irrelevance_1", "result": [], ANSWERS_FIELD: [{"calls": 0, "content": "math_sum(numbers=[1])"}]}
    assert entry_answer_kind(line, function_names("irrelevance")["irrelevance_1"]) == "unparsed_call"
    turns = [{"calls": 1, "content": None}, {"calls": 0, "content": "Done."}]
    assert entry_answer_kind({"id": "multi_turn_base_0", ANSWERS_FIELD: turns}, []) == "calls"
    assert entry_answer_kind({"id": "irrelevance_1", "result": []}, ["math.sum"]) is None
    with pytest.raises(ContractError, match='a list of {"calls": n'):
        entry_answer_kind({"id": "irrelevance_1", ANSWERS_FIELD: [{"calls": "0"}]}, [])


def test_the_offered_names_come_from_bfcls_data_for_every_kind_of_item():
    assert function_names("irrelevance")["irrelevance_1"] == ("math.sum",)
    multi_turn = function_names("multi_turn_base")["multi_turn_base_0"]
    assert {"post_tweet", "mv", "grep"} <= set(multi_turn)       # TwitterAPI and GorillaFileSystem
    assert "archival_memory_key_search" in function_names("memory_kv")["memory_kv_0-customer-0"]
