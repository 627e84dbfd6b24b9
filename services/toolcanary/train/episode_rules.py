"""The rules of an episode, one object per mode: everything the two modes decide differently.

The agent loop (agent_loop.py) is one sequence for both modes: get the task, then repeat generate -> read the
turn -> stop checks -> tool or user turn -> stop checks, then verify and score. It asks its rules object:

- `read_turn`: what the policy's turn holds, and whether it counts as a tool call;
- `turn_tokens`: how many tokens the next generation may use;
- stop conditions, methods marked `@stop(phase)`: `stop_reason(phase, state)` gives the name of the first
  one of that phase that holds, in the order the class defines them. Phase `after_generation` runs before the
  turn joins the conversation (a turn stopped there is trained on but never shown to a role), phase
  `before_acting` after it joined and before any role answers it;
- the tool turn's policy (`ToolTurnRules`: which calls are answered, error texts, the cut of long results),
  the user's end of the conversation, what a role's failure leaves in the conversation, whether the verifier
  runs, and the episode's reward.

`ToolcanaryRules` are the project's own; `TrusteeRules` are TRUSTEE's agent loop (JamyDon/TRUSTEE at the
pinned commit, `verl/recipe/trustee/agent_loop.py` and `simulator.py`), read from its code. The trustee rules
find tool calls with TRUSTEE's own Hermes parser, imported from the user's checkout
(`verl/verl/experimental/agent_loop/tool_parser.py`, which imports only verl's utilities): a turn is a tool
call when `<tool_call>` or `</tool_call>` appears anywhere in its text, reasoning included, or the parser
found a call; the parser reads every `<tool_call>...</tool_call>` block of the whole text and passes on any
JSON value as arguments.

    rules = rules_for("trustee", tokenizer, trustee_dir="/trustee")
    turn = await rules.read_turn(token_ids)
    reason = rules.stop_reason("after_generation", LoopState(record, spec, used, budget, turn))
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from toolcanary.common.trustee_checkout import TrusteeCheckout
from toolcanary.contract.chat import FunctionCall, ToolCall
from toolcanary.contract.errors import ContractError
from toolcanary.contract.hermes import CALL_CLOSE, CALL_OPEN, parse_assistant_text
from toolcanary.contract.simulator_api import UserResponse
from toolcanary.contract.tasks import SimulatedTask
from toolcanary.contract.training_files import EpisodeRecord
from toolcanary.train.episode import SYSTEM_PROMPTS, EpisodeSpec, truncate_middle, truncate_middle_trustee

PHASES = ("after_generation", "before_acting")
# TRUSTEE's texts for a turn with no readable call and for a tool or user role that gave up: the verifier
# reads them in the conversation, so the trustee mode writes the same words.
UNPARSED = "Error: Tool call is malformed or could not be parsed"
TRUSTEE_TOOL_FAILED = "Error: Failed to simulate tool execution"
TRUSTEE_TOOL_EMPTY = "Error: Tool call could not be resolved"
TRUSTEE_USER_FAILED = "I need more time to think about this."
# TRUSTEE's curriculum makes up to this many rounds of tasks before it lowers the level (max_attempts).
TRUSTEE_TASK_ATTEMPTS = 5


def stop(phase: str):
    """Mark a method `(self, state) -> bool` as a stop condition of `phase`; its name is the stop reason."""
    if phase not in PHASES:
        raise ValueError(f"stop phase: expected one of {PHASES}, got {phase!r}")

    def mark(method):
        method.stop_phase = phase
        return method
    return mark


@dataclass
class Turn:
    """One generated policy turn as a mode reads it."""

    attempted_call: bool  # the mode's call detection: a tool turn follows, else a user turn
    calls: list[ToolCall]  # the calls to answer, in order
    unparsed: list[str]  # why each call that could not be read failed
    message: dict  # the assistant message as the policy's chat template renders it (token side)
    shown: dict  # the assistant message the roles are shown


@dataclass
class LoopState:
    """What a stop condition reads."""

    record: EpisodeRecord
    spec: EpisodeSpec
    used: int  # response tokens so far (the policy's and the replies')
    budget: int  # the response budget
    turn: Turn


@dataclass
class Replies:
    """What a tool or user turn adds to the conversation."""

    messages: list[dict] = field(default_factory=list)
    aborted: bool = False  # the role gave up: the episode ends (the record says why)
    ended: bool = False  # the user ended the conversation


def _unreadable(parsed) -> list[str]:
    return [f"malformed tool call ({m.error})" for m in parsed.malformed]


class EpisodeRules:
    """The base of a mode's rules; subclasses set the class attributes and define the hooks."""

    mode: ClassVar[str]
    # Tasks tried for a group (the first under its own key, the rest under derived keys) before its episodes
    # are aborted for want of a task.
    task_attempts: ClassVar[int] = 1
    # A tool or user turn is counted when attempted (True), or only when it completed and the conversation goes
    # on (False).
    counts_attempted_turns: ClassVar[bool]
    # The user's final (ending) reply joins the conversation.
    keeps_final_reply: ClassVar[bool]
    # The replies of a turn whose role gave up join the conversation the verifier reads.
    shows_failed_replies: ClassVar[bool]
    user_failed_text: ClassVar[str] = ""
    tool_failed_text: ClassVar[str] = ""
    _stops: ClassVar[dict[str, list[str]]]

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls._stops = {phase: [name for name, member in vars(cls).items()
                              if getattr(member, "stop_phase", None) == phase] for phase in PHASES}

    def __init__(self, tokenizer, stop_ids: set[int]) -> None:
        self.tokenizer, self.stop_ids = tokenizer, stop_ids

    def stop_reason(self, phase: str, state: LoopState) -> str | None:
        return next((name for name in self._stops[phase] if getattr(self, name)(state)), None)

    def _decode_for_parsing(self, token_ids: list[int]) -> str:
        ids = list(token_ids)
        while ids and ids[-1] in self.stop_ids:
            ids.pop()
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    # --- hooks ------------------------------------------------------------------------------------------
    def system_prompt(self, level: int) -> str:
        raise NotImplementedError

    async def read_turn(self, token_ids: list[int]) -> Turn:
        raise NotImplementedError

    def turn_tokens(self, max_turn_tokens: int, prompt_length: int, budget: int, context: int, used: int) -> int:
        """The next generation's token cap (0 or less: the budget is spent)."""
        raise NotImplementedError

    def history(self, conversation: list[dict]) -> list[dict]:
        """The part of the conversation the roles are shown."""
        raise NotImplementedError

    def user_ended(self, answer: UserResponse) -> bool:
        raise NotImplementedError

    def verifies(self, record: EpisodeRecord) -> bool:
        raise NotImplementedError

    def score(self, record: EpisodeRecord, task: SimulatedTask) -> None:
        """Set the episode's reward once the verifier has run (or not)."""
        raise NotImplementedError

    # --- the tool turn ----------------------------------------------------------------------------------
    def calls_to_answer(self, turn: Turn, record: EpisodeRecord, max_parallel_calls: int) -> list[ToolCall | str]:
        """The calls the tool turn answers (a string: an unreadable call, answered with an error)."""
        raise NotImplementedError

    def not_found(self, name: str, task: SimulatedTask) -> str:
        raise NotImplementedError

    def tool_text(self, result: str, max_chars: int) -> str:
        raise NotImplementedError


class ToolcanaryRules(EpisodeRules):
    """The project's own rules.

    A limit stops the episode when a count reaches it, before acting; the roles see the conversation after the
    system prompt; each unreadable call is answered with an error; an aborted episode scores 0 and is not
    verified; -1 for no call only where the task expected one (abstention tasks exist here).
    """

    mode = "toolcanary"
    counts_attempted_turns = False
    keeps_final_reply = False
    shows_failed_replies = False

    def system_prompt(self, level: int) -> str:
        return SYSTEM_PROMPTS[level]

    async def read_turn(self, token_ids: list[int]) -> Turn:
        parsed = parse_assistant_text(self._decode_for_parsing(token_ids))
        message = _assistant_message(parsed)
        return Turn(parsed.attempted_call, list(parsed.tool_calls), _unreadable(parsed), message, message)

    def turn_tokens(self, max_turn_tokens: int, prompt_length: int, budget: int, context: int, used: int) -> int:
        return min(max_turn_tokens, budget - used)

    @stop("before_acting")
    def response_length(self, state: LoopState) -> bool:
        return state.used >= state.budget

    @stop("before_acting")
    def assistant_turns(self, state: LoopState) -> bool:
        return state.record.assistant_turns >= state.spec.max_assistant_turns

    @stop("before_acting")
    def tool_turns(self, state: LoopState) -> bool:
        return state.turn.attempted_call and state.record.tool_turns >= state.spec.max_tool_turns

    @stop("before_acting")
    def user_turns(self, state: LoopState) -> bool:
        return not state.turn.attempted_call and state.record.user_turns >= state.spec.max_user_turns

    def history(self, conversation: list[dict]) -> list[dict]:
        return conversation[1:]

    def user_ended(self, answer: UserResponse) -> bool:
        return answer.done or not answer.reply.strip()

    def verifies(self, record: EpisodeRecord) -> bool:
        return record.outcome == "ok"

    def score(self, record: EpisodeRecord, task: SimulatedTask) -> None:
        if record.outcome == "aborted":
            record.reward = 0.0
        elif task.call_expected and record.tool_call_turns == 0:
            record.reward, record.no_call_penalty = -1.0, True

    def calls_to_answer(self, turn: Turn, record: EpisodeRecord, max_parallel_calls: int) -> list[ToolCall | str]:
        attempts: list[ToolCall | str] = [*turn.calls, *turn.unparsed]
        record.dropped_calls += max(0, len(attempts) - max_parallel_calls)
        return attempts[:max_parallel_calls]

    def not_found(self, name: str, task: SimulatedTask) -> str:
        return f"Error: tool '{name}' not found. Available tools: {', '.join(t.name for t in task.tools)}."

    def tool_text(self, result: str, max_chars: int) -> str:
        return truncate_middle(result, max_chars)


class TrusteeRules(EpisodeRules):
    """TRUSTEE's agent loop (see the module docstring for call detection).

    Its system prompts, read from the checkout; a turn limit stops the episode only when a count goes over it,
    checked after each generation, and the generation that goes over is trained on but never shown to the
    roles; the roles see the whole conversation, system prompt first, the policy's text as written (special
    tokens dropped); a generation may use the whole context left (`prompt_length + response_length` minus the
    context so far, what TRUSTEE's vLLM server allows when no cap is passed); a task that cannot be had, or
    whose prompt is over the budget, is replaced by another; a role that gives up leaves TRUSTEE's failure text
    in the conversation and the verifier still runs; the reward is the verifier's, -1 for every episode without
    a tool-call turn (except on an abstention task, which TRUSTEE never has), aborted ones kept at that reward
    (TRUSTEE's curriculum mean counts them so).
    """

    mode = "trustee"
    task_attempts = TRUSTEE_TASK_ATTEMPTS
    counts_attempted_turns = True
    keeps_final_reply = True
    shows_failed_replies = True
    user_failed_text = TRUSTEE_USER_FAILED
    tool_failed_text = TRUSTEE_TOOL_FAILED

    def __init__(self, tokenizer, stop_ids: set[int], checkout: TrusteeCheckout) -> None:
        super().__init__(tokenizer, stop_ids)
        self.checkout = checkout
        self.parser = trustee_hermes_parser(checkout, tokenizer)

    def system_prompt(self, level: int) -> str:
        return self.checkout.system_prompt(level)

    async def read_turn(self, token_ids: list[int]) -> Turn:
        written = self.tokenizer.decode(list(token_ids), skip_special_tokens=True)
        _, found = await self.parser.extract_tool_calls(list(token_ids))
        calls = [_trustee_call(c.name, c.arguments) for c in found]
        attempted = CALL_OPEN in written or CALL_CLOSE in written or bool(calls)
        # Blocks the parser dropped (unreadable JSON, no name or arguments): counted, never answered one by one.
        unparsed = ["a <tool_call> block TRUSTEE's parser dropped"] * max(0, written.count(CALL_OPEN) - len(calls))
        message = _assistant_message(parse_assistant_text(self._decode_for_parsing(token_ids)))
        return Turn(attempted, calls, unparsed, message, {"role": "assistant", "content": written})

    def turn_tokens(self, max_turn_tokens: int, prompt_length: int, budget: int, context: int, used: int) -> int:
        # TRUSTEE checks the response budget after a generation, never before one: a turn starts whenever the
        # previous replies left the response under budget.
        return min(max_turn_tokens, prompt_length + budget - context)

    @stop("after_generation")
    def response_length(self, state: LoopState) -> bool:
        return state.used >= state.budget

    @stop("after_generation")
    def assistant_turns(self, state: LoopState) -> bool:
        return bool(state.spec.max_assistant_turns) and state.record.assistant_turns > state.spec.max_assistant_turns

    @stop("after_generation")
    def user_turns(self, state: LoopState) -> bool:
        return bool(state.spec.max_user_turns) and state.record.user_turns > state.spec.max_user_turns

    @stop("after_generation")
    def tool_turns(self, state: LoopState) -> bool:
        return bool(state.spec.max_tool_turns) and state.record.tool_turns > state.spec.max_tool_turns

    def history(self, conversation: list[dict]) -> list[dict]:
        return [{"role": m["role"], "content": m.get("content") or ""} for m in conversation]

    def user_ended(self, answer: UserResponse) -> bool:
        return answer.done or answer.reply == ""

    def verifies(self, record: EpisodeRecord) -> bool:
        # A refused token stops the run (the trainers check it); nothing to verify with.
        return record.abort_cause != "auth"

    def score(self, record: EpisodeRecord, task: SimulatedTask) -> None:
        # TRUSTEE's penalty: -1 for every episode without a tool-call turn. TRUSTEE has no abstention tasks; one
        # the curriculum asked for (no_call_fraction > 0) has no call as its right answer, so the verifier's
        # rule-based reward stands. With no abstention tasks every task expects a call: TRUSTEE's rule unchanged.
        if record.tool_call_turns == 0 and task.call_expected:
            record.reward, record.no_call_penalty = -1.0, True

    def calls_to_answer(self, turn: Turn, record: EpisodeRecord, max_parallel_calls: int) -> list[ToolCall | str]:
        record.invalid_calls += len(turn.unparsed)
        record.dropped_calls += max(0, len(turn.calls) - max_parallel_calls)
        # A tool turn with no call read is answered by one error message (tool_turn.py).
        return list(turn.calls[:max_parallel_calls])

    def not_found(self, name: str, task: SimulatedTask) -> str:
        return f"Error: Tool {name} not found"

    def tool_text(self, result: str, max_chars: int) -> str:
        return truncate_middle_trustee(result, max_chars) or TRUSTEE_TOOL_EMPTY


def rules_for(mode: str, tokenizer, stop_ids: set[int], trustee_dir: str | None = None,
              trustee_commit: str | None = None) -> EpisodeRules:
    """The rules of `mode`; in mode trustee from the checkout at `trustee_dir`, verified against `trustee_commit`
    (None: the pinned commit)."""
    if mode == "toolcanary":
        return ToolcanaryRules(tokenizer, stop_ids)
    if mode != "trustee":
        raise ValueError(f"agent loop mode: expected trustee or toolcanary, got {mode!r}")
    if not trustee_dir:
        raise ValueError("agent loop mode trustee reads TRUSTEE's system prompts and tool parser from a checkout: "
                         "set trustee_dir (TOOLCANARY_TRAIN_TRUSTEE_DIR)")
    return TrusteeRules(tokenizer, stop_ids, TrusteeCheckout.open(trustee_dir, trustee_commit))


def trustee_hermes_parser(checkout: TrusteeCheckout, tokenizer):
    """TRUSTEE's Hermes tool parser from the checkout, for `tokenizer`.

    Raises:
        ContractError: the checkout's parser module does not import here or has no hermes parser.
    """
    module = checkout.tool_parser_module()
    registry = getattr(getattr(module, "ToolParser", None), "_registry", {})
    if "hermes" not in registry:
        raise ContractError(str(checkout.root / checkout.tool_parser_path), "TRUSTEE's ToolParser with a 'hermes' "
                            "parser registered", "no such parser", "Check out the pinned commit of TRUSTEE")
    return registry["hermes"](tokenizer)


def _trustee_call(name: str, arguments: str) -> ToolCall:
    """A call as TRUSTEE's parser returned it: any JSON value as arguments, any name (an empty one too, which
    no offered tool has: it is answered as not found without reaching the simulator)."""
    value: Any = json.loads(arguments)
    if name:
        return ToolCall(function=FunctionCall(name=name, arguments=value))
    return ToolCall.model_construct(function=FunctionCall.model_construct(name=name, arguments=value))


def _assistant_message(parsed) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": parsed.content}
    if parsed.reasoning is not None:
        message["reasoning_content"] = parsed.reasoning
    if parsed.tool_calls:
        message["tool_calls"] = [call.model_dump(mode="json") for call in parsed.tool_calls]
    return message
