"""What each role's JSON answer must look like; a mismatch is a `validation` failure, retried like any other.

Rewards must be -1, 0 or 1 (the strings "-1", "0", "1" are accepted; booleans and other numbers are not).
A tool `result` given as an object or list is kept as its JSON text: tool results often are JSON.

The `trustee` mode checks the tool, user and verifier answers as TRUSTEE's simulator does (`Trustee*Output`,
implemented from reading `verl/recipe/trustee/simulator.py`, which cannot be imported without verl): the answer
must be a JSON object with the role's keys (tool: `result` and `reward`; user: `response` and `reward`;
verifier: `reward`); the reward is Python's `float()` of the value, clamped to [-1, 1] and kept as it is (0.5
stays 0.5); the tool result and the user's reply are Python's `str()` of the value, so an object reads as
`{'a': 1}` and null as `None`. Its task author needs only a non-blank first query (`TrusteeAuthorOutput`),
and keeps its expected calls as written besides their names.

    output = TrusteeToolOutput.read({"result": {"a": 1}, "reward": "0.5"})  # result "{'a': 1}", reward 0.5
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    field_validator,
    model_validator,
)


def _ternary(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("reward must be -1, 0 or 1, not a boolean")
    if isinstance(value, str) and value.strip() in {"-1", "0", "1"}:
        return int(value.strip())
    if isinstance(value, float) and value in (-1.0, 0.0, 1.0):
        return int(value)
    return value


def _json_text(value: Any) -> Any:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value


Ternary = Annotated[Literal[-1, 0, 1], BeforeValidator(_ternary)]
ResultText = Annotated[str, BeforeValidator(_json_text)]


class _Output(BaseModel):
    model_config = ConfigDict(extra="ignore")


class AuthorOutput(_Output):
    expected_tool_calls: list[str]
    user_intent: str = Field(min_length=1)
    user_persona: str = Field(min_length=1)
    first_user_query: str = Field(min_length=1)

    @field_validator("expected_tool_calls", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        # Models sometimes write [{"name": ...}] instead of ["..."]; the names are what counts.
        if isinstance(value, list):
            return [v.get("name") if isinstance(v, dict) else v for v in value]
        return value

    @field_validator("first_user_query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("first_user_query is blank")
        return value

    def check_against(self, offered: set[str], abstain: bool) -> None:
        unknown = [name for name in self.expected_tool_calls if name not in offered]
        if unknown:
            raise ValueError(f"expected_tool_calls names tools that are not offered: {unknown}")
        if abstain and self.expected_tool_calls:
            raise ValueError("an abstention task must expect no tool call")
        if not abstain and not self.expected_tool_calls:
            raise ValueError("expected_tool_calls is empty, but this task needs at least one call")


class ToolOutput(_Output):
    result: ResultText
    reward: Ternary
    is_error: bool = False


class UserOutput(_Output):
    response: str
    reward: Ternary


class VerifierOutput(_Output):
    reward: Ternary
    reasoning: str


class TrusteeAuthorOutput(_Output):
    """Only a non-blank first query is required; expected calls that are not a list become [] (unchecked).

    `expected_tool_calls` holds their names (what the rest of the project compares); `calls_as_written` the list
    as the author wrote it, which TRUSTEE hands its verifier unchanged."""

    expected_tool_calls: list[str] = Field(default_factory=list)
    calls_as_written: list[JsonValue] = Field(default_factory=list)
    user_intent: str = ""
    user_persona: str = ""
    first_user_query: str = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _keep_as_written(cls, data: Any) -> Any:
        if isinstance(data, dict):
            calls = data.get("expected_tool_calls")
            data = {**data, "calls_as_written": calls if isinstance(calls, list) else []}
        return data

    @field_validator("expected_tool_calls", mode="before")
    @classmethod
    def _names(cls, value: Any) -> list[str]:
        if not isinstance(value, list):
            return []
        return [str(v.get("name")) if isinstance(v, dict) else str(v) for v in value]

    @field_validator("user_intent", "user_persona", mode="before")
    @classmethod
    def _text(cls, value: Any) -> str:
        return "" if value is None else str(value)

    @field_validator("first_user_query", mode="before")
    @classmethod
    def _stripped(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else value


def _trustee_reward(answer: dict[str, Any]) -> float:
    try:
        reward = float(answer["reward"])
    except TypeError as err:  # null, a list or an object
        raise ValueError(f"reward is not a number: {err}") from err
    except OverflowError as err:  # an integer too large for a float; TRUSTEE would not catch it at all
        raise ValueError(f"reward is out of a float's range: {err}") from err
    # NaN fails both comparisons, so it is clamped too, and comes out as 1.0 (min() keeps its first argument).
    return reward if -1 <= reward <= 1 else max(-1.0, min(1.0, reward))


def _trustee_object(answer: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(answer, dict):
        raise ValueError(f"the answer must be a dict (a JSON object), got {type(answer).__name__}")
    for key in keys:
        if key not in answer:
            raise ValueError(f"the answer lacks the '{key}' field")
    return answer


@dataclass(frozen=True)
class TrusteeToolOutput:
    """`result` shown to the policy as `str()` of the value; `is_error` is not TRUSTEE's and read only if true."""

    result: str
    reward: float
    is_error: bool = False

    @classmethod
    def read(cls, answer: Any) -> TrusteeToolOutput:
        """Raises: ValueError (a `validation` failure)."""
        answer = _trustee_object(answer, ("result", "reward"))
        return cls(str(answer["result"]), _trustee_reward(answer), answer.get("is_error") is True)


@dataclass(frozen=True)
class TrusteeUserOutput:
    response: str
    reward: float

    @classmethod
    def read(cls, answer: Any) -> TrusteeUserOutput:
        """Raises: ValueError (a `validation` failure)."""
        answer = _trustee_object(answer, ("response", "reward"))
        return cls(str(answer["response"]), _trustee_reward(answer))


@dataclass(frozen=True)
class TrusteeVerifierOutput:
    """Only the reward counts; a `reasoning` is kept for the record when there is one, never required."""

    reward: float
    reasoning: str = ""

    @classmethod
    def read(cls, answer: Any) -> TrusteeVerifierOutput:
        """Raises: ValueError (a `validation` failure)."""
        answer = _trustee_object(answer, ("reward",))
        reasoning = answer.get("reasoning")
        return cls(_trustee_reward(answer), "" if reasoning is None else str(reasoning))
