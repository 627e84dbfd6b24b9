"""The FastAPI application: four role endpoints, liveness and readiness, metrics and OpenAPI docs.

    app = create_app(SimulatorSettings(run="demo"))                # scripted backend, default library
    TestClient(app).post("/v1/task", json={"task_key": "g0", "difficulty": {...}})

Health: `/health/live` is liveness (the process serves HTTP; it checks nothing else, so a supervisor restarts
the service only when it is truly stuck); `/health/ready`, and `/health` with it, is readiness (role calls
can be answered now: every upstream of the llm backend answers its probe and the record folder is writable),
which the container health check and the trainer's pre-flight use; `/v1/ready` is the same readiness behind
the bearer token, so one request tells the trainer the token is accepted too. Every health answer names the
mode the simulator plays (and, in mode trustee, the TRUSTEE commit), which the trainer checks against its own.

Every request takes one path: the middleware `HttpLimits` (token, body size, JSON depth and text, installed
once), FastAPI's router, the route, the app's exception handlers. The POST routes (task, tool, user, verify,
gold) are `ContractRoute`s: their body is validated by pydantic straight from the bytes and their answer
serialised by pydantic, past FastAPI's per-request dependency solving (the tool, user and verify calls are the
hot loop of training); a bad body gets the 422 FastAPI would list for it (`contract_route`).

Status codes: 200 for every role call, aborted or not (the outcome is in the body); 401 without the bearer
token; 409 for a task key reused with other settings; 413 for an oversized body; 422 naming the bad field (at
most `contract_route.MAX_ERRORS`, 20, of them, each input cut to 200 characters), for JSON nested deeper than
`max_json_depth`, or for a tool/user/verify/gold request whose `task_key` this simulator never issued; 500
only for an infrastructure fault outside the backend (e.g. the record file cannot be written); 503 from
readiness while it fails (the body names each failing check: an upstream and its error, the record folder).
No error body names a path on the server.
"""

from __future__ import annotations

import logging
import os
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse

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
from toolcanary.simulator.contract_route import ContractRoute, validation_error_response
from toolcanary.simulator.http_limits import HttpLimits
from toolcanary.simulator.library_index import LibraryIndex
from toolcanary.simulator.metrics import EXPOSITION_CONTENT_TYPE, Metrics
from toolcanary.simulator.records import RecordStore
from toolcanary.simulator.service import SimulatorService, TaskNotIssued
from toolcanary.simulator.settings import SimulatorSettings
from toolcanary.simulator.task_registry import TaskKeyConflict

log = logging.getLogger(__name__)
_ERRORS = {code: {"model": ErrorBody} for code in (401, 409, 413, 422)}


def build_backend(settings: SimulatorSettings, index: LibraryIndex, metrics: Metrics) -> Backend:
    if settings.backend == "llm":
        from toolcanary.simulator.llm import LlmBackend  # only the llm backend needs httpx

        return LlmBackend(settings, index, metrics)
    from toolcanary.simulator.scripted import ScriptedBackend

    return ScriptedBackend(index, settings.seed)


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

    app = FastAPI(title="ToolCanary simulator", version=CONTRACT_VERSION, lifespan=lifespan,
                  description="Task author, tool, user and verifier for multi-turn tool-use RL.")
    app.state.service = service
    app.add_exception_handler(RequestValidationError, lambda _, exc: validation_error_response(exc.errors()))

    @app.exception_handler(TaskKeyConflict)
    async def _conflict(_: Request, exc: TaskKeyConflict) -> JSONResponse:
        body = ErrorBody(error=str(exc), detail=[{"field": "task_key", "expected": exc.before.model_dump(),
                                                   "got": exc.now.model_dump()}])
        return JSONResponse(status_code=409, content=body.model_dump())

    app.add_exception_handler(TaskNotIssued, lambda _, exc: _not_issued(exc))
    app.add_exception_handler(Exception, lambda _, exc: _fault(exc))

    # The role routes first: the router tries routes in order, and these take nearly every request.
    roles = APIRouter(route_class=ContractRoute, responses=_ERRORS)

    @roles.post("/v1/tool")
    async def tool(request: ToolRequest) -> ToolResponse:
        return await service.tool(request)

    @roles.post("/v1/user")
    async def user(request: UserRequest) -> UserResponse:
        return await service.user(request)

    @roles.post("/v1/verify")
    async def verify(request: VerifyRequest) -> VerifyResponse:
        return await service.verify(request)

    @roles.post("/v1/task")
    async def task(request: TaskRequest) -> TaskResponse:
        return await service.task(request)

    @roles.post("/v1/gold", summary="The ideal conversation for a task, played against the scripted tool and user roles")
    async def gold(request: GoldRequest) -> GoldResponse:
        # Any backend serves it: the gold agent plays against the scripted roles and this library's result hints.
        from toolcanary.simulator.scripted import gold_trajectory

        task = service.resolve(request.task_key)
        try:
            return GoldResponse(messages=gold_trajectory(task, index))
        except RuntimeError as err:
            return GoldResponse(outcome="aborted", abort_cause="validation", abort_detail=str(err)[:500])

    app.include_router(roles)

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
        return PlainTextResponse(metrics.render(), media_type=EXPOSITION_CONTENT_TYPE)

    app.add_middleware(HttpLimits, max_body_bytes=settings.max_body_bytes, token=settings.token,
                       max_json_depth=settings.max_json_depth)
    return app
