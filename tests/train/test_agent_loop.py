"""The episode loop driven by fake LLM clients against the live scripted simulator.

Covers: trained and masked spans (decoded), prefix preservation, the verifier's reward, the no-call
penalty, abstention tasks, turn caps, the token budget, parallel calls and malformed calls.
Run: .venvs/train/bin/python -m pytest tests/train/test_agent_loop.py -q
"""

from __future__ import annotations

from conftest import GoldClient, ReplayClient, fetch_task, make_spec, run_episodes, spans

from toolcanary.contract.hermes import render_tool_call
from toolcanary.contract.training_files import EpisodeRecord
from toolcanary.simulator.scripted import gold_trajectory
from toolcanary.train.episode import SYSTEM_PROMPTS


def _gold_episode(tokenizer, url, key, **limits):
    spec = make_spec(key, **limits)
    task = fetch_task(url, spec)
    client = GoldClient(tokenizer, {spec.episode_id: gold_trajectory(task)})
    return task, client, run_episodes(tokenizer, client, url, [spec])[0]


def test_gold_policy_earns_the_verifier_reward_with_masks_on_policy_tokens_only(tokenizer, scripted_url):
    task, client, out = _gold_episode(tokenizer, scripted_url, "mask-1")
    episode = out.extra_fields["episode"]
    assert episode.outcome == "ok" and episode.verifier_reward == 1 and out.reward_score == 1.0
    assert episode.tool_call_turns == 1 and episode.stop_reason == "assistant_turns"
    runs = spans(tokenizer, out)
    trained = [text for bit, text in runs if bit == 1]
    masked = [text for bit, text in runs if bit == 0]
    assert trained == [tokenizer.decode(ids) for ids in client.emitted]
    assert all(text.endswith("<|im_end|>") for text in trained)
    assert masked[0].startswith("\n<|im_start|>user\n<tool_response>\n")
    assert masked[0].endswith("</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert "<tool_call>" not in "".join(masked) and "<tool_response>" not in "".join(trained)


def test_sequence_is_prefix_preserving_and_starts_from_the_rendered_task(tokenizer, scripted_url):
    task, client, out = _gold_episode(tokenizer, scripted_url, "prefix-1")
    full = list(out.prompt_ids) + list(out.response_ids)
    for prompt in client.prompts:
        assert full[: len(prompt)] == prompt
    rendered = tokenizer.apply_chat_template(
        [{"role": "system", "content": SYSTEM_PROMPTS[0]}, {"role": "user", "content": task.first_user_query}],
        tools=[t.model_dump(mode="json") for t in task.tools], add_generation_prompt=True, enable_thinking=False,
        return_dict=True)["input_ids"]
    assert list(out.prompt_ids) == list(rendered)
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs)


def test_no_call_on_a_call_task_is_forced_to_minus_one(tokenizer, scripted_url):
    spec = make_spec("nocall-1")
    client = ReplayClient(tokenizer, ["I think you should do it yourself."])
    out = run_episodes(tokenizer, client, scripted_url, [spec])[0]
    episode = out.extra_fields["episode"]
    assert out.reward_score == -1.0 and episode.no_call_penalty is True
    assert episode.tool_call_turns == 0 and episode.user_turns == 1


def test_abstention_task_keeps_the_verifier_reward(tokenizer, scripted_url):
    spec = make_spec("abstain-1", call_expected=False)
    decline = ReplayClient(tokenizer, ["I can't do that with these tools, so I won't call any."])
    out = run_episodes(tokenizer, decline, scripted_url, [spec])[0]
    episode = out.extra_fields["episode"]
    assert episode.call_expected is False and episode.no_call_penalty is False
    assert out.reward_score == episode.verifier_reward == 1
    task = fetch_task(scripted_url, spec)
    call = render_tool_call(task.tools[0].name, {})
    caller = ReplayClient(tokenizer, [call, "Done."])
    out = run_episodes(tokenizer, caller, scripted_url, [make_spec("abstain-1", call_expected=False, member=1)])[0]
    assert out.reward_score == -1.0 and out.extra_fields["episode"].no_call_penalty is False


def test_turn_caps_stop_the_episode(tokenizer, scripted_url):
    task = fetch_task(scripted_url, make_spec("caps-1"))
    call = render_tool_call(task.tools[0].name, {"x": 1})
    out = run_episodes(tokenizer, ReplayClient(tokenizer, [call, call, call]), scripted_url,
                       [make_spec("caps-1", max_assistant_turns=5, max_tool_turns=1)])[0]
    assert out.extra_fields["episode"].stop_reason == "tool_turns"
    assert out.extra_fields["episode"].assistant_turns == 2
    talk = ReplayClient(tokenizer, ["Which one?", "Tell me more.", "And then?"])
    out = run_episodes(tokenizer, talk, scripted_url,
                       [make_spec("caps-2", max_assistant_turns=5, max_user_turns=1)])[0]
    assert out.extra_fields["episode"].stop_reason == "user_turns"
    out = run_episodes(tokenizer, ReplayClient(tokenizer, ["a", "b", "c"]), scripted_url,
                       [make_spec("caps-3", max_assistant_turns=1)])[0]
    assert out.extra_fields["episode"].stop_reason == "assistant_turns"
    assert out.extra_fields["episode"].assistant_turns == 1


def test_token_budget_stops_and_truncates(tokenizer, scripted_url):
    long_text = "word " * 200
    out = run_episodes(tokenizer, ReplayClient(tokenizer, [long_text]), scripted_url, [make_spec("budget-1")],
                       response_length=64)[0]
    assert out.extra_fields["episode"].stop_reason == "response_length"
    assert len(out.response_ids) <= 64 and sum(out.response_mask) == len(out.response_ids)


def test_malformed_and_unknown_calls_are_answered_locally_with_minus_one(tokenizer, scripted_url):
    turn = '<tool_call>\n{"name": "broken", "arguments": {oops}\n</tool_call>\n' + render_tool_call("no_such_tool", {})
    out = run_episodes(tokenizer, ReplayClient(tokenizer, [turn, "Sorry."]), scripted_url,
                       [make_spec("malformed-1")])[0]
    episode = out.extra_fields["episode"]
    assert episode.calls == 2 and episode.invalid_calls == 2 and episode.tool_rewards == [-1.0]
    tool_messages = [m for m in episode.transcript if m["role"] == "tool"]
    contents = sorted(m["content"] for m in tool_messages)
    assert "malformed tool call" in contents[0] and "not found" in contents[1]
    assert all(m["is_error"] is True for m in tool_messages)  # the simulator reads the flag, not the text
    assert episode.tool_call_turns == 1 and episode.no_call_penalty is False


def test_parallel_calls_are_answered_in_one_turn_and_capped(tokenizer, scripted_url):
    task = fetch_task(scripted_url, make_spec("parallel-1", num_tools=2))
    calls = "\n".join(render_tool_call(t.name, {}) for t in (task.tools * 3)[:4])
    out = run_episodes(tokenizer, ReplayClient(tokenizer, [calls, "Done."]), scripted_url,
                       [make_spec("parallel-1", num_tools=2)], max_parallel_calls=3)[0]
    episode = out.extra_fields["episode"]
    assert episode.calls == 4 and episode.dropped_calls == 1
    tool_messages = [m for m in episode.transcript if m["role"] == "tool"]
    assert len(tool_messages) == 3 and episode.tool_turns == 1
    masked = [text for bit, text in spans(tokenizer, out) if bit == 0][0]
    assert masked.count("<tool_response>") == 3
    assert EpisodeRecord.model_validate_json(episode.model_dump_json()) == episode  # its JSON line reads back
