"""The scripted task author: a deterministic task per (seed, task key), with concrete expected arguments.

Tools come from one category (`LibraryIndex.sample_tools`); the expected calls are distinct offered tools whose
arguments hold every required value and, now and then, an optional one; the first query and the hidden
intent are written from the task's plan (`plan.TaskPlan`). Abstention tasks ask for something served by a tool
of another category, or a question answered without tools, and expect no call.
"""

from __future__ import annotations

from toolcanary.contract import DifficultySettings, ExpectedCall, SimulatedTask
from toolcanary.simulator.calls import rng_for, task_id_for
from toolcanary.simulator.library_index import LibraryIndex
from toolcanary.simulator.scripted.plan import PERSONAS, TaskPlan, intent_phrase
from toolcanary.simulator.scripted.values import generate_value

DIRECT_QUESTIONS = [
    "What is the difference between a debit card and a credit card?",
    "Can you explain what an ISO 8601 timestamp looks like?",
    "What does it mean when a website answers with error 404?",
    "How many minutes are there in a week?",
    "What's a good way to phrase a polite reminder about an unpaid bill?",
    "Why do airlines overbook flights?",
    "What is the capital of Canada?",
    "Can you suggest a name for a team channel about hiking?",
]
_SKIP_OPTIONAL = {"page_token", "page_size", "order"}


def make_task(index: LibraryIndex, difficulty: DifficultySettings, task_key: str, seed: int,
              abstain: bool = False, draw: str | None = None) -> SimulatedTask:
    """One task; the same (library, difficulty, draw, seed, abstain) always gives the same task, under whichever
    key (`draw`: the request's, else the key)."""
    draw = draw or task_key
    rng = rng_for("task", seed, draw)
    tools = index.sample_tools(difficulty.num_tools, rng)
    persona_name, persona_text = PERSONAS[difficulty.user_persona][:2]
    common = dict(
        task_id=task_id_for(seed, draw), task_key=task_key, category=tools[0].category,
        tools=[t.schema_ for t in tools], user_persona=f"{persona_name}: {persona_text}",
    )
    if abstain:
        return _abstention(index, difficulty, tools, rng, common)
    count = max(1, min(difficulty.expected_calls or 1, len(tools)))
    calls = []
    for tool in rng.sample(tools, count):
        args = generate_value(tool.schema_.function.parameters, "arguments", rng_for("args", seed, draw,
                                                                                      tool.schema_.name), 0.25)
        required = set(tool.schema_.required_parameters())
        args = {k: v for k, v in (args or {}).items() if k in required or k not in _SKIP_OPTIONAL}
        calls.append(ExpectedCall(name=tool.schema_.name, arguments=args))
    draft = SimulatedTask(**common, expected_tool_calls=calls, user_intent="-", first_user_query="-",
                          difficulty=difficulty, call_expected=True)
    plan = TaskPlan.of(draft)
    return draft.model_copy(update={"first_user_query": plan.stages[0].request_text, "user_intent": plan.intent_text()})


def _abstention(index, difficulty, tools, rng, common) -> SimulatedTask:
    offered = {t.category for t in tools}
    elsewhere = [name for name, t in index.tools.items() if t.category not in offered]
    opener, closer = PERSONAS[difficulty.user_persona][2:]
    if elsewhere and rng.random() < 0.7:
        wanted = index.tools[rng.choice(sorted(elsewhere))].schema_
        request = intent_phrase(wanted.function.description, wanted.name)
        query = f"{opener}I need you to {request}.{closer}"
        intent = (f"The user wants the assistant to {request}. None of the offered tools can do that; the right "
                  f"answer is to say so, without calling any tool.")
    else:
        query = f"{opener}{rng.choice(DIRECT_QUESTIONS)}{closer}"
        intent = ("The user asks a general question that needs no tool; the right answer is to answer it "
                  "directly, without calling any tool.")
    settings = difficulty.model_copy(update={"call_expected": False})
    return SimulatedTask(**common, expected_tool_calls=[], user_intent=intent, first_user_query=query,
                         difficulty=settings, call_expected=False)
