"""images/simulator/start-simulator.sh, run for real in front of a fake vLLM: no failure hides behind it.

The script is the simulator container's entry point. Each test runs it as the container would (bash, its own
session), with the real simulator from this environment and `vllm.entrypoints.openai.api_server` replaced by
the fake in tests/simulator/fake_vllm (healthy, never healthy, or failing at start-up), all on 127.0.0.1.
Checked: vLLM gets TRUSTEE's serving (trustee_reference.yaml's simulator.serving) unless a variable says otherwise,
and an empty variable leaves its flag out; the simulator never starts in front of a vLLM that did not become healthy; the script exits, non-zero,
as soon as either process exits, and stops the other; SIGTERM stops both. Every wait is bounded.

Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_start_simulator.py -q
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from toolcanary.common.loopback import free_port

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "images" / "simulator" / "start-simulator.sh"
FAKE_VLLM = Path(__file__).parent / "fake_vllm"
SERVING = yaml.safe_load((ROOT / "recipes" / "trustee-qwen3-4b" / "trustee_reference.yaml").read_text())[
    "simulator"]["serving"]


class Container:
    """start-simulator.sh in its own session, with its output in a log file."""

    def __init__(self, tmp_path: Path, mode: str, wait_s: int = 60, env: dict | None = None) -> None:
        self.vllm_port, self.sim_port = free_port(), free_port()
        self.pidfile, self.log_path = tmp_path / "vllm.pid", tmp_path / "container.log"
        self.argv_path = tmp_path / "vllm-argv.json"
        env = {
            # The simulator environment's python3 first, as the image's python3 holds the simulator.
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(tmp_path), "LANG": "C.UTF-8", "PYTHONPATH": str(FAKE_VLLM),
            "TOOLCANARY_RUN": "start-test", "TOOLCANARY_RUNS_DIR": str(tmp_path / "runs"),
            "TOOLCANARY_SIMULATOR_HOST": "127.0.0.1", "TOOLCANARY_SIMULATOR_PORT": str(self.sim_port),
            # The GPU stack requires a token (docs/simulator.md, Security).
            "TOOLCANARY_SIMULATOR_TOKEN": "start-test-token",
            "SIMULATOR_VLLM_PORT": str(self.vllm_port), "SIMULATOR_VLLM_WAIT_S": str(wait_s),
            "SIMULATOR_VLLM_POLL_S": "0.2", "SIMULATOR_STOP_GRACE_S": "5",
            "FAKE_VLLM_MODE": mode, "FAKE_VLLM_PIDFILE": str(self.pidfile), "FAKE_VLLM_ARGV": str(self.argv_path),
            **(env or {}),
        }
        self.log = self.log_path.open("w")
        self.process = subprocess.Popen(["bash", str(SCRIPT)], env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                        start_new_session=True)

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text()

    def exit_status(self, within_s: float) -> int:
        try:
            return self.process.wait(timeout=within_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"start-simulator.sh still runs after {within_s} s; its output:\n{self.output()}") \
                from None

    def vllm_command(self) -> tuple[list[str], dict[str, str]]:
        """The arguments vLLM was started with, and the VLLM_* variables it got."""
        self.vllm_pid()
        recorded = json.loads(self.argv_path.read_text())
        return recorded["argv"], recorded["env"]

    def vllm_pid(self) -> int:
        deadline = time.monotonic() + 30
        while not (self.pidfile.exists() and self.pidfile.read_text().strip()):
            assert time.monotonic() < deadline, f"the fake vLLM never started:\n{self.output()}"
            time.sleep(0.05)
        return int(self.pidfile.read_text())

    def simulator_pid(self) -> int:
        """The simulator process, found by its command line: a child of the script, or the script itself
        where it replaced itself with the simulator (exec)."""
        pid = self.process.pid
        for candidate in [pid, *map(int, Path(f"/proc/{pid}/task/{pid}/children").read_text().split())]:
            if b"toolcanary.simulator" in Path(f"/proc/{candidate}/cmdline").read_bytes():
                return candidate
        raise AssertionError(f"no simulator process under the script:\n{self.output()}")

    def simulator_health(self) -> int | None:
        """The simulator's /health status, or None while nothing listens."""
        try:
            return httpx.get(f"http://127.0.0.1:{self.sim_port}/health", timeout=2).status_code
        except httpx.TransportError:
            return None

    def wait_until_serving(self, within_s: float = 90) -> None:
        deadline = time.monotonic() + within_s
        while self.simulator_health() != 200:
            assert self.process.poll() is None, f"start-simulator.sh exited early:\n{self.output()}"
            assert time.monotonic() < deadline, f"the simulator did not answer /health within {within_s} s:\n" \
                                                f"{self.output()}"
            time.sleep(0.2)

    def close(self) -> None:
        # Whatever a failed test leaves, the script's own process group (which this test started) included:
        # a vLLM the script failed to stop outlives the script itself.
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=30)
        self.log.close()


def gone(pid: int, within_s: float = 10) -> bool:
    """True once `pid` no longer runs (a zombie counts as gone: it runs nothing)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def container(tmp_path):
    started: list[Container] = []

    def start(mode: str, wait_s: int = 60, env: dict | None = None) -> Container:
        started.append(Container(tmp_path, mode, wait_s, env))
        return started[-1]

    yield start
    for one in started:
        one.close()


def test_the_simulator_never_starts_in_front_of_a_vllm_that_never_becomes_healthy(container):
    box = container("never-healthy", wait_s=2)
    vllm = box.vllm_pid()
    status = box.exit_status(within_s=30)
    output = box.output()
    assert status != 0, output
    assert "vLLM did not become healthy within 2 s" in output and "the simulator was not started" in output, output
    assert "toolcanary.simulator" not in output and "Uvicorn running" not in output, output
    assert box.simulator_health() is None
    assert gone(vllm), "the vLLM that never became healthy was left running"


def test_a_vllm_that_fails_at_start_up_ends_the_container_with_its_status(container):
    box = container("exit:3")
    assert box.exit_status(within_s=30) == 3, box.output()
    assert "vLLM exited with status 3 before it became healthy" in box.output()
    assert box.simulator_health() is None


def test_when_vllm_dies_the_simulator_is_stopped_and_the_container_exits(container):
    box = container("healthy")
    box.wait_until_serving()
    vllm, simulator = box.vllm_pid(), box.simulator_pid()
    os.kill(vllm, signal.SIGKILL)
    assert box.exit_status(within_s=20) == 128 + signal.SIGKILL, box.output()
    assert "vLLM exited with status 137; stopping the simulator" in box.output()
    assert gone(simulator), "the simulator still runs in front of a dead vLLM"
    assert box.simulator_health() is None


def test_when_the_simulator_dies_vllm_is_stopped_and_the_container_exits(container):
    box = container("healthy")
    box.wait_until_serving()
    vllm, simulator = box.vllm_pid(), box.simulator_pid()
    os.kill(simulator, signal.SIGKILL)
    assert box.exit_status(within_s=20) == 128 + signal.SIGKILL, box.output()
    assert "the simulator exited with status 137; stopping vLLM" in box.output()
    assert gone(vllm), "vLLM was left running without its simulator"


def test_sigterm_stops_both_processes_and_the_container(container):
    box = container("healthy")
    box.wait_until_serving()
    vllm, simulator = box.vllm_pid(), box.simulator_pid()
    box.process.send_signal(signal.SIGTERM)
    assert box.exit_status(within_s=30) == 128 + signal.SIGTERM, box.output()
    assert gone(vllm) and gone(simulator), box.output()
    assert "received SIGTERM" in box.output()


def test_while_both_run_the_simulator_reports_healthy_in_front_of_vllm(container):
    box = container("healthy")
    box.wait_until_serving()
    body = httpx.get(f"http://127.0.0.1:{box.sim_port}/health", timeout=5).json()
    assert body["backend"] == "llm" and body["run"] == "start-test"


def flag(argv: list[str], name: str) -> str | None:
    """The argument after `name` (None when the flag is absent); a flag given twice fails."""
    assert argv.count(name) <= 1, f"{name} given twice: {argv}"
    return argv[argv.index(name) + 1] if name in argv else None


def test_vllm_is_started_with_trustees_serving_by_default(container):
    box = container("exit:3")
    assert box.exit_status(within_s=30) == 3, box.output()
    argv, env = box.vllm_command()
    assert flag(argv, "--model") == SERVING["model"]["value"]
    assert flag(argv, "--tensor-parallel-size") == str(SERVING["tensor_parallel_size"]["value"])
    assert flag(argv, "--max-model-len") == str(SERVING["max_model_len"]["value"])
    assert flag(argv, "--tool-call-parser") == SERVING["tool_call_parser"]["value"]
    assert ("--enable-auto-tool-choice" in argv) is SERVING["enable_auto_tool_choice"]["value"]
    # TRUSTEE passes its YaRN settings under rope_parameters (the reference's note); one argument, valid JSON.
    assert json.loads(flag(argv, "--hf-overrides")) == {"rope_parameters": SERVING["rope_scaling"]["value"]}
    assert env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") == "1"
    # The one serving fact that differs: the name, which only the simulator's requests use.
    assert flag(argv, "--served-model-name") == "simulator" != SERVING["served_model_name"]["value"]


def test_empty_serving_variables_leave_their_flags_out(container):
    box = container("exit:3", env={"SIMULATOR_MAX_MODEL_LEN": "", "SIMULATOR_HF_OVERRIDES": ""})
    assert box.exit_status(within_s=30) == 3, box.output()
    argv, env = box.vllm_command()
    assert "--max-model-len" not in argv and "--hf-overrides" not in argv, argv
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN" not in env
    assert flag(argv, "--tool-call-parser") == "hermes"


def test_serving_variables_reach_vllm_as_given_the_json_as_one_argument(container):
    overrides = '{"rope_parameters": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 32768}}'
    box = container("exit:3", env={"SIMULATOR_MAX_MODEL_LEN": "65536", "SIMULATOR_HF_OVERRIDES": overrides})
    assert box.exit_status(within_s=30) == 3, box.output()
    argv, env = box.vllm_command()
    assert flag(argv, "--max-model-len") == "65536"
    assert flag(argv, "--hf-overrides") == overrides
    assert env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") == "1"


def test_a_refused_trustee_checkout_stops_the_container_before_vllm_starts(container, tmp_path):
    box = container("healthy", env={"TOOLCANARY_SIMULATOR_MODE": "trustee",
                                    "TOOLCANARY_SIMULATOR_TRUSTEE_DIR": str(tmp_path / "no-checkout")})
    assert box.exit_status(within_s=60) == 2, box.output()
    output = box.output()
    assert "no folder at" in output and "vLLM was not started" in output, output
    assert not box.pidfile.exists(), "vLLM was started although the settings were refused"


def test_a_container_without_a_token_stops_before_vllm_starts(container):
    box = container("healthy", env={"TOOLCANARY_SIMULATOR_TOKEN": ""})
    assert box.exit_status(within_s=60) == 2, box.output()
    output = box.output()
    assert "no bearer token" in output and "--insecure" in output and "vLLM was not started" in output, output
    assert not box.pidfile.exists(), "vLLM was started although the simulator has no token"


def test_settings_that_hold_are_checked_and_reported_before_vllm_starts(container, trustee_checkout,
                                                                        standin_commit):
    box = container("healthy", env={"TOOLCANARY_SIMULATOR_MODE": "trustee",
                                    "TOOLCANARY_SIMULATOR_TRUSTEE_DIR": str(trustee_checkout),
                                    "TOOLCANARY_SIMULATOR_TRUSTEE_COMMIT": standin_commit})
    box.wait_until_serving()
    assert "settings ok: backend llm, mode trustee" in box.output() and "(2 tools)" in box.output()
