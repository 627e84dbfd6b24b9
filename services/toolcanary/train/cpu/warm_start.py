"""Supervised warm start on gold conversations, so a random tiny policy learns to emit Hermes tool calls.

Each gold conversation (task tools + messages) is tokenised exactly as a rollout would build it: the
prompt through the chat template, assistant turns as the policy would generate them (loss on these),
tool and user replies through verl's Continuous Token builder (no loss). A few hundred AdamW steps on
CPU then make greedy output a well-formed call, which gives GRPO a reward signal to move.

    examples = encode_conversations(tokenizer, conversations)
    losses = warm_start(model, tokenizer, examples, steps=120, lr=3e-3)
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable

import torch
from tqdm import tqdm
from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

from toolcanary.contract.chat import AssistantMessage
from toolcanary.contract.hermes import render_assistant_turn
from toolcanary.contract.tasks import SimulatedTask

logger = logging.getLogger(__name__)


def encode_conversations(tokenizer, conversations: list[tuple[SimulatedTask, str, list]],
                         enable_thinking: bool = False) -> list[tuple[list[int], list[int]]]:
    """(token ids, loss mask) per conversation of (task, system prompt, messages after the system one)."""
    builder = create_continuous_token_builder(tokenizer, hf_model_type="qwen3",
                                              chat_template_kwargs={"enable_thinking": enable_thinking})
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    examples = []
    for task, system, messages in conversations:
        tools = [t.model_dump(mode="json") for t in task.tools]
        history = [{"role": "system", "content": system}]
        pending: list[dict] = []
        runtime: list[int] | None = None
        mask: list[int] = []
        last_assistant = max((i for i, m in enumerate(messages) if isinstance(m, AssistantMessage)), default=-1)
        for message in messages[: last_assistant + 1]:
            if not isinstance(message, AssistantMessage):
                pending.append(message.model_dump(mode="json", exclude_none=True))
                continue
            if runtime is None:
                history += pending
                runtime = builder.build_initial_tokens(history, tools=tools)
                mask = [0] * len(runtime)
            elif pending:
                updated = history + pending
                merged = builder.merge_context_tokens(history, updated, runtime, tools=tools)
                mask, _ = builder.align_response_metadata(merged, mask)
                runtime, history = merged.token_ids, updated
            pending = []
            text = render_assistant_turn(message.content or "", message.tool_calls, message.reasoning_content)
            turn = tokenizer.encode(text, add_special_tokens=False) + [im_end]
            merged = builder.merge_assistant_tokens(runtime, turn)
            mask, _ = builder.align_response_metadata(merged, mask)
            runtime = merged.token_ids
            history.append({"role": "assistant", "content": message.content or "",
                            "tool_calls": [c.model_dump(mode="json") for c in message.tool_calls]})
        if runtime is not None and any(mask):
            examples.append((runtime, mask))
    return examples


def _trained_logits(model, tokens: list[int], first: int) -> torch.Tensor:
    """Logits of the positions that predict tokens[first:], with the prompt before them read without gradient.

    One sequence per forward: without padding, attention needs no mask and stays cheap on CPU. The prompt
    (system, tools and request: about 60 % of a gold conversation) is run once under no_grad into a key/value
    cache, and only the rest is run with gradient: the loss then moves how the policy answers a prompt, not how
    it reads one, and a step costs about half as much, since backward never enters the prompt (LOG.md). The
    logits are the same numbers the whole sequence would give.
    """
    prefix = None
    if first > 1:
        with torch.no_grad():
            prefix = model(input_ids=torch.tensor([tokens[: first - 1]]), use_cache=True,
                           logits_to_keep=1).past_key_values
    rest = torch.tensor([tokens[first - 1 if prefix is not None else 0:]])
    logits = model(input_ids=rest, past_key_values=prefix, use_cache=prefix is not None).logits[0, :-1]
    return logits[-(len(tokens) - first):].float()


def warm_start(model, tokenizer, examples: list[tuple[list[int], list[int]]], *, steps: int, lr: float,
               batch_size: int = 4, seed: int = 0, progress: bool = True,
               on_step: Callable[[int, float], None] | None = None) -> list[float]:
    """AdamW on the masked next-token loss; returns the loss of every step (also given to `on_step`)."""
    if not examples:
        raise ValueError("warm start needs at least one gold conversation with an assistant turn")
    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    losses = []
    model.train()
    for _ in tqdm(range(steps), desc="warm start", unit="step", disable=not progress):
        batch = [examples[rng.randrange(len(examples))] for _ in range(min(batch_size, len(examples)))]
        total = sum(sum(mask) for _, mask in batch)
        optimizer.zero_grad(set_to_none=True)
        step_loss = 0.0
        for tokens, mask in batch:
            logits = _trained_logits(model, tokens, first := mask.index(1))
            target = torch.tensor(tokens[first:])
            weight = torch.tensor(mask[first:], dtype=torch.float32)
            token_loss = torch.nn.functional.cross_entropy(logits, target, reduction="none")
            loss = (token_loss * weight).sum() / total
            loss.backward()
            step_loss += float(loss.detach())
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(step_loss)
        if on_step is not None:
            on_step(len(losses), step_loss)
    logger.info("warm start: %d steps, loss %.4f -> %.4f", steps, losses[0], losses[-1])
    return losses
