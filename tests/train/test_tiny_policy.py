"""The tiny Qwen3 policy: byte-identical rebuilds, what vLLM reads from config.json, Qwen3's added tokens
in Qwen3's order, and the chat template's Qwen3 semantics.

Run: .venvs/train/bin/python -m pytest tests/train/test_tiny_policy.py -q
"""

from __future__ import annotations

import json

from toolcanary.train.cpu.tiny_policy import build_tiny_policy
from toolcanary.train.cpu.tiny_tokenizer import NON_SPECIAL_TOKENS, SPECIAL_TOKENS

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


def test_rebuild_is_byte_identical(tiny_dir, tmp_path):
    again = build_tiny_policy(tmp_path / "again")
    names = sorted(p.name for p in tiny_dir.iterdir())
    assert names == sorted(p.name for p in again.iterdir())
    assert {"model.safetensors", "tokenizer.json", "config.json", "chat_template.jinja"} <= set(names)
    for name in names:
        assert (tiny_dir / name).read_bytes() == (again / name).read_bytes(), name


def test_config_is_what_vllm_and_transformers_expect(tiny_dir, tokenizer):
    config = json.loads((tiny_dir / "config.json").read_text())
    assert config["model_type"] == "qwen3" and config["architectures"] == ["Qwen3ForCausalLM"]
    assert config["rope_theta"] == 1e6 and config["vocab_size"] % 64 == 0 and config["vocab_size"] >= len(tokenizer)
    assert config["eos_token_id"] == tokenizer.convert_tokens_to_ids("<|im_end|>")
    generation = json.loads((tiny_dir / "generation_config.json").read_text())
    assert generation["eos_token_id"] == tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    assert json.loads((tiny_dir / "tokenizer_config.json").read_text())["tokenizer_class"] == "Qwen2Tokenizer"


def test_added_tokens_are_single_ids_in_qwen3_order(tokenizer):
    ids = [tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS + NON_SPECIAL_TOKENS]
    assert ids == list(range(ids[0], ids[0] + 26))
    for token in SPECIAL_TOKENS + NON_SPECIAL_TOKENS:
        assert len(tokenizer.encode(token, add_special_tokens=False)) == 1
    text = '<tool_call>\n{"name": "x", "arguments": {}}\n</tool_call> ünïcödé 中文 🙂'
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text
    assert "<tool_call>" in tokenizer.decode(tokenizer.encode("<tool_call>"), skip_special_tokens=True)


def _render(tokenizer, messages, **kwargs):
    return tokenizer.apply_chat_template(messages, tokenize=False, **kwargs)


def test_template_renders_tools_calls_and_grouped_tool_responses(tokenizer):
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
            {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}]},
        {"role": "tool", "content": "sunny"}, {"role": "tool", "content": "rain"},
    ]
    text = _render(tokenizer, messages, tools=TOOLS, add_generation_prompt=True, enable_thinking=False)
    assert text.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n")
    assert "<tools>\n" + json.dumps(TOOLS[0]) + "\n</tools>" in text
    assert ('<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call><|im_end|>\n') in text
    assert ("<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\nrain\n</tool_response>"
            "<|im_end|>\n") in text
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert _render(tokenizer, messages[:2], add_generation_prompt=True).endswith("<|im_start|>assistant\n")


def test_template_drops_reasoning_before_the_last_user_query(tokenizer):
    messages = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "<think>\nold thoughts\n</think>\n\nanswer one"},
        {"role": "user", "content": "second"},
        {"role": "assistant", "content": "answer two", "reasoning_content": "new thoughts"},
    ]
    text = _render(tokenizer, messages)
    assert "old thoughts" not in text and "<|im_start|>assistant\nanswer one<|im_end|>" in text
    assert "<|im_start|>assistant\n<think>\nnew thoughts\n</think>\n\nanswer two<|im_end|>" in text
    assert text.startswith("<|im_start|>user\nfirst<|im_end|>")


def test_the_tokenizer_reads_the_simulators_packaged_library_as_data():
    from importlib import resources

    from toolcanary.train.cpu.tiny_tokenizer import DEFAULT_LIBRARY_RESOURCE, library_corpus

    packaged = resources.files("toolcanary").joinpath(*DEFAULT_LIBRARY_RESOURCE)
    assert packaged.is_file()  # the simulator's DEFAULT_LIBRARY_PATH, found without importing the simulator
    corpus = library_corpus()
    assert corpus and all(json.loads(line)["type"] == "function" for line in corpus)
