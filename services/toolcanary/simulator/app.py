"""The FastAPI application: four role endpoints, liveness and readiness, metrics and OpenAPI docs.

    app = create_app(SimulatorSettings(run="demo"))                # scripted backend, default library
    TestClient(app).post("/v1/task", json={"task_key": "g0", "difficulty": {...}})

Health: `/health/live` is liveness (the process serves HTTP; it checks nothing else, so a supervisor restarts
the service only when it is truly stuck); `/health/ready`, and `/health` with it, is readiness (role calls
can be answered now: every upstream of the llm backend answers its probe and the record folder is writable),
which the container health check and the trainer's pre-flight use; `/v1/ready` is the same readiness behind
the bearer token, so one request tells the trainer the token is accepted too. Every health answer names the
mode the simulator plays (and, in mode trustee, the TRUSTEE commit), which the trainer checks against its own.

The tool, user, verify and gold calls take a direct path (`RoleCalls`): they are the hot loop of training
(the task route runs once per GRPO group), so a POST to one of them goes through the same guards and then
straight to the service, without Starlette's middleware stack, routing and FastAPI's per-request dependency
solving: the body is validated from its bytes by the contract model and the answer serialised straight to
bytes. The routes are still declared on the FastAPI app, so /docs and the OpenAPI schema list them as usual,
and a body that fails the fast parse is parsed again the way FastAPI parses it, so a 422 names the same
fields in the same words as on every other route; every other answer (401, 413, 422, 500) is the same
function's as on the FastAPI path.

Status codes: 200 for every role call, aborted or not (the outcome is in the body); 401 without the bearer
token; 409 for a task key reused with other settings; 413 for an oversized body; 422 naming the bad field (at
most `MAX_ERRORS` of them, each input cut to 200 characters), for JSON nested deeper than `max_json_depth`,
or for a tool/user/verify/gold request whose `task_key` this simulator never issued; 500 only for an
infrastructure fault outside the backend (e.g. the record file cannot be written); 503 from readiness while it fails (the body names each failing check: an
upstream and its error, the record folder). No error body names a path on the server.
"""

from __future__ import annotations

import email.message
import json
import logging
import os
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.dependencies.utils import request_body_to_args
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from toolcanary.contract import (
    CONTRACT_VERSION,
    GoldRequest,
    GoldResponse,
    Health,
    TaskRequest,
    TaskResponse,
    ToolRequest,
    ToolResponse,
    UserRequest,
    UserResponse,
    VerifyRequest,
    VerifyResponse,
)
from toolcanary.contract.simulator_api import ErrorBody
from toolcanary.simulator.backend import Backend
from toolcanary.simulator.guards import GuardMiddleware
from toolcanary.simulator.library_index import LibraryIndex
from toolcanary.simulator.metrics import Metrics
from toolcanary.simulator.records import RecordStore
from toolcanary.simulator.service import SimulatorService, TaskNotIssued
from toolcanary.simulator.settings import SimulatorSettings
from toolcanary.simulator.task_registry import TaskKeyConflict

if TYPE_CHECKING:
    from fastapi._compat import ModelField

log = logging.getLogger(__name__)
_ERRORS = {code: {"model": ErrorBody} for code in (401, 409, 413, 422)}
ROLE_PATHS = frozenset({"/v1/tool", "/v1/user", "/v1/verify", "/v1/gold"})
MAX_ERRORS = 20  # a 422 lists at most this many field errors (a huge bad body must not get a huger answer)


def build_backend(settings: SimulatorSettings, index: LibraryIndex, metrics: Metrics) -> Backend:
    if settings.backend == "llm":
        from toolcanary.simulator.llm import LlmBackend  # only the llm backend needs httpx

        return LlmBackend(settings, index, metrics)
    from toolcanary.simulator.scripted import ScriptedBackend

    return ScriptedBackend(index, settings.seed)


def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
    detail = []
    errors = exc.errors()
    for error in errors[:MAX_ERRORS]:
        loc, kind = error.get("loc", ()), error.get("type", "")
        if kind == "json_invalid":
            position = loc[1] if len(loc) > 1 else "?"
            detail.append({"field": "body", "expected": f"valid JSON (decode error at position {position})",
                           "type": kind, "got": str(error.get("ctx", {}).get("error", ""))[:200]})
            continue
        field = ".".join(str(part) for part in loc if part != "body") or "body"
        detail.append({"field": field, "expected": error.get("msg", ""), "type": kind,
                       "got": repr(error.get("input"))[:200]})
    first = detail[0] if detail else {"field": "body", "expected": "a JSON body", "got": "nothing"}
    more = f"; {len(errors)} errors in all, the first {MAX_ERRORS} listed" if len(errors) > MAX_ERRORS else ""
    message = (f"invalid request: field '{first['field']}': {first['expected']} (got {first['got']}){more}; "
               "see /docs for the request schema")
    return JSONResponse(status_code=422, content=ErrorBody(error=message, detail=detail).model_dump())


def _not_issued(exc: TaskNotIssued) -> JSONResponse:
    body = ErrorBody(error=str(exc), detail=[{"field": "task_key", "expected": "a key /v1/task answered",
                                               "got": repr(exc.key)[:200]}])
    return JSONResponse(status_code=422, content=body.model_dump())


def _fault(exc: Exception) -> JSONResponse:
    # Role calls never get here (the service records backend failures as aborted calls); this is for
    # infrastructure faults such as a full disk, which must not pass silently.
    # The message stays in the log: it can name server paths (a record file), which a client must not see.
    log.error("simulator fault outside a role call", exc_info=exc)
    return JSONResponse(status_code=500, content=ErrorBody(
        error=f"simulator fault: {type(exc).__name__}; see the service log for the cause").model_dump())


def _is_json(content_type: str | None) -> bool:
    """Whether FastAPI parses a body of this content type as JSON (application/json or application/*+json)."""
    if not content_type:
        return False
    header = email.message.Message()
    header["content-type"] = content_type
    subtype = header.get_content_subtype()
    return header.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


async def _parse_as_fastapi(field: ModelField, body: bytes, content_type: str | None) -> BaseModel:
    """`body` parsed and validated by FastAPI's own code for a body parameter, raising the
    RequestValidationError FastAPI raises, so that a refused request gets the same 422 as on any route."""
    value: object = None
    if body:
        value = body
        if _is_json(content_type):
            try:
                value = json.loads(body)
            except json.JSONDecodeError as err:
                raise RequestValidationError([{"type": "json_invalid", "loc": ("body", err.pos),
                                               "msg": "JSON decode error", "input": {}, "ctx": {"error": err.msg}}],
                                             body=err.doc) from err
    values, errors = await request_body_to_args([field], value, embed_body_fields=False)
    if errors:
        raise RequestValidationError(errors, body=value)
    return values[field.name]


class RoleCalls:
    """The ASGI app answering POSTs to the role routes: the contract model parses the body bytes, the endpoint
    answers, the answer is serialised to bytes; refusals and faults get the FastAPI path's answers."""

    def __init__(self, routes: dict[str, APIRoute]) -> None:
        self.routes = {path: (route.body_field, route.endpoint) for path, route in routes.items()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        field, endpoint = self.routes[scope["path"]]
        model: type[BaseModel] = field.field_info.annotation
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        content_type = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"content-type"), None)
        try:
            parsed = None
            if body and (content_type == "application/json" or str(content_type).startswith("application/json;")):
                try:
                    parsed = model.model_validate_json(body)
                except ValidationError:
                    pass  # parsed again below, so that the 422 names the problem as FastAPI does
            if parsed is None:
                parsed = await _parse_as_fastapi(field, body, content_type)
            answer: BaseModel = await endpoint(parsed)
            response = Response(answer.model_dump_json(), media_type="application/json")
        except RequestValidationError as exc:
            response = _validation_error(None, exc)
        except TaskNotIssued as exc:
            response = _not_issued(exc)
        except Exception as exc:  # noqa: BLE001 - answered as the FastAPI path answers it: a logged 500
            response = _fault(exc)
        await response(scope, receive, send)


class SimulatorApp(FastAPI):
    """The FastAPI app, with POSTs to the role routes sent down the guarded `RoleCalls` path."""

    role_calls: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.role_calls is not None and scope["type"] == "http" and scope["method"] == "POST" \
                and scope["path"] in ROLE_PATHS:
            await self.role_calls(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)


def create_app(settings: SimulatorSettings, backend: Backend | None = None) -> FastAPI:
    """The app for `settings`; `backend` replaces the one the settings name (tests, benchmarks)."""
    index = LibraryIndex(settings.library)
    metrics = Metrics()
    backend = backend or build_backend(settings, index, metrics)
    store = RecordStore(settings.records_dir)
    store.note_library(settings, index)
    service = SimulatorService(settings, backend, store, metrics)
    log.info("simulator: backend=%s run=%s library=%s (%s) records=%s tasks reloaded=%d",
             backend.name, settings.run, settings.library, index.describe(), settings.records_dir,
             len(service.registry))
    if index.left_out:
        log.warning("library %s: %d entries left out, not usable as tools (docs/simulator.md): %s",
                    settings.library, len(index.left_out), index.left_out_summary())

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        yield
        await backend.aclose()
        store.close()
        service.registry.close()

    app = SimulatorApp(title="ToolCanary simulator", version=CONTRACT_VERSION, lifespan=lifespan,
                  description="Task author, tool, user and verifier for multi-turn tool-use RL.")
    app.state.service = service
    app.add_exception_handler(RequestValidationError, _validation_error)

    @app.exception_handler(TaskKeyConflict)
    async def _conflict(_: Request, exc: TaskKeyConflict) -> JSONResponse:
        body = ErrorBody(error=str(exc), detail=[{"field": "task_key", "expected": exc.before.model_dump(),
                                                   "got": exc.now.model_dump()}])
        return JSONResponse(status_code=409, content=body.model_dump())

    app.add_exception_handler(TaskNotIssued, lambda _, exc: _not_issued(exc))
    app.add_exception_handler(Exception, lambda _, exc: _fault(exc))

    # Whose rules this process plays: the checkout's files were verified against trustee_commit and imported at
    # start, so that commit is the one played, whatever is checked out there later.
    rules = {"mode": settings.mode, "trustee_commit": settings.trustee_commit if settings.mode == "trustee" else None}

    async def ready() -> Health | JSONResponse:
        # 503 while a role call could not be answered: a container health check must not call a simulator
        # healthy whose every role call would end aborted (upstream down) or in a 500 (records unwritable).
        down = await backend.unavailable()
        failing = {d["upstream"] for d in down}
        problems, errors = list(down), []  # {"upstream", "probe", "error"} each, as the backend reports them
        if down:
            names = "; ".join(f"{d['upstream']} ({d['probe']}: {d['error']})" for d in down)
            errors.append(f"upstream not healthy: {names}; role calls would be aborted until it answers")
        upstreams = [f"upstream {n}" for n in range(1, len(settings.upstreams) + 1)]
        checks = [f"{u} answers its health probe" for u in upstreams if u not in failing] \
            if backend.name == "llm" else ["the scripted backend needs no upstream"]
        records = settings.records_dir
        if records.is_dir() and os.access(records, os.W_OK):
            checks.append("the record folder is writable")
        else:
            # The path is logged, not answered: /health is open to anyone who reaches the port.
            log.error("record folder %s is not a writable folder", records)
            problems.append({"check": "records", "error": "not a writable folder"})
            errors.append(f"the record folder (<runs>/{settings.run}/simulator) is not a writable folder; every "
                          "role call would be a 500 (the service log names the path)")
        if problems:
            return JSONResponse(status_code=503, content=ErrorBody(
                error="simulator unavailable: " + "; ".join(errors), detail=problems).model_dump())
        return Health(contract_version=CONTRACT_VERSION, backend=backend.name, run=settings.run, probe="ready",
                      checks=checks, **rules)

    ready_responses = {503: {"model": ErrorBody}}
    app.get("/health", response_model=Health, responses=ready_responses,
            summary="Readiness (the same as /health/ready)")(ready)
    app.get("/health/ready", response_model=Health, responses=ready_responses,
            summary="Readiness: role calls can be answered now")(ready)
    app.get("/v1/ready", response_model=Health, responses={**ready_responses, 401: {"model": ErrorBody}},
            summary="Readiness behind the bearer token: the trainer's pre-flight")(ready)

    @app.get("/health/live", response_model=Health, summary="Liveness: the process serves HTTP")
    async def live() -> Health:
        return Health(contract_version=CONTRACT_VERSION, backend=backend.name, run=settings.run, probe="live",
                      **rules)

    @app.get("/metrics", response_class=PlainTextResponse)
    async def prometheus() -> PlainTextResponse:
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4")

    @app.post("/v1/task", response_model=TaskResponse, responses=_ERRORS)
    async def task(request: TaskRequest) -> TaskResponse:
        return await service.task(request)

    @app.post("/v1/tool", response_model=ToolResponse, responses=_ERRORS)
    async def tool(request: ToolRequest) -> ToolResponse:
        return await service.tool(request)

    @app.post("/v1/user", response_model=UserResponse, responses=_ERRORS)
    async def user(request: UserRequest) -> UserResponse:
        return await service.user(request)

    @app.post("/v1/verify", response_model=VerifyResponse, responses=_ERRORS)
    async def verify(request: VerifyRequest) -> VerifyResponse:
        return await service.verify(request)

    @app.post("/v1/gold", response_model=GoldResponse, responses=_ERRORS,
              summary="The ideal conversation for a task, played against the scripted tool and user roles")
    async def gold(request: GoldRequest) -> GoldResponse:
        # Any backend serves it: the gold agent plays against the scripted roles and this library's result hints.
        from toolcanary.simulator.scripted import gold_trajectory

        task = service.resolve(request.task_key)
        try:
            return GoldResponse(messages=gold_trajectory(task, index))
        except RuntimeError as err:
            return GoldResponse(outcome="aborted", abort_cause="validation", abort_detail=str(err)[:500])

    guards = {"max_body_bytes": settings.max_body_bytes, "token": settings.token,
              "max_json_depth": settings.max_json_depth}
    app.add_middleware(GuardMiddleware, **guards)
    routes = {route.path: route for route in app.routes if isinstance(route, APIRoute) and route.path in ROLE_PATHS}
    app.role_calls = GuardMiddleware(RoleCalls(routes), **guards)
    return app
