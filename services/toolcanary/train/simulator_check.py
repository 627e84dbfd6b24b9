"""The trainer's check of the simulator, before step 1 and before every step after it; both trainers use it.

One request, `GET <simulator>/v1/ready` with the trainer's bearer token, answers five questions: is the
simulator reachable, does it speak this contract version, does it accept the token (the route sits behind
it), does it play the trainer's mode (and, in mode trustee, the trainer's TRUSTEE commit), and can it answer
role calls now (its backend's upstreams answer and its record folder is writable).

- `check_simulator` (before step 1) stops the run with `SimulatorNotReady` on any failure, naming what was
  found and what to do: a trainer must not start a 44-hour run against a simulator that cannot serve it.
- `wait_ready` (before each later step) stops at once on what no retry can fix (a refused token, another
  contract version or mode, a URL that is not a simulator), and waits with backoff, up to `wait_s`, for a
  simulator that is down or not ready (a restart, an upstream reloading), so that no step is spent on a dead one.

    rules = TrainerRules.of(settings)       # the trainer's mode and, in mode trustee, its checkout's commit
    health = check_simulator("http://127.0.0.1:8300", rules=rules)
    wait_ready("http://127.0.0.1:8300", wait_s=1200, rules=rules)

The token is read from `TOOLCANARY_SIMULATOR_TOKEN`, as the simulator and the agent loop read it.
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx
from pydantic import ValidationError
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_delay

from toolcanary.contract import CONTRACT_VERSION
from toolcanary.contract.simulator_api import ErrorBody, Health
from toolcanary.train.faults import TrainingStopped
from toolcanary.train.simulator_client import TOKEN_ENV

if TYPE_CHECKING:
    from toolcanary.train.settings import TrainSettings

logger = logging.getLogger(__name__)
READY_PATH = "/v1/ready"


class SimulatorNotReady(TrainingStopped):
    """The simulator cannot serve this trainer. `fatal`: waiting cannot help (token, version, wrong URL)."""

    def __init__(self, reason: str, fix: str, fatal: bool) -> None:
        self.fatal = fatal
        super().__init__(reason, fix)


@dataclass(frozen=True)
class TrainerRules:
    """What the simulator must share with the trainer: the mode; in mode trustee, the TRUSTEE commit
    (`trustee_commit`, which the trainer's checkout is verified against when its agent loop opens it); and the
    run, since the simulator files the run's tasks and role calls under its own run's folder, where this run's
    audit looks for them (None: not checked)."""

    mode: str
    trustee_commit: str | None = None
    run: str | None = None

    @classmethod
    def of(cls, settings: TrainSettings) -> TrainerRules:
        return cls(settings.mode, settings.trustee_commit if settings.mode == "trustee" else None, settings.run)


def _error_of(answer: httpx.Response) -> str:
    try:
        return ErrorBody.model_validate_json(answer.text).error
    except ValidationError:
        return answer.text[:300]


def _stated_version(text: str) -> str | None:
    """The contract version a health answer states, read without validating the rest: a simulator of another
    version answers another Health shape, and its version is what decides the fix."""
    try:
        body = json.loads(text)
    except ValueError:
        return None
    version = body.get("contract_version") if isinstance(body, dict) else None
    return version if isinstance(version, str) else None


def check_simulator(url: str, timeout_s: float = 10.0, token: str | None = None,
                    rules: TrainerRules | None = None) -> Health:
    """The simulator's readiness, or `SimulatorNotReady` saying what is wrong and what to do.

    With `rules`, a simulator that plays another mode, or (both in mode trustee) another TRUSTEE commit than
    the trainer's checkout, is refused as well; without, its mode is not checked.
    """
    token = os.environ.get(TOKEN_ENV) if token is None else token
    base = url.rstrip("/")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    where = f"the simulator at {base}"
    try:
        answer = httpx.get(f"{base}{READY_PATH}", headers=headers, timeout=timeout_s)
    except httpx.TimeoutException as err:
        raise SimulatorNotReady(f"{where} did not answer {READY_PATH} within {timeout_s:g} s ({type(err).__name__})",
                                "Check that it is running and not overloaded", fatal=False) from None
    except httpx.TransportError as err:
        raise SimulatorNotReady(
            f"cannot reach {where}: {type(err).__name__}: {err}",
            "Start it (python -m toolcanary.simulator serve ...) or point --simulator-url / "
            "TOOLCANARY_TRAIN_SIMULATOR_URL at it", fatal=False) from None
    if answer.status_code in (401, 403):
        sent = "sent a token it does not accept" if token else "sent no token and it requires one"
        raise SimulatorNotReady(
            f"{where} refused the trainer (HTTP {answer.status_code}): the trainer {sent}",
            f"Set {TOKEN_ENV} in the trainer's environment to the value the simulator was started with",
            fatal=True)
    if answer.status_code == 404:
        raise _not_this_contract(base, timeout_s)
    if answer.status_code == 503:
        raise SimulatorNotReady(f"{where} is not ready: {_error_of(answer)}",
                                "Fix what it names (curl its /health/ready), or wait until it is ready", fatal=False)
    if answer.status_code != 200:
        raise SimulatorNotReady(f"{where} answered {READY_PATH} with HTTP {answer.status_code}: {_error_of(answer)}",
                                "See the simulator's log", fatal=False)
    theirs = _stated_version(answer.text)
    if theirs is not None and theirs != CONTRACT_VERSION:
        raise _version_mismatch(base, theirs)
    try:
        health = Health.model_validate_json(answer.text)
    except ValidationError as err:
        raise SimulatorNotReady(f"{where} answered {READY_PATH} with something that is not a Health: "
                                f"{str(err)[:200]}", "Point the trainer at a ToolCanary simulator", fatal=True) from None
    if rules is not None:
        _check_rules(base, health, rules)
    return health


def _check_rules(base: str, health: Health, rules: TrainerRules) -> None:
    """Refuse a simulator that plays other rules than the trainer, or files another run: the policy would be
    trained against the wrong prompts and tool library, or its tasks recorded where its audit never looks, and
    nothing downstream would notice."""
    if rules.run is not None and health.run != rules.run:
        raise SimulatorNotReady(
            f"the simulator at {base} serves run {health.run!r}, this trainer trains run {rules.run!r}: this run's "
            f"tasks and role calls would be recorded under {health.run!r}, where its audit and reports never look",
            f"Start the simulator with --run {rules.run} (TOOLCANARY_SIMULATOR_RUN; in the Compose stack RUN in .env "
            f"sets both), or give the trainer --run {health.run} (TOOLCANARY_TRAIN_RUN)", fatal=True)
    if health.mode != rules.mode:
        plays = {"trustee": "TRUSTEE's prompts and ToolBench library", "toolcanary": "the project's own prompts "
                 "and tool library"}
        start = ("python -m toolcanary.simulator serve --backend llm --mode trustee --trustee-dir <TRUSTEE checkout>"
                 if rules.mode == "trustee" else "python -m toolcanary.simulator serve --mode toolcanary")
        raise SimulatorNotReady(
            f"the simulator at {base} plays mode {health.mode} ({plays.get(health.mode, 'unknown rules')}), but "
            f"this trainer runs mode {rules.mode} and needs a simulator of the same mode",
            f"Start the simulator in mode {rules.mode} ({start}, or TOOLCANARY_SIMULATOR_MODE={rules.mode}; in the "
            f"Compose stack STACK_MODE={rules.mode} in .env sets both), or give the trainer --mode {health.mode} "
            "(TOOLCANARY_TRAIN_MODE) to train against this one", fatal=True)
    if rules.mode == "trustee" and rules.trustee_commit is not None and health.trustee_commit != rules.trustee_commit:
        raise SimulatorNotReady(
            f"the simulator at {base} plays TRUSTEE at commit {health.trustee_commit or '(none stated)'}, this "
            f"trainer's checkout is at {rules.trustee_commit}: the policy's system prompts and the roles' prompts "
            "would come from different TRUSTEE versions",
            f"Point both at one checkout at commit {rules.trustee_commit} (the simulator's --trustee-dir or "
            "TOOLCANARY_SIMULATOR_TRUSTEE_DIR, the trainer's TOOLCANARY_TRAIN_TRUSTEE_DIR; TRUSTEE_DIR in .env for "
            "the stack; --trustee-commit on both when it is not the pinned one) and restart the one that differs",
            fatal=True)


def _version_mismatch(base: str, theirs: str) -> SimulatorNotReady:
    return SimulatorNotReady(
        f"the simulator at {base} speaks contract {theirs}, this trainer contract {CONTRACT_VERSION}: requests "
        "and records would not mean the same thing on both sides",
        "Run a simulator and a trainer built from the same ToolCanary version (rebuild the older image)", fatal=True)


def _not_this_contract(base: str, timeout_s: float) -> SimulatorNotReady:
    """A 404 on /v1/ready: an older simulator (no such route) or no simulator at all; /health tells which."""
    try:
        answer = httpx.get(f"{base}/health", timeout=timeout_s)
        theirs = _stated_version(answer.text) if answer.status_code == 200 else None
    except httpx.HTTPError:
        theirs = None
    if theirs is not None and theirs != CONTRACT_VERSION:
        return _version_mismatch(base, theirs)
    return SimulatorNotReady(
        f"{base} has no {READY_PATH}: it is not a ToolCanary simulator of contract {CONTRACT_VERSION}",
        "Point --simulator-url / TOOLCANARY_TRAIN_SIMULATOR_URL at the simulator (port 8300 by default)", fatal=True)


def wait_ready(url: str, wait_s: float, *, before: str = "the next step", poll_s: float = 0.5,
               timeout_s: float = 10.0, rules: TrainerRules | None = None) -> Health:
    """Wait (with backoff, at most `wait_s` seconds) until the simulator is ready; stop at once on a fatal fault
    (a simulator restarted in another mode is one: `rules` as for `check_simulator`).

    Raises:
        SimulatorNotReady: fatal at once; not ready after `wait_s`, naming the last problem.
    """
    waited_since: list[float] = []

    def first_failure(state: RetryCallState) -> None:
        if not waited_since:
            waited_since.append(time.monotonic())
            logger.warning("%s; waiting up to %g s before %s", state.outcome.exception().reason, wait_s, before)

    def backoff(state: RetryCallState) -> float:
        # Doubling from poll_s, at most 15 s, jittered so that restarted trainers do not poll in step, and
        # never past the deadline.
        delay = poll_s if state.attempt_number == 1 else min(poll_s * 2 ** (state.attempt_number - 1), 15.0)
        return min(delay * random.uniform(0.5, 1.0), max(0.0, wait_s - state.seconds_since_start))

    retrying = Retrying(retry=retry_if_exception(lambda err: isinstance(err, SimulatorNotReady) and not err.fatal),
                        stop=stop_after_delay(wait_s), wait=backoff, after=first_failure, reraise=True)
    try:
        health = retrying(check_simulator, url, timeout_s=timeout_s, rules=rules)
    except SimulatorNotReady as err:
        if err.fatal:
            raise
        raise SimulatorNotReady(f"{err.reason}, for {time.monotonic() - waited_since[0]:.0f} s before {before}",
                                err.fix, fatal=False) from None
    if waited_since:
        logger.info("the simulator at %s is ready again after %.1f s", url, time.monotonic() - waited_since[0])
    return health
