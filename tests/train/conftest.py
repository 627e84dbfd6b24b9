"""Shared fixtures of the trainer tests: the tiny policy, a live scripted simulator, fake LLM clients.

The scripted simulator is the real service started as a child process (stopped at session end); the
programmable stub in `sim_stub.py` covers failures the real one cannot produce. Fake LLM clients replay
fixed assistant texts, or the gold turns of the task being played, token in and token out.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import httpx
import pytest
from verl.workers.rollout.replica import TokenOutput

sys.path.insert(0, str(Path(__file__).parent))

from toolcanary.contract.chat import AssistantMessage  # noqa: E402
from toolcanary.contract.hermes import render_assistant_turn  # noqa: E402
from toolcanary.contract.simulator_api import TaskRequest, TaskResponse  # noqa: E402
from toolcanary.contract.tasks import DifficultySettings  # noqa: E402
from toolcanary.train.cpu.embedded_simulator import EmbeddedSimulator  # noqa: E402
from toolcanary.train.cpu.tiny_policy import build_tiny_policy, load_policy  # noqa: E402
from toolcanary.train.curriculum import Curriculum  # noqa: E402
from toolcanary.train.episode import EpisodeSpec  # noqa: E402
from toolcanary.train.rollout import EpisodeRunner  # noqa: E402
from toolcanary.train.simulator_client import TOKEN_ENV  # noqa: E402


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    return build_tiny_policy(tmp_path_factory.mktemp("tiny") / "policy")


@pytest.fixture(scope="session")
def tokenizer(tiny_dir):
    return load_policy(tiny_dir)[1]


@pytest.fixture(scope="session")
def scripted_url(tmp_path_factory) -> str:
    with EmbeddedSimulator(run="tests", runs_dir=tmp_path_factory.mktemp("runs")) as url:
        yield url


class ReplayClient:
    """Answers every generate call with the next of a fixed list of assistant texts (then repeats the last)."""

    def __init__(self, tokenizer, texts: list[str], end: bool = True) -> None:
        self.tokenizer, self.texts, self.end = tokenizer, list(texts), end
        self.prompts: list[list[int]] = []
        self.emitted: list[list[int]] = []
        self.caps: list[int | None] = []

    def encode_turn(self, text: str) -> list[int]:
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return ids + ([self.tokenizer.convert_tokens_to_ids("<|im_end|>")] if self.end else [])

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        self.prompts.append(list(prompt_ids))
        self.caps.append(sampling_params.get("max_tokens"))
        text = self.texts[min(len(self.emitted), len(self.texts) - 1)]
        ids = self.encode_turn(text)[: sampling_params.get("max_tokens", 10_000)]
        self.emitted.append(ids)
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids))


class GoldClient(ReplayClient):
    """Plays the gold conversation of the task behind each request id's episode, turn by turn."""

    def __init__(self, tokenizer, gold_by_episode: dict[str, list]) -> None:
        super().__init__(tokenizer, [""])
        self.gold, self.turn = gold_by_episode, {}

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        turns = [m for m in self.gold[request_id] if isinstance(m, AssistantMessage)]
        index = self.turn.get(request_id, 0)
        self.turn[request_id] = index + 1
        message = turns[min(index, len(turns) - 1)]
        self.texts = [render_assistant_turn(message.content or "", message.tool_calls)]
        return await super().generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params)


def make_spec(key: str, *, call_expected: bool = True, num_tools: int = 1, member: int = 0, **limits) -> EpisodeSpec:
    difficulty = DifficultySettings(num_tools=num_tools, expected_calls=1 if call_expected else 0, user_persona=0,
                                    query_ambiguity=0, expected_turns=0, call_expected=call_expected)
    values = {"max_user_turns": 1, "max_assistant_turns": 2, "max_tool_turns": 1, **limits}
    return EpisodeSpec(task_key=key, difficulty=difficulty, step=1, episode_id=f"{key}-r{member}", **values)


def run_episodes(tokenizer, client, url: str, specs: list[EpisodeSpec], response_length: int = 1024, **options):
    with EpisodeRunner(tokenizer, client, simulator_url=url, prompt_length=4096, response_length=response_length,
                       loop_options={"http_retries": 1, **options}) as runner:
        return runner.run_step(specs)


def fetch_task(url: str, spec: EpisodeSpec):
    """The task the simulator at `url` authors for `spec`, asked with the token the embedded simulator set."""
    body = TaskRequest(task_key=spec.task_key, difficulty=spec.difficulty).model_dump(mode="json")
    headers = {"Authorization": f"Bearer {os.environ[TOKEN_ENV]}"} if os.environ.get(TOKEN_ENV) else {}
    return TaskResponse.model_validate(httpx.post(f"{url}/v1/task", json=body, headers=headers, timeout=30).json()).task


def spans(tokenizer, output) -> list[tuple[int, str]]:
    """(mask bit, decoded text) runs of the response."""
    runs: list[tuple[int, list[int]]] = []
    for token, bit in zip(output.response_ids, output.response_mask, strict=True):
        if not runs or runs[-1][0] != bit:
            runs.append((bit, []))
        runs[-1][1].append(token)
    return [(bit, tokenizer.decode(ids)) for bit, ids in runs]


@pytest.fixture
def rng() -> random.Random:
    return random.Random(0)


@pytest.fixture
def curriculum() -> Curriculum:
    return Curriculum()


# The GPU recipe, composed by verl's own main_ppo as train.sh would run it (test_recipe.py,
# test_trustee_deviations.py). Module-scoped: the variables set here must not outlive the module using them.
RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "trustee-qwen3-4b"


def recipe_args(*overrides: str) -> list[str]:
    return ["--config-path", str(RECIPE), "--config-name", "trustee_qwen3_4b",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={RECIPE / 'agent_loops.yaml'}", *overrides]


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.fixture(scope="module")
def volumes(tmp_path_factory, monkeypatch_module, session_trustee_checkout) -> Path:
    """Volume roots with the seed rows written, and the environment train.sh would export (mode trustee, with a
    TRUSTEE-shaped checkout)."""
    from toolcanary.train.gpu.seed_data import write_seed_data

    root = tmp_path_factory.mktemp("volumes")
    env = {"TOOLCANARY_RUNS_DIR": root / "runs", "TOOLCANARY_RESULTS_DIR": root / "results",
           "TOOLCANARY_CHECKPOINTS_DIR": root / "checkpoints", "TOOLCANARY_TRAIN_RUN": "r1",
           "TOOLCANARY_TRAIN_MODE": "trustee", "TOOLCANARY_TRAIN_TRUSTEE_DIR": session_trustee_checkout}
    for key, value in env.items():
        monkeypatch_module.setenv(key, str(value))
    write_seed_data(root / "runs" / "r1" / "data", 32, key_prefix="r1-0123456789abcdef")
    return root


@pytest.fixture(scope="module")
def report(volumes):
    """The recipe as verl's main_ppo composes it, with every check passed, in this process."""
    import os

    from toolcanary.train.gpu.recipe_check import check_recipe

    ray_env = [f"++ray_kwargs.ray_init.runtime_env.env_vars.{k}='{os.environ[k]}'"
               for k in ("TOOLCANARY_TRAIN_RUN", "TOOLCANARY_RUNS_DIR", "TOOLCANARY_RESULTS_DIR",
                         "TOOLCANARY_CHECKPOINTS_DIR")]
    ray_env.append(f"++ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR='{volumes / 'results' / 'tb'}'")
    return check_recipe(recipe_args(*ray_env))
