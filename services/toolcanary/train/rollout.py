"""Run a step's episodes concurrently through the registered agent loop, as verl's worker would.

`EpisodeRunner` builds one `SimulatedEpisodeLoop` per sample, the class taken from verl's loop registry and
given the constructor arguments `AgentLoopWorker` passes, so the CPU run and the tests exercise the class
the GPU recipe registers. `step_specs` draws one task per GRPO group from
the curriculum and gives all n samples of the group the same task key.

One event loop serves the runner's whole life, as one serves a verl worker's: the HTTP session, its open
connections and the executor survive from step to step instead of being rebuilt per step. `episodes_in_flight`
bounds the episodes running at once as a sliding window: a finished episode's slot goes to the next one at
once, where batches run in lockstep would wait for each batch's slowest episode.

    with EpisodeRunner(tokenizer, llm_client, simulator_url=url, prompt_length=3072, response_length=512) as runner:
        specs = step_specs(curriculum, step=1, groups=4, n=4, rng=rng, key_prefix="demo-5f0c9a2e7b1d4c3a")
        outputs = runner.run_step(specs)
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import hydra
from omegaconf import OmegaConf
from tqdm import tqdm
from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, DictConfigWrap, _agent_loop_registry
from verl.utils.dataset.rl_dataset import RLHFDataset

from toolcanary.contract.tasks import DifficultySettings
from toolcanary.train.agent_loop import AGENT_NAME, SimulatedEpisodeLoop, close_shared_clients
from toolcanary.train.curriculum import Curriculum
from toolcanary.train.episode import EpisodeSpec


def step_specs(curriculum: Curriculum, *, step: int, groups: int, n: int, rng: random.Random,
               key_prefix: str, max_tools: int | None = None, task_pool: int = 0,
               seed: int = 0, pool_seed: int | None = None, draw_prefix: str = "") -> list[EpisodeSpec]:
    """groups x n episode specs; the n members of a group share task key, draw and difficulty.

    `key_prefix` begins every task key and episode id: the run's `task_key_prefix` (toolcanary.train.task_keys).
    The draw names the task by the seed and its place (`<draw_prefix><seed>-sSSSS-gGG`, a pool task by its
    index), so what a task is does not depend on the run's private key.

    `max_tools` caps the tools per task (the CPU run's cost control; the GPU recipe leaves it unset).
    `task_pool` > 0 cycles through that many fixed call tasks (`pool_task`, from `pool_seed`) instead of drawing
    new ones; a group the curriculum's abstention share picks is a fresh abstention task instead. The pool is
    the same whatever that share, so runs that differ only in it start from the same warm-started policy.
    """
    at = curriculum.derived()
    pool_seed = seed if pool_seed is None else pool_seed
    specs = []
    for group in range(groups):
        abstain = task_pool and curriculum.no_call_fraction > 0 and rng.random() < curriculum.no_call_fraction
        if task_pool and not abstain:
            index = ((step - 1) * groups + group) % task_pool
            key, draw, difficulty = pool_task(index, key_prefix=key_prefix, seed=pool_seed, curriculum=curriculum,
                                              max_tools=max_tools)
            draw = draw_prefix + draw
        elif abstain:
            key, difficulty = f"{key_prefix}-s{step:04d}-g{group:02d}", abstention(capped(curriculum.draw(rng), max_tools))
            draw = f"{draw_prefix}{seed}-s{step:04d}-g{group:02d}"
        else:
            key, difficulty = f"{key_prefix}-s{step:04d}-g{group:02d}", capped(curriculum.draw(rng), max_tools)
            draw = f"{draw_prefix}{seed}-s{step:04d}-g{group:02d}"
        for member in range(n):
            specs.append(EpisodeSpec(
                task_key=key, draw=draw, difficulty=difficulty, step=step,
                episode_id=f"{key_prefix}-s{step:04d}-g{group:02d}-r{member:02d}", group_index=group,
                curriculum_level=at.level, system_prompt_level=at.system_prompt, num_criteria=at.num_criteria,
                max_user_turns=at.max_user_turns, max_assistant_turns=at.max_assistant_turns,
                max_tool_turns=at.max_tool_turns,
            ))
    return specs


def capped(difficulty: DifficultySettings, max_tools: int | None) -> DifficultySettings:
    if max_tools is not None and difficulty.num_tools > max_tools:
        return difficulty.model_copy(update={"num_tools": max_tools})
    return difficulty


def abstention(difficulty: DifficultySettings) -> DifficultySettings:
    return difficulty.model_copy(update={"call_expected": False, "expected_calls": 0})


def pool_task(index: int, *, key_prefix: str, seed: int, curriculum: Curriculum,
              max_tools: int | None) -> tuple[str, str, DifficultySettings]:
    """The key, draw and settings of fixed call task `index`: drawn once, at level 1, from a seed of its own."""
    first = Curriculum(level=1, epsilon=curriculum.epsilon)
    draw = f"pool-{seed}-{index:03d}"
    return f"{key_prefix}-{draw}", draw, capped(first.draw(random.Random(f"pool-{seed}-{index}")), max_tools)


class EpisodeRunner:
    """Builds one agent-loop instance per episode and runs a step's episodes at once, on one lasting event loop.

    Close it (or use it as a context manager) to close the simulator connections and the event loop.
    """

    def __init__(self, tokenizer, llm_client, *, simulator_url: str, prompt_length: int, response_length: int,
                 enable_thinking: bool = False, loop_options: dict[str, Any] | None = None) -> None:
        self.tokenizer, self.llm_client = tokenizer, llm_client
        self.config = OmegaConf.create({
            "actor_rollout_ref": {"rollout": {"prompt_length": prompt_length, "response_length": response_length}},
            "data": {"apply_chat_template_kwargs": {"enable_thinking": enable_thinking}},
        })
        # Resolved once through verl's registry; instantiating through hydra per episode, as verl's worker
        # does, cost 44% of a 128-episode rollout against a fast simulator.
        self.loop_class = hydra.utils.get_class(_agent_loop_registry[AGENT_NAME]["_target_"])
        self.loop_options = {"simulator_url": simulator_url, **(loop_options or {})}
        self._events = asyncio.Runner()

    def __enter__(self) -> EpisodeRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the simulator connections opened on the runner's event loop, then the loop itself."""
        self._events.run(close_shared_clients())
        self._events.close()

    def run_step(self, specs: list[EpisodeSpec], sampling_params: dict[str, Any] | None = None,
                 progress: bool = False, episodes_in_flight: int | None = None) -> list[AgentLoopOutput]:
        """`run` on the runner's own event loop, from synchronous code (the CPU trainer, benchmarks, tests)."""
        return self._events.run(self.run(specs, sampling_params, progress, episodes_in_flight))

    def make_loop(self) -> SimulatedEpisodeLoop:
        return self.loop_class(
            trainer_config=DictConfigWrap(config=self.config), server_manager=self.llm_client,
            tokenizer=self.tokenizer, processor=None, hf_model_type="qwen3", dataset_cls=RLHFDataset,
            data_config=DictConfigWrap(self.config.data), **self.loop_options,
        )

    async def run(self, specs: list[EpisodeSpec], sampling_params: dict[str, Any] | None = None,
                  progress: bool = False, episodes_in_flight: int | None = None) -> list[AgentLoopOutput]:
        """Every episode of `specs`, in order; at most `episodes_in_flight` at once (all of them when None)."""
        params = sampling_params or {"temperature": 1.0, "top_p": 1.0}
        bar = tqdm(total=len(specs), desc="episodes", unit="ep", disable=not progress, leave=False)
        window = asyncio.Semaphore(episodes_in_flight or max(1, len(specs)))

        async def one(spec: EpisodeSpec) -> AgentLoopOutput:
            async with window:
                # A client that batches (TransformersGenerationClient) waits for every live episode to ask.
                getattr(self.llm_client, "episode_started", lambda: None)()
                try:
                    output = await self.make_loop().run(params, extra_info=spec.model_dump(mode="json"))
                finally:
                    getattr(self.llm_client, "episode_finished", lambda: None)()
            bar.update(1)
            return output

        try:
            return list(await asyncio.gather(*(one(spec) for spec in specs)))
        finally:
            bar.close()
