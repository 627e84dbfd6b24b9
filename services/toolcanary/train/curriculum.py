"""TRUSTEE's difficulty curriculum: one level from 1 to 100, ten derived settings, a soft epsilon.

The level starts at 1 and moves by 3 after every step: up when the step's mean reward (aborted episodes
included, as TRUSTEE does) is >= 0.5, down when it is <= 0, else it holds. Each derived setting is
floor(multiplier x level), clamped; the verifier criteria are 1 + floor(0.04 x level), capped at 2 for an
8B simulator. With probability epsilon a draw takes tools, calls, persona, ambiguity and expected turns
uniformly from their full ranges instead (turn caps, criteria and system prompt stay level-bound).

    curriculum = Curriculum(); settings = curriculum.derived(); curriculum.update(mean_reward=0.6)
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from fractions import Fraction

from toolcanary.contract.tasks import DifficultySettings

LEVEL_MIN, LEVEL_MAX, LEVEL_STEP = 1, 100, 3
UPPER_THRESHOLD, LOWER_THRESHOLD = 0.5, 0.0
# Exact fractions: floor(0.03 * 100) must be 3, which binary floats do not promise.
MULTIPLIERS = {
    "num_tools": Fraction(10, 100), "expected_calls": Fraction(3, 100), "user_persona": Fraction(2, 100),
    "query_ambiguity": Fraction(2, 100), "expected_turns": Fraction(2, 100), "num_criteria": Fraction(4, 100),
    "system_prompt": Fraction(3, 100), "max_user_turns": Fraction(3, 100),
    "max_assistant_turns": Fraction(6, 100), "max_tool_turns": Fraction(3, 100),
}
MIN_TURNS = 1
CRITERIA_CAP_SMALL = 2


@dataclass(frozen=True)
class LevelSettings:
    """The ten derived aspects at one level (before the soft curriculum)."""

    level: int
    num_tools: int
    expected_calls: int
    user_persona: int
    query_ambiguity: int
    expected_turns: int
    num_criteria_raw: int
    num_criteria: int
    system_prompt: int
    max_user_turns: int
    max_assistant_turns: int
    max_tool_turns: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def derive(level: int, criteria_cap: int | None = CRITERIA_CAP_SMALL) -> LevelSettings:
    """The settings TRUSTEE's config.yaml multipliers give at `level`."""
    if not LEVEL_MIN <= level <= LEVEL_MAX:
        raise ValueError(f"curriculum level must be in [{LEVEL_MIN}, {LEVEL_MAX}], got {level}")

    def f(name: str) -> int:
        return int(MULTIPLIERS[name] * level)  # int() floors a non-negative Fraction

    raw_criteria = min(5, max(1, 1 + f("num_criteria")))
    return LevelSettings(
        level=level,
        num_tools=max(1, f("num_tools")),
        expected_calls=max(1, f("expected_calls")),
        user_persona=min(2, f("user_persona")),
        query_ambiguity=min(2, f("query_ambiguity")),
        expected_turns=min(2, f("expected_turns")),
        num_criteria_raw=raw_criteria,
        num_criteria=min(raw_criteria, criteria_cap) if criteria_cap else raw_criteria,
        system_prompt=min(3, f("system_prompt")),
        max_user_turns=max(MIN_TURNS, f("max_user_turns")),
        max_assistant_turns=max(2 * MIN_TURNS, f("max_assistant_turns")),
        max_tool_turns=max(MIN_TURNS, f("max_tool_turns")),
    )


def reachable_levels() -> list[int]:
    return list(range(LEVEL_MIN, LEVEL_MAX + 1, LEVEL_STEP))


@dataclass
class Curriculum:
    """The level and the draw of task settings; `state_dict` goes into every trainer checkpoint."""

    level: int = LEVEL_MIN
    epsilon: float = 0.5
    no_call_fraction: float = 0.0
    criteria_cap: int | None = CRITERIA_CAP_SMALL
    step: int = 0
    # trustee: the number of tools gets a soft-curriculum coin of its own, since TRUSTEE computes a task's
    # parameters twice (once to sample its tools, once for the author's prompt); toolcanary: one coin for all.
    mode: str = "toolcanary"

    def derived(self) -> LevelSettings:
        return derive(self.level, self.criteria_cap)

    def draw(self, rng: random.Random) -> DifficultySettings:
        """The task author's settings for one GRPO group."""
        at = self.derived()
        top = derive(LEVEL_MAX, self.criteria_cap)
        soft = rng.random() < self.epsilon
        soft_tools = rng.random() < self.epsilon if self.mode == "trustee" else soft
        call_expected = not (rng.random() < self.no_call_fraction)
        return DifficultySettings(
            num_tools=rng.randint(1, top.num_tools) if soft_tools else at.num_tools,
            expected_calls=(rng.randint(1, top.expected_calls) if soft else at.expected_calls) if call_expected else 0,
            user_persona=rng.randint(0, top.user_persona) if soft else at.user_persona,
            query_ambiguity=rng.randint(0, top.query_ambiguity) if soft else at.query_ambiguity,
            expected_turns=rng.randint(0, top.expected_turns) if soft else at.expected_turns,
            call_expected=call_expected,
        )

    def update(self, mean_reward: float) -> int:
        """Move the level after a step and return the new level."""
        if mean_reward >= UPPER_THRESHOLD:
            self.level = min(LEVEL_MAX, self.level + LEVEL_STEP)
        elif mean_reward <= LOWER_THRESHOLD:
            self.level = max(LEVEL_MIN, self.level - LEVEL_STEP)
        self.step += 1
        return self.level

    def state_dict(self) -> dict:
        return {"level": self.level, "step": self.step, "epsilon": self.epsilon,
                "no_call_fraction": self.no_call_fraction, "criteria_cap": self.criteria_cap}

    def load_state_dict(self, state: dict) -> None:
        level = int(state["level"])
        derive(level, self.criteria_cap)  # refuses an out-of-range level before anything changes
        self.level, self.step = level, int(state.get("step", 0))
