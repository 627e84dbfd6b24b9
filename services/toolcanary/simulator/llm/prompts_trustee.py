"""The four role prompts of the `trustee` mode: TRUSTEE's own templates, fed what TRUSTEE's code feeds them.

The templates come from the user's TRUSTEE checkout (`toolcanary.common.trustee_checkout`); this module only
turns the contract's task and history into the arguments TRUSTEE passes (`simulator.py`, `agent_loop.py`,
`curriculum.py` at the pinned commit):
- tools as `{"type": "function", "function": {...}}` dicts, the shape TRUSTEE's rows carry;
- the history as `{"role", "content"}` dicts, the policy's system prompt first, the assistant's text as the
  policy wrote it (the trainer's trustee mode sends it so);
- "the user's original query" as the conversation's first message, which in TRUSTEE is the policy's system
  prompt (its agent loop reads `messages[0]`); the task's first query when the history has no system message;
- a call as `{"name", "arguments"}` with the arguments as decoded, of any JSON type;
- the verifier's expected calls as the task author wrote them (`SimulatedTask.expected_tool_calls_as_written`),
  none for an abstention task (its author wrote calls for tools it is not served with; the backend judges such
  a task by rule and never builds this prompt for it).

Each function returns the chat messages of the call and, for the verifier, the criteria it applied.
"""

from __future__ import annotations

from toolcanary.common.trustee_checkout import TrusteeCheckout
from toolcanary.contract import DifficultySettings, Message, SimulatedTask, ToolCall, ToolSchema


def _tools(tools: list[ToolSchema]) -> list[dict]:
    return [t.model_dump(mode="json", exclude_none=True) for t in tools]


def _history(history: list[Message]) -> list[dict]:
    return [{"role": m.role, "content": m.content or ""} for m in history]


def _original_query(task: SimulatedTask, history: list[Message]) -> str:
    if history and history[0].role == "system":
        return history[0].content
    return task.first_user_query


def _user_message(prompt: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": prompt}]


def task_author(checkout: TrusteeCheckout, tools: list[ToolSchema], difficulty: DifficultySettings) -> list[dict]:
    return checkout.author_messages(_tools(tools), num_expected_calls=max(1, difficulty.expected_calls),
                                    user_persona_level=difficulty.user_persona,
                                    query_ambiguity_level=difficulty.query_ambiguity,
                                    expected_turns_level=difficulty.expected_turns)


def tool(checkout: TrusteeCheckout, task: SimulatedTask, history: list[Message], call: ToolCall) -> list[dict]:
    # The arguments go in as the decoded JSON value, whatever its type (a list, a number, null...): TRUSTEE's
    # agent loop json.loads them and writes {"name", "arguments"} into the call text, nothing more.
    function = {"name": call.function.name, "arguments": call.function.arguments}
    prompt = checkout.tool_prompt(_history(history), function, _tools(task.tools), user_intent=task.user_intent)
    return _user_message(prompt)


def user(checkout: TrusteeCheckout, task: SimulatedTask, history: list[Message]) -> list[dict]:
    prompt = checkout.user_prompt(_history(history), _original_query(task, history), _tools(task.tools),
                                  user_intent=task.user_intent, user_persona=task.user_persona)
    return _user_message(prompt)


def verifier(checkout: TrusteeCheckout, task: SimulatedTask, trajectory: list[Message],
             num_criteria: int) -> tuple[list[dict], list[str]]:
    prompt, criteria = checkout.verifier_prompt(
        _history(trajectory), _original_query(task, trajectory), _tools(task.tools),
        expected_tool_calls=_expected_calls(task), user_intent=task.user_intent,
        user_persona=task.user_persona, num_criteria=num_criteria)
    return _user_message(prompt), criteria


def _expected_calls(task: SimulatedTask) -> list:
    """The author's expected calls as it wrote them (names, objects with arguments, anything), as TRUSTEE hands
    them to its verifier; a task stored without that list (before contract 1.6) gives the names; an abstention
    task expects none, whatever its author wrote."""
    if not task.call_expected:
        return []
    if task.expected_tool_calls_as_written is not None:
        return task.expected_tool_calls_as_written
    return [c.name for c in task.expected_tool_calls]
