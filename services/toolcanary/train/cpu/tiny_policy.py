"""Build the tiny Qwen3-architecture policy the CPU run trains: no download, byte-identical rebuilds.

The folder holds what vLLM and transformers expect of a Qwen3 checkpoint: `config.json` (model_type
qwen3, Qwen3ForCausalLM, a top-level rope_theta for older readers), `generation_config.json`, bf16
`model.safetensors`, `tokenizer.json` / `tokenizer_config.json` (tokenizer_class Qwen2Tokenizer) and
`chat_template.jinja`. `build_base_policy` picks the builder of a named CPU policy (tiny or smollm2).

    python -m toolcanary.train build-policy --out volumes/models/tiny-qwen3
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig, Qwen3Config, Qwen3ForCausalLM

from toolcanary.train.cpu.policy_files import chat_template_text, patch_json
from toolcanary.train.cpu.tiny_tokenizer import build_tokenizer

logger = logging.getLogger(__name__)
TINY_BASE_MODEL = "toolcanary/tiny-qwen3"


# Qwen3's own window, so BFCL's long multi-turn items fit when the checkpoint is served (the small
# vocabulary makes prompts several times longer in tokens than with Qwen's).
MAX_POSITIONS = 40960


def tiny_config(tokenizer) -> Qwen3Config:
    vocab = -(-len(tokenizer) // 64) * 64
    pad, eos = tokenizer.convert_tokens_to_ids(["<|endoftext|>", "<|im_end|>"])
    config = Qwen3Config(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=32, max_position_embeddings=MAX_POSITIONS, rms_norm_eps=1e-6,
        tie_word_embeddings=True, rope_parameters={"rope_type": "default", "rope_theta": 1e6},
        bos_token_id=pad, pad_token_id=pad, eos_token_id=eos,
    )
    config.architectures = ["Qwen3ForCausalLM"]
    return config


def build_tiny_policy(out: str | Path, seed: int = 0) -> Path:
    """Write the tiny policy to `out` (created or overwritten) and return the folder."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(chat_template_text(), seed=seed)
    config = tiny_config(tokenizer)
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    eos, pad = config.eos_token_id, config.pad_token_id
    GenerationConfig(eos_token_id=[eos, pad], pad_token_id=pad, do_sample=True, temperature=0.6, top_p=0.95,
                     top_k=20).save_pretrained(out)
    patch_json(out / "config.json", rope_theta=1e6, torch_dtype="bfloat16")
    patch_json(out / "tokenizer_config.json", tokenizer_class="Qwen2Tokenizer")
    logger.info("tiny policy: %d tokens, %d parameters -> %s", len(tokenizer),
                sum(p.numel() for p in model.parameters()), out)
    return out


def build_base_policy(policy: str, out: Path, seed: int = 0) -> tuple[str, Path]:
    """(base model name, folder) of a named policy built into `out`, or of a folder given as is."""
    if policy == "tiny":
        return TINY_BASE_MODEL, build_tiny_policy(out, seed=seed)
    if policy == "smollm2":
        from toolcanary.train.cpu.smollm2_policy import SMOLLM2_BASE_MODEL, build_smollm2_policy

        return SMOLLM2_BASE_MODEL, build_smollm2_policy(out)
    return policy, Path(policy)


def load_policy(folder: str | Path, dtype: torch.dtype = torch.float32):
    """(model, tokenizer) from a policy folder, the model in `dtype` for CPU training."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
    return model, tokenizer
