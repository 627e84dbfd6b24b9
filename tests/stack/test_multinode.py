"""Training on several nodes, as Compose resolves it and as make dispatches it: NNODES and GPUS_PER_NODE reach
the trainer, NNODES > 1 puts the trainer on the host network (compose.multinode.yaml, which make adds), the
worker profile's ray-worker joins the head with exactly GPUS_PER_NODE GPUs from the trainer's image, mounts,
environment and GPU reservation, and the simulator's URL and published address are settings of .env.
tests/containers/test_multinode.py forms such a cluster for real.

Run: .venvs/dev/bin/python -m pytest tests/stack/test_multinode.py -q
"""

import json
import re
import subprocess

import pytest
from compose_env import (
    COMPOSE_BINARY,
    CPU_FILES,
    GPU_FILES,
    calls,
    clean_environ,
    recorder,
    resolve,
    run_compose,
    run_make,
    sandbox,
    with_ids,
)

MULTINODE_FILES = (*GPU_FILES, "compose.multinode.yaml")


def env_file(tmp_path, example_env, **values) -> str:
    """The example env with NAME=value lines set (replacing the line, commented out or not, else appended)."""
    text = example_env.read_text()
    for name, value in values.items():
        text, count = re.subn(rf"^#?\s*{name}=.*$", f"{name}={value}", text, count=1, flags=re.M)
        if not count:
            text += f"{name}={value}\n"
    path = tmp_path / "chosen.env"
    path.write_text(text)
    return path


def worker(env, files=GPU_FILES, extra: dict | None = None) -> dict:
    """The stack with the worker profile as well, resolved: (ray-worker, trainer)."""
    result = run_compose("--profile", "train", "--profile", "worker", "config", "--format", "json", env_file=env,
                         env=extra, files=files)
    assert result.returncode == 0, result.stderr
    services = json.loads(result.stdout)["services"]
    return services["ray-worker"], services["trainer"]


def test_the_example_runs_on_one_node_with_the_recipes_counts(resolved):
    trainer = resolved["services"]["trainer"]
    assert {k: trainer["environment"][k] for k in ("NNODES", "GPUS_PER_NODE", "RAY_PORT")} == {
        "NNODES": "1", "GPUS_PER_NODE": "4", "RAY_PORT": "6379"}
    assert trainer["environment"]["RAY_HEAD_ADDRESS"] is None  # commented out: Ray picks the head's address
    assert "network_mode" not in trainer  # the project network, where `simulator` resolves
    assert trainer["environment"]["TOOLCANARY_TRAIN_SIMULATOR_URL"] == "http://simulator:8300"
    assert [(p["host_ip"], p["published"]) for p in resolved["services"]["simulator"]["ports"]] == [("127.0.0.1", "8300")]


def test_node_counts_simulator_url_and_its_published_address_reach_the_stack_from_env(example_env, tmp_path):
    chosen = env_file(tmp_path, example_env, NNODES=3, GPUS_PER_NODE=2, RAY_PORT=6400, RAY_HEAD_ADDRESS="10.0.0.1",
                      SIMULATOR_PUBLISH_HOST="10.0.0.1", TOOLCANARY_TRAIN_SIMULATOR_URL="http://10.0.0.1:8300")
    services = resolve(chosen, files=MULTINODE_FILES)["services"]
    environment = services["trainer"]["environment"]
    assert (environment["NNODES"], environment["GPUS_PER_NODE"], environment["RAY_PORT"],
            environment["RAY_HEAD_ADDRESS"]) == ("3", "2", "6400", "10.0.0.1")
    assert environment["TOOLCANARY_TRAIN_SIMULATOR_URL"] == "http://10.0.0.1:8300"
    assert [(p["host_ip"], p["target"]) for p in services["simulator"]["ports"]] == [("10.0.0.1", 8300)]
    assert services["trainer"]["network_mode"] == "host"
    # The simulator stays on the project network; only its published port faces the other nodes.
    assert "network_mode" not in services["simulator"]


def test_the_worker_joins_the_head_with_exactly_its_gpus_from_the_trainers_image_mounts_and_devices(example_env,
                                                                                                   tmp_path):
    chosen = env_file(tmp_path, example_env, GPUS_PER_NODE=2, RAY_PORT=6400, RAY_HEAD_ADDRESS="10.0.0.1",
                      TOOLCANARY_SIMULATOR_TOKEN="s3cret")
    ray_worker, trainer = worker(chosen)
    assert ray_worker["command"] == ["ray", "start", "--block", "--address=10.0.0.1:6400", "--num-gpus=2",
                                     "--disable-usage-stats"]
    assert ray_worker["profiles"] == ["worker"] and ray_worker["network_mode"] == "host"
    for key in ("image", "user", "volumes", "environment", "deploy", "shm_size", "ulimits"):
        assert ray_worker[key] == trainer[key], key
    # Not in the wiring train.sh hands to every worker (verl prints its config): each node's own environment.
    assert ray_worker["environment"]["TOOLCANARY_SIMULATOR_TOKEN"] == "s3cret"
    # The train profile alone never starts it, and Compose resolves the stack without a head address.
    assert "ray-worker" not in resolve(example_env)["services"]


def test_without_gpus_the_worker_is_the_cpu_train_image_on_the_host_network(example_env):
    ray_worker, trainer = worker(example_env, files=CPU_FILES, extra={"RAY_HEAD_ADDRESS": "127.0.0.1"})
    assert ray_worker["image"] == trainer["image"] and ray_worker["image"].startswith("toolcanary/train-cpu:")
    assert not ray_worker.get("deploy", {}).get("resources", {}).get("reservations")
    assert ray_worker["network_mode"] == "host" and "--address=127.0.0.1:6379" in ray_worker["command"]
    assert ray_worker["environment"] == trainer["environment"]


@pytest.fixture
def project(tmp_path):
    """A copy of what make needs, with the example .env, and `make` there with a recording `docker compose`."""
    root = sandbox(tmp_path)
    compose, log = recorder(tmp_path)

    def make(*args: str, env_values: dict | None = None, **exported):
        text = with_ids((root / ".env.example").read_text())
        for name, value in (env_values or {}).items():
            text = re.sub(rf"^#?\s*{name}=.*$", f"{name}={value}", text, count=1, flags=re.M)
        (root / ".env").write_text(text)
        log.unlink(missing_ok=True)
        return run_make(root, *args, f"COMPOSE={compose}", env=exported), calls(log)

    make.root = root
    return make


def compose_file(stdout: str) -> str | None:
    found = re.search(r"\bCOMPOSE_FILE=(\S+)", stdout)
    return found.group(1) if found else None


def test_make_adds_the_multinode_file_exactly_when_nnodes_is_above_one(project):
    assert compose_file(project("-n", "up")[0].stdout) is None
    assert compose_file(project("-n", "up", env_values={"NNODES": 2})[0].stdout) == "compose.yaml:compose.multinode.yaml"
    assert compose_file(project("-n", "up", "NNODES=4")[0].stdout) == "compose.yaml:compose.multinode.yaml"
    assert compose_file(project("-n", "up", NNODES="2")[0].stdout) == "compose.yaml:compose.multinode.yaml"
    assert compose_file(project("-n", "up", "NNODES=1", env_values={"NNODES": 2})[0].stdout) is None
    # The stack without GPUs keeps its files; the multi-node file comes after them.
    cpu = project("-n", "down", env_values={"NNODES": 2, "COMPOSE_FILE": "compose.yaml:compose.cpu.yaml"})[0]
    assert compose_file(cpu.stdout) == "compose.yaml:compose.cpu.yaml:compose.multinode.yaml"


def test_make_up_on_the_head_starts_the_trainer_on_the_host_network(project):
    result, recorded = project("up", env_values={"NNODES": 2, "TOOLCANARY_TRAIN_SIMULATOR_URL": "http://10.0.0.1:8300"})
    assert result.returncode == 0, result.stderr
    [up] = recorded
    assert up["args"] == ["-d"] and "--profile" in up["argv"] and "train" in up["argv"]
    resolved = subprocess.run([str(COMPOSE_BINARY), "--profile", "train", "config", "--format", "json"],
                              cwd=project.root, capture_output=True, text=True, timeout=60,
                              env=clean_environ({"COMPOSE_FILE": compose_file(run_make(project.root, "-n", "up").stdout)}))
    assert resolved.returncode == 0, resolved.stderr
    assert json.loads(resolved.stdout)["services"]["trainer"]["network_mode"] == "host"


def test_make_ray_worker_dispatches_the_worker_service_with_the_head_typed(project):
    result, recorded = project("ray-worker", "HEAD=10.0.0.7", env_values={"NNODES": 2, "GPUS_PER_NODE": 3})
    assert result.returncode == 0, result.stderr
    [up] = recorded
    assert up["command"] == "up" and up["args"] == ["-d", "ray-worker"] and "worker" in up["argv"]
    assert up["resolved_commands"]["ray-worker"] == ["ray", "start", "--block", "--address=10.0.0.7:6379",
                                                     "--num-gpus=3", "--disable-usage-stats"]
    assert up["env"]["TOOLCANARY_UID"] and up["env"]["TOOLCANARY_COMMIT"] is None  # the sandbox has no git


@pytest.mark.parametrize(("typed", "values", "expected"), [
    ((), {}, "RAY_HEAD_ADDRESS is not set: run make ray-worker HEAD=<the head node's address>"),
    (("HEAD=http://10.0.0.7:6379",), {}, "is not a host address"),
    (("HEAD=10.0.0.7",), {"GPUS_PER_NODE": 8}, "GPUS_PER_NODE='8' is not 1-4"),
    (("HEAD=10.0.0.7",), {"NNODES": "two"}, "NNODES='two' is not a number of nodes"),
])
def test_make_ray_worker_stops_before_compose_without_a_head_or_with_counts_compose_cannot_serve(project, typed,
                                                                                                  values, expected):
    result, recorded = project("ray-worker", *typed, env_values=values)
    assert result.returncode != 0 and expected in result.stderr, result.stderr
    assert recorded == []


def test_the_head_address_may_live_in_the_worker_nodes_env(project):
    result, recorded = project("ray-worker", env_values={"RAY_HEAD_ADDRESS": "head.cluster"})
    assert result.returncode == 0, result.stderr
    assert "--address=head.cluster:6379" in recorded[0]["resolved_commands"]["ray-worker"]


def test_make_down_and_logs_include_the_worker(project):
    for target in ("down", "logs"):
        assert "--profile worker" in project("-n", target)[0].stdout, target
