"""A small byte-level BPE tokenizer with Qwen3's pre-tokenizer and added tokens, built offline.

The tiny CPU policy needs a vocabulary small enough that a GRPO step costs well under a second per
sequence, yet every Qwen3 control token (`<|im_start|>`, `<tool_call>`, `<think>`, ...) as one id, in
Qwen3's order, so that vLLM's hermes parser and verl's Qwen Continuous Token builder treat it as Qwen3.
The corpus is generated from a fixed seed, plus the tool schemas of the scripted simulator's default
library when it is installed (tool descriptions dominate prompt length, so learning their words keeps a
CPU step cheap); the same inputs give byte-identical files.

    from toolcanary.train.cpu.tiny_tokenizer import build_tokenizer
    tokenizer = build_tokenizer(chat_template_text)
"""

from __future__ import annotations

import json
import random
from importlib import resources

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

QWEN_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPECIAL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
    "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
)
NON_SPECIAL_TOKENS = (
    "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>",
)
VOCAB_SIZE = 4096
# toolcanary.simulator.library_index.DEFAULT_LIBRARY_PATH, relative to the toolcanary package.
DEFAULT_LIBRARY_RESOURCE = ("simulator", "data", "default_library.json")

_WORDS = (
    "the a an to of and in for on with from by at is are was be can please help me my i you your we "
    "what which when where how many much find get search list show check send book create update delete "
    "weather city temperature forecast today tomorrow flight hotel price stock company news email message "
    "user order status product account balance payment address name number date time id query result "
    "error invalid missing required argument tool function call parameter value type string integer "
    "boolean object array description properties ok done thanks sure here is the information you asked "
    "I could not find that sorry let me look it up this does not need a tool I can answer directly "
    "paris london tokyo rome berlin madrid new york amsterdam data report total count limit page "
    "currency convert amount rate translate text language movie music song artist recipe food location"
).split()
_NAMES = ("get_weather", "search_flights", "book_hotel", "get_stock_price", "send_email", "convert_currency",
          "list_orders", "get_user", "translate_text", "find_recipe", "search_news", "create_event")
_TYPES = ("string", "integer", "number", "boolean")


def _schema(rng: random.Random) -> dict:
    params = {w: {"type": rng.choice(_TYPES), "description": " ".join(rng.sample(_WORDS, 4))}
              for w in rng.sample(_WORDS, rng.randint(1, 3))}
    return {"type": "function", "function": {
        "name": rng.choice(_NAMES), "description": " ".join(rng.sample(_WORDS, 8)),
        "parameters": {"type": "object", "properties": params, "required": sorted(params)[:1]}}}


def synthetic_corpus(seed: int = 0, lines: int = 3000) -> list[str]:
    """English-ish sentences, tool schemas, tool calls and chat framing, reproducible from `seed`."""
    rng = random.Random(seed)
    corpus = []
    for _ in range(lines):
        kind = rng.random()
        if kind < 0.35:
            corpus.append(" ".join(rng.choice(_WORDS) for _ in range(rng.randint(5, 16))).capitalize() + ".")
        elif kind < 0.6:
            corpus.append(json.dumps(_schema(rng)))
        elif kind < 0.85:
            args = {rng.choice(_WORDS): rng.choice([rng.choice(_WORDS), rng.randint(0, 999)])}
            corpus.append(f'<tool_call>\n{{"name": "{rng.choice(_NAMES)}", "arguments": {json.dumps(args)}}}\n'
                          "</tool_call>")
        else:
            corpus.append(f"<|im_start|>{rng.choice(['user', 'assistant', 'system'])}\n"
                          f"{' '.join(rng.sample(_WORDS, 6))}<|im_end|>\n")
    return corpus


def library_corpus() -> list[str]:
    """One line per tool schema of the simulator's default library, as the chat template renders tools."""
    # Read as a data file of the toolcanary distribution, not through the simulator's code, which the
    # trainer never imports (its image may lack the simulator's dependencies).
    packaged = resources.files("toolcanary").joinpath(*DEFAULT_LIBRARY_RESOURCE)
    if not packaged.is_file():  # an image without the simulator: the synthetic corpus alone still covers every byte
        return []
    library = json.loads(packaged.read_text())
    return [json.dumps({"type": "function", "function": tool["function"]}, ensure_ascii=False)
            for toolsets in library.values() for tools in toolsets.values() for tool in tools]


def build_tokenizer(chat_template: str, seed: int = 0, vocab_size: int = VOCAB_SIZE) -> PreTrainedTokenizerFast:
    """Train the BPE on the synthetic corpus and wrap it as a Qwen-style fast tokenizer."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT_REGEX), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, show_progress=False, special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(synthetic_corpus(seed) + library_corpus(), trainer=trainer)
    base = tok.get_vocab_size()
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in NON_SPECIAL_TOKENS])
    for offset, token in enumerate(SPECIAL_TOKENS + NON_SPECIAL_TOKENS):
        if tok.token_to_id(token) != base + offset:
            raise RuntimeError(f"added token {token} landed on {tok.token_to_id(token)}, not {base + offset}")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None,
        unk_token=None, model_max_length=40960, padding_side="left", clean_up_tokenization_spaces=False,
    )
    fast.chat_template = chat_template
    return fast
