"""A CPU stand-in for verl's vLLM server manager: token ids in, sampled token ids out, with transformers.

It exposes the one method verl's agent loops call, `async generate(request_id, *, prompt_ids,
sampling_params) -> TokenOutput`. Requests that arrive together (the episodes of a step run concurrently)
are batched into one left-padded `model.generate` call in a worker thread, so the event loop keeps
serving simulator calls while the model runs.

    client = TransformersGenerationClient(model, tokenizer)
    out = await client.generate("ep-1", prompt_ids=ids, sampling_params={"temperature": 1.0, "max_tokens": 32})
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import torch
from verl.workers.rollout.replica import TokenOutput


@dataclass
class _Pending:
    prompt_ids: list[int]
    params: dict
    future: asyncio.Future = field(repr=False)


class TransformersGenerationClient:
    """Batched sampling from a causal LM on CPU; `max_batch` bounds one forward batch."""

    def __init__(self, model, tokenizer, max_batch: int = 32, gather_s: float = 0.005) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.max_batch, self.gather_s = max_batch, gather_s
        self.stop_ids = [i for i in tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"]) if i >= 0]
        self.pad_id = tokenizer.pad_token_id
        self._queue: list[_Pending] = []
        self._worker: asyncio.Task | None = None
        self.batches = 0
        self.generated_tokens = 0

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **_) -> TokenOutput:
        future = asyncio.get_running_loop().create_future()
        self._queue.append(_Pending(list(prompt_ids), dict(sampling_params), future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._queue:
            await asyncio.sleep(self.gather_s)  # let the other episodes of this turn join the batch
            key = _params_key(self._queue[0].params)
            batch = [p for p in self._queue if _params_key(p.params) == key][: self.max_batch]
            chosen = {id(p) for p in batch}
            self._queue = [p for p in self._queue if id(p) not in chosen]
            try:
                outputs = await asyncio.to_thread(self._generate_batch, batch)
            except Exception as err:  # a model failure must reach every waiting episode, not hang them
                for pending in batch:
                    pending.future.set_exception(err)
                continue
            for pending, output in zip(batch, outputs, strict=True):
                pending.future.set_result(output)

    @torch.no_grad()
    def _generate_batch(self, batch: list[_Pending]) -> list[TokenOutput]:
        params = batch[0].params
        width = max(len(p.prompt_ids) for p in batch)
        ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros_like(ids)
        for row, pending in enumerate(batch):
            ids[row, width - len(pending.prompt_ids):] = torch.tensor(pending.prompt_ids)
            attention[row, width - len(pending.prompt_ids):] = 1
        max_new = max(int(p.params.get("max_tokens", 64)) for p in batch)
        temperature = float(params.get("temperature", 1.0))
        sample = temperature > 0
        was_training = self.model.training
        self.model.eval()
        out = self.model.generate(
            input_ids=ids, attention_mask=attention, max_new_tokens=max_new, do_sample=sample,
            temperature=temperature if sample else None, top_p=float(params.get("top_p", 1.0)) if sample else None,
            top_k=0 if sample else None, eos_token_id=self.stop_ids, pad_token_id=self.pad_id,
            return_dict_in_generate=True, output_logits=True,
        )
        self.model.train(was_training)
        self.batches += 1
        new = out.sequences[:, width:]
        logprobs = torch.stack(out.logits, dim=1).float().log_softmax(-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        results = []
        for row, pending in enumerate(batch):
            limit = int(pending.params.get("max_tokens", 64))
            tokens = new[row, :limit].tolist()
            cut = next((i + 1 for i, t in enumerate(tokens) if t in self.stop_ids), len(tokens))
            self.generated_tokens += cut
            results.append(TokenOutput(token_ids=tokens[:cut], log_probs=logprobs[row, :cut].tolist(),
                                       stop_reason="completed"))
        return results


def _params_key(params: dict) -> tuple:
    return (params.get("temperature", 1.0), params.get("top_p", 1.0))
