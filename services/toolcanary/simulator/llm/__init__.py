"""The llm backend: each role is one prompt to an OpenAI-compatible upstream, read back as validated JSON.

    python -m toolcanary.simulator serve --backend llm --run r1 --upstream http://vllm-a:8000 --upstream http://vllm-b:8000
    python -m toolcanary.simulator serve --backend llm --mode trustee --trustee-dir ../TRUSTEE --upstream http://vllm:8000

Every call is tried `1 + retries` times (the task author `1 + retries_task`), with a fixed or doubling pause
(tenacity runs the attempts); an attempt fails on a timeout, an upstream error, unreadable JSON (`parse`) or
JSON that does not fit the role (`validation`). After the last attempt the response is `aborted` with the
last cause and no reward. Within an attempt the request itself is re-sent up to `sdk_retries` times on a
timeout, a connection error or a status the OpenAI SDK retries (`upstream`); the role's `retries` (record and
metric) count those re-sends too.

The mode decides the prompts and what is decided without a model. `toolcanary`: the project's prompts
(`prompts`); a call to a tool the task does not offer or with arguments its schema rejects gets tool reward -1,
any call on an abstention task and no call on a task that needs one get verifier -1, all locally and exactly.
`trustee`: TRUSTEE's templates (`prompts_trustee`) and its rules: only the tool's name is checked, the tool role
judges the arguments (ToolBench's own defaults, such as "500" for a number, reach it); the verifier is always
asked (the trainer applies TRUSTEE's no-call penalty), except on an abstention task (below); the tool, user and
verifier answers are read and checked as TRUSTEE's simulator does (`json_output.read_trustee_json`,
`role_answers.Trustee*Output`), and each request is re-sent as TRUSTEE's OpenAI client re-sends it (2 times,
`sdk_retries`). That behaviour is implemented from reading TRUSTEE's `verl/recipe/trustee/simulator.py`: the
module imports verl's agent loop when it is imported, which the simulator image does not carry, so it cannot be
called from the checkout as the templates are.

TRUSTEE has no abstention tasks; the trustee mode makes one when the trainer asks for it (`call_expected` false,
drawn by the trainer's curriculum): TRUSTEE's author writes a task for the tools it is shown, exactly as for a
call task, and the task is then served with as many other tools, drawn from other categories, so that no
offered tool can fulfil it (`expected_tool_calls` empty; what the author wrote kept in
`expected_tool_calls_as_written`). Its verifier is no model: TRUSTEE's verifier prompt has no notion of a correct
decline, so the scripted backend's rule judges it (`calls.abstention_verdict`), and the record says "scripted".
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import TypeVar

from pydantic import ValidationError
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt, wait_fixed

from toolcanary.common.trustee_checkout import TrusteeCheckout
from toolcanary.contract import (
    ExpectedCall,
    SimulatedTask,
    TaskRequest,
    TaskResponse,
    ToolRequest,
    ToolResponse,
    UserRequest,
    UserResponse,
    VerifyRequest,
    VerifyResponse,
)
from toolcanary.simulator.backend import RoleOutput
from toolcanary.simulator.calls import abstention_verdict, executed_calls, rng_for, task_id_for
from toolcanary.simulator.library_index import LibraryIndex, NoOtherCategory
from toolcanary.simulator.llm import prompts, prompts_trustee
from toolcanary.simulator.llm.json_output import (
    OutputParseError,
    read_json_object,
    read_trustee_author_json,
    read_trustee_json,
)
from toolcanary.simulator.llm.role_answers import (
    AuthorOutput,
    ToolOutput,
    TrusteeAuthorOutput,
    TrusteeToolOutput,
    TrusteeUserOutput,
    TrusteeVerifierOutput,
    UserOutput,
    VerifierOutput,
)
from toolcanary.simulator.llm.upstream import UpstreamError, UpstreamPool
from toolcanary.simulator.metrics import Metrics
from toolcanary.simulator.settings import SimulatorSettings
from toolcanary.simulator.validation import validate_call

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = ["LlmBackend"]


class _FailedAttempt(Exception):
    """An attempt that failed in a way another attempt may not (its cause and detail are in `_Attempts`)."""


class _Attempts:
    def __init__(self) -> None:
        self.prompt_tokens = self.completion_tokens = self.retries = 0
        self.cause, self.detail = "upstream", ""

    def aborted(self, response_type: type):
        return RoleOutput(response_type(outcome="aborted", abort_cause=self.cause, abort_detail=self.detail[:500],
                                        prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens),
                          self.retries)

    def ok(self, response):
        tokens = {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}
        return RoleOutput(response.model_copy(update=tokens), self.retries)


class LlmBackend:
    name = "llm"

    def __init__(self, settings: SimulatorSettings, index: LibraryIndex, metrics: Metrics) -> None:
        self.settings, self.index = settings, index
        self.pool = UpstreamPool(settings, metrics)
        self.trustee = (TrusteeCheckout.open(settings.trustee_dir, settings.trustee_commit)
                        if settings.mode == "trustee" else None)
        self.read_json = read_trustee_json if self.trustee else read_json_object
        self.read_author_json = read_trustee_author_json if self.trustee else read_json_object

    async def unavailable(self) -> list[dict[str, str]]:
        return await self.pool.unavailable()

    def _pause(self, author: bool) -> Callable[[RetryCallState], float]:
        """The pause before the next attempt: `backoff_s`, fixed or doubling after each failed attempt with up
        to 50 % more at random (the task author's own `backoff_s_task`)."""
        pause_s = self.settings.backoff_s_task if author else self.settings.backoff_s
        if self.settings.backoff != "exponential":
            return wait_fixed(pause_s)
        return lambda state: pause_s * 2 ** (state.attempt_number - 1) * (1 + random.random() / 2)

    async def _ask(self, role: str, messages: list[dict], max_tokens: int, read: Callable[[dict], T]) -> tuple[
            T | None, _Attempts]:
        settings, attempts = self.settings, _Attempts()
        author = role == "task"
        tries = 1 + (settings.retries_task if author else settings.retries)
        timeout_s = settings.timeout_s_task if author else settings.timeout_s
        read_json = self.read_author_json if author else self.read_json

        async def attempt() -> T:
            try:
                completion = await self.pool.complete(messages, max_tokens, timeout_s, author=author)
            except UpstreamError as err:
                attempts.retries += err.resends
                attempts.cause, attempts.detail = err.cause, err.detail
                raise _FailedAttempt from err
            attempts.retries += completion.resends
            attempts.prompt_tokens += completion.prompt_tokens
            attempts.completion_tokens += completion.completion_tokens
            repaired = False
            try:
                data, repaired = read_json(completion.text)
                return read(data)
            except OutputParseError as err:
                attempts.cause, attempts.detail = "parse", str(err)
            except (ValidationError, ValueError) as err:
                # A repaired (truncated) answer that lacks fields failed at reading, not at content.
                attempts.cause = "parse" if repaired else "validation"
                prefix = "truncated answer, incomplete after repair: " if repaired else ""
                attempts.detail = prefix + str(err).replace("\n", " ")
            raise _FailedAttempt

        def failed(state: RetryCallState) -> None:
            log.warning("%s attempt %d/%d: %s: %s", role, state.attempt_number, tries, attempts.cause,
                        attempts.detail[:200])

        def another(_: RetryCallState) -> None:
            attempts.retries += 1

        # Every failed attempt is tried again, whatever its cause; anything else is a fault and propagates.
        retrying = AsyncRetrying(stop=stop_after_attempt(tries), wait=self._pause(author), after=failed,
                                 before_sleep=another, retry=retry_if_exception_type(_FailedAttempt), reraise=True)
        try:
            return await retrying(attempt), attempts
        except _FailedAttempt:
            return None, attempts

    async def author(self, request: TaskRequest, abstain: bool) -> RoleOutput:
        # Seeded by the draw (the seed and the group's place), so two runs of one seed offer the same tools.
        draw = request.draw or request.task_key
        rng = rng_for("task", self.settings.seed, draw)
        tools = self.index.sample_tools(request.difficulty.num_tools, rng, trustee=self.trustee is not None)
        offered = {t.schema_.name for t in tools}
        schemas = [t.schema_ for t in tools]
        served, served_elsewhere = tools, self.trustee is not None and abstain
        if served_elsewhere:
            # TRUSTEE's author writes every task for the tools it is shown; an abstention task is then served
            # with as many tools of other categories (and other names), so that none of them can fulfil it. Drawn
            # before the author is asked, so a library that cannot give them costs no model call.
            try:
                served = self.index.sample_tools(len(tools), rng_for("abstain-tools", self.settings.seed, draw), trustee=True,
                                                 exclude={t.category for t in tools}, exclude_names=offered)
            except NoOtherCategory as err:
                attempts = _Attempts()
                attempts.cause = "validation"
                attempts.detail = (f"abstention task {request.task_key!r}: expected tools of another category "
                                   "than its author's, none of which can serve it, but the library has none left; "
                                   "use a library with several categories (TRUSTEE's toolbench_tools.json), or "
                                   f"set the trainer's TOOLCANARY_TRAIN_NO_CALL_FRACTION to 0. {err}")
                log.error("task author: %s", attempts.detail)
                return attempts.aborted(TaskResponse)

        def read(data: dict) -> AuthorOutput | TrusteeAuthorOutput:
            if self.trustee:
                return TrusteeAuthorOutput.model_validate(data)
            output = AuthorOutput.model_validate(data)
            output.check_against(offered, abstain)
            return output

        if self.trustee:
            messages = prompts_trustee.task_author(self.trustee, schemas, request.difficulty)
        else:
            messages = [{"role": "user", "content": prompts.task_author(schemas, request.difficulty, abstain)}]
        output, attempts = await self._ask("task", messages, self.settings.max_tokens_task, read)
        if output is None:
            return attempts.aborted(TaskResponse)
        difficulty = request.difficulty.model_copy(update={"call_expected": not abstain})
        # An abstention task of the trustee mode expects no call; the author's calls stay in the record only.
        expected = [] if served_elsewhere else [ExpectedCall(name=n) for n in output.expected_tool_calls]
        task = SimulatedTask(
            task_id=task_id_for(self.settings.seed, draw), task_key=request.task_key,
            category=served[0].category, tools=[t.schema_ for t in served],
            expected_tool_calls=expected,
            expected_tool_calls_as_written=output.calls_as_written if self.trustee else None,
            user_intent=output.user_intent, user_persona=output.user_persona,
            first_user_query=output.first_user_query, difficulty=difficulty, call_expected=not abstain,
        )
        return attempts.ok(TaskResponse(task=task))

    async def tool(self, task: SimulatedTask, request: ToolRequest) -> RoleOutput:
        call = request.call
        if self.trustee:
            if task.tool(call.function.name) is None:
                return RoleOutput(ToolResponse(result=f"Error: Tool {call.function.name} not found", is_error=True,
                                               reward=-1))
            messages = prompts_trustee.tool(self.trustee, task, request.history, call)
            reader = TrusteeToolOutput.read
        else:
            error = validate_call(task, call)
            if error is not None:
                return RoleOutput(ToolResponse(result=error, is_error=True, reward=-1))
            messages = [{"role": "user", "content": prompts.tool(task, request.history, call)}]
            reader = ToolOutput.model_validate
        output, attempts = await self._ask("tool", messages, self.settings.max_tokens, reader)
        if output is None:
            return attempts.aborted(ToolResponse)
        reward = output.reward if task.call_expected else -1
        return attempts.ok(ToolResponse(result=output.result, is_error=output.is_error, reward=reward))

    async def user(self, task: SimulatedTask, request: UserRequest) -> RoleOutput:
        if self.trustee:
            messages = prompts_trustee.user(self.trustee, task, request.history)
            reader = TrusteeUserOutput.read
        else:
            messages = [{"role": "user", "content": prompts.user(task, request.history)}]
            reader = UserOutput.model_validate
        output, attempts = await self._ask("user", messages, self.settings.max_tokens, reader)
        if output is None:
            return attempts.aborted(UserResponse)
        # TRUSTEE ends the episode only on an exactly empty reply; ours also on whitespace.
        reply = output.response if self.trustee else output.response.strip()
        return attempts.ok(UserResponse(reply=reply, reward=output.reward, done=reply == ""))

    async def verify(self, task: SimulatedTask, request: VerifyRequest) -> RoleOutput:
        trajectory = request.trajectory
        if self.trustee:
            if not task.call_expected:
                # TRUSTEE's verifier prompt has no notion of a correct decline: the rule decides, the scripted
                # backend's, and the record names it.
                verdict = abstention_verdict(trajectory)
                reasoning = "By rule, no model asked (an abstention task): " + verdict.reasoning
                return RoleOutput(verdict.model_copy(update={"reasoning": reasoning}), backend="scripted")
            messages, criteria = prompts_trustee.verifier(self.trustee, task, trajectory, request.num_criteria)
            reader = TrusteeVerifierOutput.read
        else:
            prompt, criteria = prompts.verifier(task, trajectory, request.num_criteria)
            called = bool(executed_calls(trajectory))
            if not task.call_expected and called:
                return RoleOutput(VerifyResponse(reward=-1, criteria=criteria, reasoning="A tool was called although "
                                                 "no offered tool serves the request."))
            if task.call_expected and not called:
                return RoleOutput(VerifyResponse(reward=-1, criteria=criteria, reasoning="The agent did not call any "
                                                 "tool."))
            messages = [{"role": "user", "content": prompt}]
            reader = VerifierOutput.model_validate
        output, attempts = await self._ask("verify", messages, self.settings.max_tokens, reader)
        if output is None:
            return attempts.aborted(VerifyResponse)
        return attempts.ok(VerifyResponse(reward=output.reward, reasoning=output.reasoning, criteria=criteria))

    async def aclose(self) -> None:
        await self.pool.aclose()
