"""The four role prompts of the llm backend, written for ToolCanary.

Each role gets what TRUSTEE's role sees (trustee.md §1.2) and is asked for the same JSON answer, as one user
message (no system message). Additions of our own: the abstention variants (a request none of the offered tools
serves, and a verifier that rewards declining), and an `is_error` flag from the tool role.
"""

from __future__ import annotations

import json

from toolcanary.contract import DifficultySettings, SimulatedTask, ToolCall

PERSONA = ["an expert who knows the domain and its terms", "a beginner who knows the goal but little jargon",
           "a novice who is unsure and needs guidance"]
AMBIGUITY = ["clear and complete", "somewhat ambiguous: one or two details are left out",
             "highly ambiguous: vague, with key information missing"]
TURNS = ["one or two exchanges", "a few to several exchanges", "many exchanges"]
CRITERIA = [
    "The agent fulfilled the user's goal by actually using the tools.",
    "The agent used the expected tools, appropriately.",
    "The agent did not invent facts, tool results or values the user never gave.",
    "The agent made no redundant or incorrect tool calls.",
    "The agent was concise and efficient.",
]
ABSTENTION_CRITERIA = [
    "The agent did not call any tool, because none of the offered tools can serve the request.",
    "The agent said clearly that it cannot do this with its tools, or answered the question directly and correctly.",
]


def _tools(task_tools) -> str:
    return json.dumps([t.model_dump(mode="json") for t in task_tools], ensure_ascii=False)


def _history(history) -> str:
    return json.dumps([m.model_dump(mode="json", exclude_none=True) for m in history], ensure_ascii=False)


def task_author(tools, difficulty: DifficultySettings, abstain: bool) -> str:
    head = ("You write training tasks for an AI assistant that calls tools. Write exactly ONE realistic task for "
            f"the tools below.\n\nTools (JSON):\n{_tools(tools)}\n\n")
    style = (f"The user is {PERSONA[difficulty.user_persona]}; this is about expertise only. The user's first "
             f"message is {AMBIGUITY[difficulty.query_ambiguity]}; ambiguity concerns the first message only and is "
             f"independent of expertise. The conversation should take {TURNS[difficulty.expected_turns]}.\n")
    if abstain:
        need = ("The task must be one that NONE of these tools can serve: a related but different need, or a "
                "question to answer directly. The right behaviour is to decline or answer without any tool call. "
                'Set "expected_tool_calls" to [].\n')
    else:
        need = (f"The task should need about {max(1, difficulty.expected_calls)} distinct tool call(s); list the "
                "tool names in a plausible order in \"expected_tool_calls\" (names from the list above only).\n")
    rules = ("\"user_intent\" is the user's real, complete goal with every concrete detail (names, dates, amounts); "
             "it may say more than the first message. \"first_user_query\" is what the user types first: natural, "
             "no tool names, not a specification.\n\nAnswer with JSON only:\n"
             '{"expected_tool_calls": ["tool name", ...], "user_intent": "...", "user_persona": "...", '
             '"first_user_query": "..."}')
    return head + style + need + rules


def tool(task: SimulatedTask, history, call: ToolCall) -> str:
    return (
        "You simulate the backend of a tool that an AI assistant has just called. First check the call: the tool "
        "exists, required arguments are present, types match and values are plausible. If not, answer with an "
        "error message as the real service would and set is_error to true. Otherwise return a realistic, concrete "
        "result consistent with the conversation so far (real-looking ids, names, numbers; no placeholders).\n\n"
        f"Available tools (JSON):\n{_tools(task.tools)}\n\nThe user's hidden goal: {task.user_intent}\n\n"
        f"Conversation so far (JSON):\n{_history(history)}\n\n"
        f"The call (JSON):\n{json.dumps(call.function.model_dump(mode='json'), ensure_ascii=False)}\n\n"
        "Also grade the call: 1 if it is valid and the best next step towards the goal, 0 if valid but "
        "suboptimal, redundant or only partly useful, -1 if invalid or not serving the goal.\n\n"
        'Answer with JSON only: {"result": "...", "is_error": false, "reward": 1}'
    )


def user(task: SimulatedTask, history) -> str:
    latest = next((m for m in reversed(history) if m.role == "assistant"), None)
    latest_text = json.dumps(latest.model_dump(mode="json", exclude_none=True) if latest else None,
                             ensure_ascii=False)
    return (
        "You play a human user talking to an AI assistant that can call tools. Stay in character: 1-3 short "
        "sentences, natural and sometimes emotional; do not repeat your task word for word; give details only "
        "when asked; point out mistakes; ask for clarification when the assistant is unclear.\n\n"
        f"Your first message was: {task.first_user_query}\nYour real goal: {task.user_intent}\n"
        f"Who you are: {task.user_persona}\n\nThe assistant's tools (JSON):\n{_tools(task.tools)}\n\n"
        f"Conversation so far (JSON):\n{_history(history)}\n\nThe assistant's latest message (JSON): {latest_text}\n\n"
        "If your goal is fully met, or the assistant has clearly failed, answer with an empty response to end the "
        "conversation. Grade the assistant's latest turn: 1 significant progress, 0 little progress, -1 wrong, "
        'unclear or no progress.\n\nAnswer with JSON only: {"response": "...", "reward": 0}'
    )


def verifier(task: SimulatedTask, trajectory, num_criteria: int) -> tuple[str, list[str]]:
    if task.call_expected:
        criteria = CRITERIA[:num_criteria]
        expected = ", ".join(c.name for c in task.expected_tool_calls) or "(none given)"
        scale = ("1 if every criterion is met, 0 if most are met, -1 if most are not met or the agent called no "
                 "tool at all")
    else:
        criteria, expected = ABSTENTION_CRITERIA, "none: no offered tool serves this request"
        scale = "1 if every criterion is met, 0 if the answer is weak but no tool was called, -1 otherwise"
    listed = "\n".join(f"{n}. {c}" for n, c in enumerate(criteria, 1))
    prompt = (
        "You judge whether an AI assistant handled a conversation well.\n\n"
        f"The user's first message: {task.first_user_query}\nGround truth of the user's goal: {task.user_intent}\n"
        f"The user: {task.user_persona}\nExpected tools: {expected}\n\nTools offered (JSON):\n{_tools(task.tools)}\n\n"
        f"The complete conversation (JSON):\n{_history(trajectory)}\n\nCriteria, in order of importance:\n{listed}\n\n"
        f"Reward: {scale}.\n\n"
        'Answer with JSON only: {"reward": 1, "reasoning": "one short paragraph"}'
    )
    return prompt, criteria
