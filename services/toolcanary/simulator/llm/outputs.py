"""What each role's JSON answer must look like; a mismatch is a `validation` failure, retried like any other.

Rewards must be -1, 0 or 1 (the strings "-1", "0", "1" are accepted; booleans and other numbers are not).
A tool `result` given as an object or list is kept as its JSON text: tool results often are JSON.

The `trustee` mode reads answers as TRUSTEE's simulator does (`Trustee*Output`): only the keys it needs
(the verifier's `reasoning` is optional), any number as the reward, clamped to [-1, 1] and kept as a float (0.5
stays 0.5), the tool result and user response as text whatever their JSON type.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator


def _ternary(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("reward must be -1, 0 or 1, not a boolean")
    if isinstance(value, str) and value.strip() in {"-1", "0", "1"}:
        return int(value.strip())
    if isinstance(value, float) and value in (-1.0, 0.0, 1.0):
        return int(value)
    return value


def _clamped(value: Any) -> float:
    if isinstance(value, bool):  # float(True) is 1.0; TRUSTEE's float() would accept it, a score it is not
        raise ValueError("reward must be a number, not a boolean")
    return max(-1.0, min(1.0, float(value)))


def _json_text(value: Any) -> Any:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value


Ternary = Annotated[Literal[-1, 0, 1], BeforeValidator(_ternary)]
Clamped = Annotated[float, BeforeValidator(_clamped)]
ResultText = Annotated[str, BeforeValidator(_json_text)]
AnyText = Annotated[str, BeforeValidator(lambda value: str(_json_text(value)))]


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
    """Only a non-blank first query is required; expected calls that are not a list become [] (unchecked)."""

    expected_tool_calls: list[str] = Field(default_factory=list)
    user_intent: str = ""
    user_persona: str = ""
    first_user_query: str = Field(min_length=1)

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


class TrusteeToolOutput(_Output):
    result: AnyText
    reward: Clamped
    is_error: bool = False


class TrusteeUserOutput(_Output):
    response: AnyText
    reward: Clamped


class TrusteeVerifierOutput(_Output):
    reward: Clamped
    reasoning: str = ""
