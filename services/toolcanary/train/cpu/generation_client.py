"""A CPU stand-in for verl's vLLM server manager: token ids in, sampled token ids out, with transformers.

It exposes the one method verl's agent loops call, `async generate(request_id, *, prompt_ids,
sampling_params) -> TokenOutput`. Requests that arrive together (the episodes of a step run concurrently)
are batched into one left-padded `model.generate` call in a worker thread, so the event loop keeps
serving simulator calls while the model runs.

When a batch starts: a runner that calls `episode_started()` and `episode_finished()` around each episode
tells the client how many episodes are live, and a batch starts once every live episode has asked (or
`max_batch` have). A live episode that has not asked is talking to the simulator, or tokenizing its
reply, and asks next; starting without it would leave it a batch of its own later, which costs about
as much as the whole batch, since a decode step's cost barely grows with the rows at these sizes. So the
client waits for it, but at most `max_wait_s` from the first request, so that a slow simulator call
does not hold back every other episode. Without those calls (a caller with no runner) a batch starts
`gather_s` after its first request.

Each request samples from a random generator of its own, seeded by (seed, request id after the run's private
prefix, prompt length), so its tokens depend on its prompt and the weights, not on which requests shared its
batch or in what order they came: how the simulator's latency groups the episodes into batches cannot change a
run. This is what lets a run that survived a fault be compared with one that did not, step by step, and two
runs of one seed be the same run (docs/train.md, "Reproducibility").

    client = TransformersGenerationClient(model, tokenizer, seed=0)
    out = await client.generate("ep-1", prompt_ids=ids, sampling_params={"temperature": 1.0, "max_tokens": 32})
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field

import torch
from transformers import LogitsProcessor, LogitsProcessorList
from verl.workers.rollout.replica import TokenOutput


@dataclass
class _Pending:
    request_id: str
    prompt_ids: list[int]
    params: dict
    future: asyncio.Future = field(repr=False)


def request_generator(seed: int, request_id: str, prompt_length: int) -> torch.Generator:
    """The random generator of one request: the same request id and prompt always draw the same numbers."""
    digest = hashlib.sha256(f"{seed}\x00{request_id}\x00{prompt_length}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "big") & (2**63 - 1))


class PerRequestSampler(LogitsProcessor):
    """Samples every row's next token with that row's own generator (temperature, then top-p), and hands
    `generate` (run greedy) scores that leave it only that token to pick."""

    def __init__(self, generators: list[torch.Generator], temperature: float, top_p: float) -> None:
        self.generators, self.temperature, self.top_p = generators, temperature, top_p

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        probs = torch.softmax(scores.float() / self.temperature, dim=-1)
        if self.top_p < 1.0:
            ordered, order = probs.sort(dim=-1, descending=True)
            outside = ordered.cumsum(dim=-1) - ordered > self.top_p  # the smallest set reaching top_p stays
            ordered = ordered.masked_fill(outside, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, order, ordered)
        chosen = torch.stack([torch.multinomial(row, 1, generator=gen) for row, gen in zip(probs, self.generators,
                                                                                         strict=True)])
        picked = torch.full_like(scores, float("-inf"))
        return picked.scatter(-1, chosen, 0.0)


class TransformersGenerationClient:
    """Batched sampling from a causal LM on CPU; `max_batch` bounds one forward batch.

    The runner calls `episode_started()` and `episode_finished()` around each episode (on the event loop
    the requests come from) so that a batch can wait for every live episode; see the module docstring.
    """

    def __init__(self, model, tokenizer, max_batch: int = 32, gather_s: float = 0.005, max_wait_s: float = 0.25,
                 seed: int = 0, private_prefix: str = "") -> None:
        self.model, self.tokenizer, self.seed = model, tokenizer, seed
        # Request ids are episode ids, which begin with the run's private task-key prefix; sampling is seeded
        # from what follows it, so two runs of one seed sample alike (the prefix differs from run to run).
        self.private_prefix = private_prefix
        self.max_batch, self.gather_s, self.max_wait_s = max_batch, gather_s, max_wait_s
        self.stop_ids = [i for i in tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"]) if i >= 0]
        self.pad_id = tokenizer.pad_token_id
        self._queue: list[_Pending] = []
        self._worker: asyncio.Task | None = None
        self._live = 0
        self._changed: asyncio.Event | None = None
        self.batches = 0
        self.generated_tokens = 0

    def episode_started(self) -> None:
        """One more episode will ask for generations until `episode_finished`."""
        self._live += 1

    def episode_finished(self) -> None:
        """An episode asks no more: a batch that waited for it may start."""
        self._live = max(0, self._live - 1)
        self._wake()

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **_) -> TokenOutput:
        future = asyncio.get_running_loop().create_future()
        self._queue.append(_Pending(str(request_id), list(prompt_ids), dict(sampling_params), future))
        self._wake()
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        return await future

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()

    async def _gathered(self) -> None:
        """Return when the next batch should start: every live episode has asked, or the wait is over."""
        if self._live == 0:  # nobody says how many will ask: a short window for this turn's requests
            await asyncio.sleep(self.gather_s)
            return
        self._changed = asyncio.Event()  # made here, on the loop that waits on it
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.max_wait_s
        while len(self._queue) < min(self._live, self.max_batch):
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), deadline - loop.time())
            except TimeoutError:
                return

    async def _drain(self) -> None:
        while self._queue:
            await self._gathered()
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
        processors = LogitsProcessorList()
        if temperature > 0:  # else plain greedy decoding
            generators = [request_generator(self.seed, p.request_id.removeprefix(self.private_prefix),
                                            len(p.prompt_ids)) for p in batch]
            processors.append(PerRequestSampler(generators, temperature, float(params.get("top_p", 1.0))))
        was_training = self.model.training
        self.model.eval()
        out = self.model.generate(
            input_ids=ids, attention_mask=attention, max_new_tokens=max_new, do_sample=False,
            temperature=None, top_p=None, top_k=None, logits_processor=processors,
            eos_token_id=self.stop_ids, pad_token_id=self.pad_id, return_dict_in_generate=True, output_logits=True,
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
