"""How a scripted task unfolds: which expected calls are asked for in which user turn, what is held back, and the words.

A plan is a pure function of the task, so the author (writing the first query), the user role (answering later
turns), the verifier and the gold trajectory all agree without shared state. Difficulty shapes it:
- `expected_turns` splits the calls into stages; each later stage is a follow-up the user asks for once the
  previous one is done (0: one stage, 1: two, 2: one call per stage);
- `query_ambiguity` affects the first message only (1: one argument of the first call is held back until the
  agent asks; 2: the message is vague and everything of the first stage is held back);
- `user_persona` sets the register (expert, beginner, novice).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from toolcanary.contract import ExpectedCall, SimulatedTask
from toolcanary.simulator.scripted.values import humanize, show

PERSONAS = [
    ("expert", "an experienced professional who uses precise terms and expects efficient help", "", ""),
    ("beginner", "a newcomer who knows what they want but not the jargon", "Hi, I'm fairly new to this. ", ""),
    ("novice", "someone unfamiliar with software who writes chattily and needs reassurance",
     "Hello! Sorry, I'm really not good with computers. ", " Thank you so much!"),
]
NUDGE = "That isn't done yet."


def intent_phrase(description: str, name: str) -> str:
    """The request a tool serves, as a user would say it: the opening clause of its description."""
    text = re.split(r"[.,:;(]", description.replace("`", ""), maxsplit=1)[0].strip()
    if not text:
        return f"run {name}"
    return text[0].lower() + text[1:]


@dataclass
class Stage:
    calls: list[ExpectedCall]
    phrases: list[str]
    held: dict[int, list[str]] = field(default_factory=dict)
    vague: bool = False
    request_text: str = ""
    reveal_text: str = ""

    def call_text(self, index: int, hide: bool = True) -> str:
        call, phrase = self.calls[index], self.phrases[index]
        hidden = set(self.held.get(index, [])) if hide else set()
        args = [f"{humanize(k)} {show(v)}" for k, v in (call.arguments or {}).items() if k not in hidden]
        return phrase + (f" with {', '.join(args)}" if args else "")

    def full_text(self, hide: bool = False) -> str:
        return " and then ".join(self.call_text(i, hide) for i in range(len(self.calls)))


def _split(count: int, expected_turns: int) -> list[int]:
    if count <= 1 or expected_turns == 0:
        return [count]
    if expected_turns == 1:
        first = (count + 1) // 2
        return [first, count - first]
    return [1] * count


@dataclass
class TaskPlan:
    stages: list[Stage]
    persona: int

    @classmethod
    def of(cls, task: SimulatedTask) -> TaskPlan:
        calls, difficulty = task.expected_tool_calls, task.difficulty
        persona = difficulty.user_persona
        opener, closer = PERSONAS[persona][2], PERSONAS[persona][3]
        stages, start = [], 0
        for size in _split(len(calls), difficulty.expected_turns):
            chunk = calls[start : start + size]
            start += size
            phrases = [intent_phrase(t.function.description, t.name) if (t := task.tool(c.name)) else
                       f"use {c.name}" for c in chunk]
            stages.append(Stage(chunk, phrases))
        if not stages or not stages[0].calls:
            return cls([], persona)
        first = stages[0]
        if difficulty.query_ambiguity == 1:
            args = list((first.calls[0].arguments or {}).keys())
            if args:
                first.held[0] = [args[-1]]
        elif difficulty.query_ambiguity == 2:
            first.vague = True
            first.held = {i: list((c.arguments or {}).keys()) for i, c in enumerate(first.calls)}
        area = humanize(task.category) if task.category else "my accounts"
        if first.vague:
            first.request_text = f"{opener}Can you help me with something related to {area}?{closer}"
            first.reveal_text = f"Sure. I need you to {first.full_text()}."
        else:
            first.request_text = f"{opener}I need you to {first.full_text(hide=True)}.{closer}"
            hidden = [f"the {humanize(k)} is {show((first.calls[i].arguments or {})[k])}"
                      for i, keys in first.held.items() for k in keys]
            if hidden:
                first.reveal_text = f"Oh right, for {first.phrases[0]}: {' and '.join(hidden)}."
        for stage in stages[1:]:
            stage.request_text = f"Thanks! Next, I need you to {stage.full_text()}."
        return cls(stages, persona)

    def nudge_text(self, stage: Stage) -> str:
        return f"{NUDGE} Please {stage.full_text()}."

    def intent_text(self) -> str:
        """The hidden goal in full: every request with every value."""
        parts = [stage.full_text() for stage in self.stages]
        return "The user wants the assistant to " + "; after that, ".join(parts) + "."
