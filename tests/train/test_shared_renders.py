"""The agent loop's shared renders give the tokens verl's own builder gives.

A worker's episodes share rendered prompts and synthetic prefixes, and render replies without the tool
schemas where the chat template renders them the same without; each case is checked against a fresh verl
builder that renders everything, schemas included, every time.

Run: .venvs/train/bin/python -m pytest tests/train/test_shared_renders.py -q
"""

from __future__ import annotations

import copy

import pytest
from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

from toolcanary.train import agent_loop
from toolcanary.train.rollout import EpisodeRunner

TOOLS = [{"type": "function", "function": {"name": name, "description": f"The {name} of a city.", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    for name in ("get_weather", "get_time")]


def loop_for(tokenizer, enable_thinking: bool = False):
    """A loop built as the runner builds one per episode (no simulator is contacted before `run`)."""
    with EpisodeRunner(tokenizer, llm_client=None, simulator_url="http://127.0.0.1:9", prompt_length=4096,
                       response_length=1024, enable_thinking=enable_thinking) as runner:
        return runner.make_loop()


def fresh_builder(tokenizer):
    return create_continuous_token_builder(tokenizer, hf_model_type="qwen3",
                                           chat_template_kwargs={"enable_thinking": False})


def conversation(episode: int) -> list[list[dict]]:
    """Stages of one episode's messages: the prompt, then after each reply that gets merged."""
    call = {"id": f"c{episode}", "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": f"City{episode}"}}}
    prompt = [{"role": "system", "content": "You are a helpful assistant."},
              {"role": "user", "content": f"Weather in City{episode}?"}]
    after_call = prompt + [{"role": "assistant", "content": "", "tool_calls": [call, {**call, "id": "d"}]}]
    after_tools = after_call + [
        {"role": "tool", "name": "get_weather", "content": f"sunny, {episode} C"},
        {"role": "tool", "name": "get_weather", "content": f"station {episode * 7} reports rain"}]
    after_answer = after_tools + [{"role": "assistant", "content": f"It is sunny in City{episode}."}]
    return [prompt, after_call, after_tools, after_answer,
            after_answer + [{"role": "user", "content": f"And tomorrow, episode {episode}?"}]]


def tokens_both_ways(tokenizer, episode: int) -> tuple[list[int], list[int]]:
    """The episode's runtime tokens through the agent loop's path and through a fresh builder's."""
    loop, builder = loop_for(tokenizer), fresh_builder(tokenizer)
    prompt, after_call, after_tools, after_answer, after_user = conversation(episode)
    ours = loop.continuous_token_builder.build_initial_tokens(prompt, tools=TOOLS)
    theirs = builder.build_initial_tokens(prompt, tools=TOOLS)
    assert ours == theirs
    call_ids = tokenizer.encode(f"<tool_call>\n{episode}\n</tool_call><|im_end|>")
    ours, theirs = ours + call_ids, theirs + call_ids
    ours = loop._merge_replies(after_call, after_tools, ours, TOOLS).token_ids
    theirs = builder.merge_context_tokens(after_call, after_tools, theirs, tools=TOOLS).token_ids
    answer_ids = tokenizer.encode(f"It is sunny in City{episode}.<|im_end|>")
    ours, theirs = ours + answer_ids, theirs + answer_ids
    ours = loop._merge_replies(after_answer, after_user, ours, TOOLS).token_ids
    theirs = builder.merge_context_tokens(after_answer, after_user, theirs, tools=TOOLS).token_ids
    return ours, theirs


def test_replies_rendered_without_schemas_are_the_tokens_verl_renders_with_them(tokenizer):
    for episode in range(3):  # the first checks the template, the later ones use the verdict and the cache
        ours, theirs = tokens_both_ways(tokenizer, episode)
        assert ours == theirs
    assert set(agent_loop._SCHEMA_FREE[tokenizer].values()) == {True}, "the project's template needs no schemas"


def test_a_template_that_renders_the_schemas_into_replies_keeps_getting_them(tokenizer):
    counting = copy.deepcopy(tokenizer)
    counting.chat_template = counting.chat_template.replace(
        "'\\n<tool_response>\\n' + content", "'\\n<tool_response>\\n' + ((tools | length) | string) + content")
    assert counting.chat_template != tokenizer.chat_template
    for episode in range(3):
        ours, theirs = tokens_both_ways(counting, episode)
        assert ours == theirs
        assert f"<tool_response>\n2sunny, {episode} C" in counting.decode(ours)
    assert False in agent_loop._SCHEMA_FREE[counting].values()


@pytest.mark.parametrize("options", [{"enable_thinking": False}, {"enable_thinking": True}])
def test_a_prompt_served_from_the_cache_is_a_fresh_render(tokenizer, options):
    prompt = conversation(11)[0]
    first, second = (loop_for(tokenizer, options["enable_thinking"]).continuous_token_builder.build_initial_tokens(
        prompt, tools=TOOLS) for _ in range(2))
    fresh = create_continuous_token_builder(tokenizer, hf_model_type="qwen3", chat_template_kwargs=options)
    assert first == second == fresh.build_initial_tokens(prompt, tools=TOOLS)
    second.append(-1)  # a caller's edit must not reach the cached copy
    again = loop_for(tokenizer, options["enable_thinking"]).continuous_token_builder.build_initial_tokens(
        prompt, tools=TOOLS)
    assert again == first
