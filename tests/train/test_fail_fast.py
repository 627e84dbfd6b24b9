"""The CPU run fails fast on what retrying cannot fix, and never trains quietly on nothing.

- The simulator client: 413 and 422 abort that episode with their cause (one request each); 5xx and 429 are
  retried with backoff, then abort with cause `upstream`; a 401 aborts with `auth` and later calls of the
  same client fail at once, without a request.
- Drill (pre-flight): a wrong token, another contract version, an upstream that is down at start: the trainer
  refuses to start, exit status 3, with a message that names the fault and the fix; nothing is trained.
- Drill (mode): a simulator that plays the other mode (toolcanary for a trustee trainer, and the reverse) is
  refused the same way, naming both modes and the flag to start it with; so is, in mode trustee, a simulator
  of another TRUSTEE commit than the trainer's checkout. A simulator of the trainer's mode and commit passes.
- A token refused in the middle of the run stops it before that step's update, the last step saved.
- Drill (circuit breaker): every episode aborting (the simulator answers 500) stops the run after
  max_aborted_steps steps, naming the causes and counts; the rerun after the fix resumes, no row twice.

Run: .venvs/train/bin/python -m pytest tests/train/test_fail_fast.py -q
"""

from __future__ import annotations

import asyncio

import pytest
from drills import SMALL, SimulatorProcess, free_port, metrics_rows, train
from sim_stub import StubBehaviour, StubSimulator

from toolcanary.common.trustee_checkout import PINNED_COMMIT
from toolcanary.contract import CONTRACT_VERSION
from toolcanary.contract.csv_schemas import read_train_metrics
from toolcanary.contract.hermes import parse_assistant_text
from toolcanary.contract.simulator_api import TaskRequest, ToolRequest
from toolcanary.contract.tasks import DifficultySettings
from toolcanary.train.settings import TrainSettings
from toolcanary.train.simulator_check import SimulatorNotReady, TrainerRules, check_simulator, wait_ready
from toolcanary.train.simulator_client import RoleTimeouts, SimulatorClient

STUB_RUN = [*SMALL, "--no-warm-start", "--save-every", "1"]
REQUEST = TaskRequest(task_key="k", difficulty=DifficultySettings(num_tools=1, expected_calls=1, user_persona=0,
                                                                  query_ambiguity=0, expected_turns=0))


def _task_calls(behaviour: StubBehaviour, calls: int = 1) -> tuple[list, int]:
    async def go(url):
        async with SimulatorClient(url, RoleTimeouts(task=5), retries=2, backoff_s=0.01) as client:
            return [await client.task(REQUEST) for _ in range(calls)]

    with StubSimulator(behaviour) as sim:
        answers = asyncio.run(go(sim.url))
        return answers, len(sim.requests["task"])


@pytest.mark.parametrize("status, cause", [(413, "too_large"), (422, "rejected"), (409, "rejected")])
def test_a_4xx_that_describes_one_bad_request_aborts_that_call_once_with_its_cause(status, cause):
    [answer], sent = _task_calls(StubBehaviour(fail={"task": f"http{status}"}))
    assert answer.outcome == "aborted" and answer.abort_cause == cause and sent == 1
    assert f"HTTP {status}" in answer.abort_detail and f"stub failure http{status}" in answer.abort_detail


@pytest.mark.parametrize("status", [500, 503, 429])
def test_5xx_and_429_are_retried_with_backoff_then_abort_as_upstream(status):
    [answer], sent = _task_calls(StubBehaviour(fail={"task": f"http{status}"}))
    assert answer.outcome == "aborted" and answer.abort_cause == "upstream" and sent == 3


def test_a_policy_call_decoded_to_a_lone_surrogate_is_rejected_once_by_the_real_simulator(scripted_url):
    """The Hermes parser turns the text "\\ud800" into a lone surrogate; the simulator answers 422 before its
    backend runs, and the client records the request's fault once instead of retrying an `upstream` 500."""
    turn = parse_assistant_text('<tool_call>{"name": "get_weather", "arguments": {"city": "\\ud800"}}</tool_call>')
    [call] = turn.tool_calls
    assert call.function.arguments == {"city": "\ud800"}

    async def go():
        async with SimulatorClient(scripted_url, RoleTimeouts(task=30, tool=30), retries=2, backoff_s=0.01) as client:
            task = await client.task(REQUEST.model_copy(update={"task_key": "lone-surrogate-1"}))
            answer = await client.tool(ToolRequest(task_key="lone-surrogate-1", call=call))
            return task, answer, client.retried

    task, answer, retried = asyncio.run(go())
    assert task.outcome == "ok"
    assert (answer.outcome, answer.abort_cause, retried) == ("aborted", "rejected", 0)
    assert "HTTP 422" in answer.abort_detail and "surrogate" in answer.abort_detail


def test_a_refused_token_aborts_as_auth_and_the_client_sends_nothing_more(monkeypatch):
    monkeypatch.setenv("TOOLCANARY_SIMULATOR_TOKEN", "wrong")  # the client reads it as the service does
    answers, sent = _task_calls(StubBehaviour(token="right"), calls=3)
    assert [a.abort_cause for a in answers] == ["auth"] * 3 and sent == 1
    assert "HTTP 401" in answers[2].abort_detail


@pytest.fixture
def llm_simulator_with_upstream_down(tmp_path):
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there: connection refused
    sim = SimulatorProcess(tmp_path / "sim", "drill", "--backend", "llm", "--upstream", closed,
                           "--health-timeout-s", "0.5", "--health-cache-s", "0", ready=False).start()
    yield sim
    sim.stop()


@pytest.fixture
def simulator_with_token(tmp_path):
    sim = SimulatorProcess(tmp_path / "sim-token", env={"TOOLCANARY_SIMULATOR_TOKEN": "right-token-of-the-run"}).start()
    yield sim
    sim.stop()


def test_drill_the_trainer_refuses_to_start_on_a_wrong_token_another_contract_or_an_upstream_down(
        tmp_path, simulator_with_token, llm_simulator_with_upstream_down, drill):
    cases = []
    wrong = train(tmp_path / "token", "--run", "drill", "--steps", "2", "--simulator-url", simulator_with_token.url,
                  *STUB_RUN, TOOLCANARY_SIMULATOR_TOKEN="wrong-token")
    cases.append(("wrong token", wrong, ["refused the trainer (HTTP 401)", "sent a token it does not accept",
                                          "TOOLCANARY_SIMULATOR_TOKEN"]))
    missing = train(tmp_path / "no-token", "--run", "drill", "--steps", "2", "--simulator-url",
                    simulator_with_token.url, *STUB_RUN)
    cases.append(("no token", missing, ["sent no token and it requires one"]))
    with StubSimulator(StubBehaviour(contract_version="0.9")) as old:
        version = train(tmp_path / "version", "--run", "drill", "--steps", "2", "--simulator-url", old.url, *STUB_RUN)
    cases.append(("contract version", version, [f"speaks contract 0.9, this trainer contract {CONTRACT_VERSION}",
                                                 "same ToolCanary version"]))
    down = train(tmp_path / "upstream", "--run", "drill", "--steps", "2", "--simulator-url",
                 llm_simulator_with_upstream_down.url, *STUB_RUN)
    cases.append(("upstream down", down, ["is not ready", "upstream not healthy", "Connect"]))
    refused = 0
    for name, result, phrases in cases:
        assert_refused_to_start(name, result, phrases)
        refused += 1
    for case in ("token", "no-token", "version", "upstream"):
        assert not (tmp_path / case / "results" / "drill" / "train_metrics.csv").exists()
        assert not (tmp_path / case / "checkpoints" / "drill").exists()  # not even step 0
    drill("pre-flight", faults_injected=len(cases), refused_to_start=f"{refused} (exit 3 each: "
          f"{', '.join(n for n, _, _ in cases)})", steps_trained=0, checkpoints_published=0)


def assert_refused_to_start(name: str, result, phrases: list[str]) -> None:
    """Exit 3 with one `error: training stopped:` line holding every phrase, and no traceback."""
    assert result.returncode == 3, f"{name}: exit {result.returncode}\n{result.stderr[-2000:]}"
    message = result.stderr.strip().splitlines()[-1]
    assert message.startswith("error: training stopped: "), f"{name}: {message}"
    for phrase in phrases:
        assert phrase in message, f"{name}: {phrase!r} not in {message!r}"
    assert "Traceback" not in result.stderr, f"{name}: a traceback instead of a message"

def test_drill_the_trainer_refuses_a_simulator_of_the_other_mode(tmp_path, trustee_checkout, drill):
    trustee = ["--mode", "trustee", "--trustee-dir", str(trustee_checkout)]
    cases = []
    with StubSimulator(StubBehaviour(mode="toolcanary")) as ours:
        result = train(tmp_path / "theirs", "--run", "drill", "--simulator-url", ours.url, *trustee, *STUB_RUN)
    cases.append(("trustee trainer, toolcanary simulator", "theirs", result,
                  ["plays mode toolcanary (the project's own prompts and tool library)",
                   "this trainer runs mode trustee", "--mode trustee --trustee-dir", "STACK_MODE=trustee"]))
    with StubSimulator(StubBehaviour(mode="trustee", trustee_commit=PINNED_COMMIT)) as theirs:
        result = train(tmp_path / "ours", "--run", "drill", "--simulator-url", theirs.url, *STUB_RUN)
    cases.append(("toolcanary trainer, trustee simulator", "ours", result,
                  ["plays mode trustee (TRUSTEE's prompts and ToolBench library)", "this trainer runs mode toolcanary",
                   "serve --mode toolcanary", "STACK_MODE=toolcanary", "--mode trustee (TOOLCANARY_TRAIN_MODE)"]))
    for name, root, result, phrases in cases:
        assert_refused_to_start(name, result, phrases)
        assert not (tmp_path / root / "checkpoints" / "drill").exists()  # not even step 0
    drill("pre-flight (mode)", faults_injected=len(cases), refused_to_start=f"{len(cases)} (exit 3 each)",
          checkpoints_published=0)


def test_in_mode_trustee_a_simulator_of_another_commit_is_refused_and_one_of_the_same_passes(trustee_checkout,
                                                                                              standin_commit):
    settings = TrainSettings(mode="trustee", trustee_dir=trustee_checkout)
    rules = TrainerRules.of(settings)
    assert rules == TrainerRules("trustee", standin_commit, settings.run)  # the trainer's trustee_commit and run
    other = "0123456" + standin_commit[7:]
    with StubSimulator(StubBehaviour(mode="trustee", trustee_commit=other, run=settings.run)) as sim:
        with pytest.raises(SimulatorNotReady) as refused:
            check_simulator(sim.url, rules=rules)
        # Before a later step too, at once: no wait can make another commit the trainer's.
        with pytest.raises(SimulatorNotReady) as later:
            wait_ready(sim.url, wait_s=60, rules=rules)
    for err in (refused.value, later.value):
        assert err.fatal and f"plays TRUSTEE at commit {other}" in err.reason
        assert f"this trainer's checkout is at {standin_commit}" in err.reason
        assert f"one checkout at commit {standin_commit}" in err.fix and "TOOLCANARY_TRAIN_TRUSTEE_DIR" in err.fix
    with StubSimulator(StubBehaviour(mode="trustee", trustee_commit=standin_commit, run=settings.run)) as sim:
        health = check_simulator(sim.url, rules=rules)
        assert (health.mode, health.trustee_commit) == ("trustee", standin_commit)
        assert wait_ready(sim.url, wait_s=1, rules=rules) == health


def test_a_simulator_that_files_another_run_is_refused_and_one_of_the_same_run_passes():
    rules = TrainerRules("toolcanary", run="mine")
    with StubSimulator(StubBehaviour(run="theirs")) as sim:
        with pytest.raises(SimulatorNotReady) as refused:
            check_simulator(sim.url, rules=rules)
    assert refused.value.fatal and "serves run 'theirs', this trainer trains run 'mine'" in refused.value.reason
    assert "--run mine" in refused.value.fix and "--run theirs" in refused.value.fix
    with StubSimulator(StubBehaviour(run="mine")) as sim:
        assert check_simulator(sim.url, rules=rules).run == "mine"


def test_a_simulator_of_another_contract_version_is_told_apart_from_one_without_a_mode():
    """A simulator of an older contract answers a Health without `mode`: its version, not its shape, is the
    fault to name (the fix is to rebuild the older side)."""
    with StubSimulator(StubBehaviour(contract_version="1.4", mode=None)) as old:
        with pytest.raises(SimulatorNotReady) as refused:
            check_simulator(old.url, rules=TrainerRules("toolcanary"))
    assert f"speaks contract 1.4, this trainer contract {CONTRACT_VERSION}" in refused.value.reason


def test_a_token_refused_mid_run_stops_before_that_steps_update_with_the_last_step_saved(tmp_path):
    behaviour = StubBehaviour(fail={"task": "http401"}, fail_from_step=2)
    with StubSimulator(behaviour) as sim:
        result = train(tmp_path, "--run", "drill", "--steps", "4", "--simulator-url", sim.url, *STUB_RUN)
    assert result.returncode == 3, result.stderr[-2000:]
    message = result.stderr.strip().splitlines()[-1]
    assert "step 2: the simulator refused 4 of 4 episodes' calls with HTTP 401/403" in message
    assert "TOOLCANARY_SIMULATOR_TOKEN" in message and "the rerun continues at step 2" in message
    assert list(metrics_rows(tmp_path)) == [1]  # step 2 never reached the CSV
    assert (tmp_path / "runs" / "drill" / "trainer" / "state_0001.pt").exists()


def test_drill_every_episode_aborting_trips_the_circuit_breaker_after_k_steps(tmp_path, drill):
    with StubSimulator(StubBehaviour(fail={"task": "http500"})) as sim:
        stopped = train(tmp_path, "--run", "drill", "--steps", "8", "--simulator-url", sim.url, *STUB_RUN)
        faults = len(sim.requests["task"])
    assert stopped.returncode == 3, stopped.stderr[-2000:]
    message = stopped.stderr.strip().splitlines()[-1]
    assert "circuit breaker: 3 steps in a row aborted more than 50% of their episodes" in message
    assert "(step 1: 100%, step 2: 100%, step 3: 100%)" in message
    assert "abort causes: upstream 12 (task 12)" in message and "HTTP 500" in message
    rows = read_train_metrics(tmp_path / "results" / "drill" / "train_metrics.csv")
    assert [(r["step"], r["aborted_frac"], r["aborted_upstream"]) for r in rows] == [(s, 1.0, 4.0) for s in (1, 2, 3)]
    assert (tmp_path / "runs" / "drill" / "trainer" / "state_0003.pt").exists()

    with StubSimulator() as fixed:  # the fault is fixed: the same run resumes where it stopped
        resumed = train(tmp_path, "--run", "drill", "--steps", "5", "--simulator-url", fixed.url, *STUB_RUN)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    rows = metrics_rows(tmp_path)
    assert list(rows) == [1, 2, 3, 4, 5] and rows[4]["aborted_frac"] == 0.0
    drill("circuit breaker", faults_injected=f"{faults} task calls answered 500", steps_before_stop=3,
          max_aborted_steps=3, rows_after_resume=len(rows), duplicate_rows=0)
