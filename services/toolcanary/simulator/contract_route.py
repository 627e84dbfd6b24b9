"""The simulator's POST routes: one contract model in, one contract model out, handled from the bytes.

    router = APIRouter(route_class=ContractRoute)

    @router.post("/v1/tool")
    async def tool(request: ToolRequest) -> ToolResponse: ...

A `ContractRoute` is declared like any FastAPI route (its OpenAPI entry is FastAPI's, from the endpoint's
signature) and goes through the app's middleware, router and exception handlers like any other; only what
happens between the request's bytes and the endpoint, and between the endpoint's answer and the response's
bytes, is this module's: the body is validated by pydantic straight from the JSON bytes and the answer is
serialised by pydantic, without FastAPI's per-request dependency solving and its second validation of the
answer, which together cost as much CPU per role call as the role code itself (LOG.md, 2026-12-03).

A body that fails validation is read again the way FastAPI reads a body parameter (`body_errors`), so that
its 422 lists the same errors as FastAPI would: a body is parsed as JSON only when its content type is
application/json or application/*+json (with no content type it stays bytes, as under FastAPI's
`strict_content_type`); JSON that does not parse is one `json_invalid` error at the decode position; an
empty body or JSON `null` is `missing`; anything else is validated by the model in Python mode, each error's
location starting with "body". `validation_error_response` turns those errors into the contract's
`ErrorBody`, for these routes and for FastAPI's `RequestValidationError` alike.
"""

from __future__ import annotations

import email.message
import inspect
import json
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from toolcanary.contract.simulator_api import ErrorBody

MAX_ERRORS = 20  # a 422 lists at most this many field errors (a huge bad body must not get a huger answer)
MAX_INPUT_CHARS = 200  # each error quotes at most this much of what was sent


def is_json(content_type: str | None) -> bool:
    """Whether a body of this content type is read as JSON (application/json or application/*+json)."""
    if content_type == "application/json":  # what every client of the contract sends: decided without parsing
        return True
    if not content_type:
        return False
    header = email.message.Message()
    header["content-type"] = content_type
    subtype = header.get_content_subtype()
    return header.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


def body_errors(model: type[BaseModel], body: bytes, content_type: str | None) -> tuple[BaseModel | None,
                                                                                       list[dict[str, Any]]]:
    """(the request, []) or (None, the errors): `body` read as FastAPI reads a body parameter of type `model`
    (module docstring), the errors in pydantic's `ValidationError.errors()` shape, each `loc` led by "body"."""
    value: Any = None
    if body:
        value = body
        if is_json(content_type):
            try:
                value = json.loads(body)
            except json.JSONDecodeError as err:
                return None, [{"type": "json_invalid", "loc": ("body", err.pos), "msg": "JSON decode error",
                               "input": {}, "ctx": {"error": err.msg}}]
    if value is None:
        return None, [{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}]
    try:
        return model.model_validate(value, from_attributes=True), []
    except ValidationError as err:
        return None, [{**error, "loc": ("body", *error["loc"])} for error in err.errors(include_url=False)]


def validation_error_response(errors: Sequence[Mapping[str, Any]]) -> JSONResponse:
    """The 422 for a request body that failed validation: `error` names the first bad field, `detail` lists at
    most `MAX_ERRORS` of them (field, what it takes, the error type, what came, cut to `MAX_INPUT_CHARS`)."""
    detail = []
    for error in errors[:MAX_ERRORS]:
        loc, kind = error.get("loc", ()), error.get("type", "")
        if kind == "json_invalid":
            position = loc[1] if len(loc) > 1 else "?"
            detail.append({"field": "body", "expected": f"valid JSON (decode error at position {position})",
                           "type": kind, "got": str(error.get("ctx", {}).get("error", ""))[:MAX_INPUT_CHARS]})
            continue
        field = ".".join(str(part) for part in loc if part != "body") or "body"
        detail.append({"field": field, "expected": error.get("msg", ""), "type": kind,
                       "got": repr(error.get("input"))[:MAX_INPUT_CHARS]})
    first = detail[0] if detail else {"field": "body", "expected": "a JSON body", "got": "nothing"}
    more = f"; {len(errors)} errors in all, the first {MAX_ERRORS} listed" if len(errors) > MAX_ERRORS else ""
    message = (f"invalid request: field '{first['field']}': {first['expected']} (got {first['got']}){more}; "
               "see /docs for the request schema")
    return JSONResponse(status_code=422, content=ErrorBody(error=message, detail=detail).model_dump())


class ContractRoute(APIRoute):
    """A POST route whose endpoint takes one contract model and returns one (module docstring)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        parameters = list(inspect.signature(self.endpoint, eval_str=True).parameters.values())
        model = parameters[0].annotation if len(parameters) == 1 else None
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise TypeError(f"{self.path}: a ContractRoute endpoint takes exactly one parameter, annotated with a "
                            f"pydantic model; got {[str(p) for p in parameters]}")
        endpoint = self.endpoint

        async def handle(request: Request) -> Response:
            body = await request.body()
            content_type = request.headers.get("content-type")
            parsed = None
            if body and is_json(content_type):
                try:
                    parsed = model.model_validate_json(body)
                except ValidationError:
                    pass  # read again below, so that the 422 lists the errors FastAPI would
            if parsed is None:
                parsed, errors = body_errors(model, body, content_type)
                if errors:
                    raise RequestValidationError(errors, body=body)
            answer: BaseModel = await endpoint(parsed)
            return Response(answer.model_dump_json(), media_type="application/json")

        return handle
