"""Training on several nodes, for real on CPU: a two-node Ray cluster from the CPU train image.

In a fresh copy of the project whose .env sets NNODES=2 (so make adds compose.multinode.yaml, as on a GPU head)
and GPUS_PER_NODE=1, on the host network of one machine:
- the head is the trainer service running the recipe's own train.sh, which starts Ray's head (`ray start --head`
  with --num-gpus, the dashboard on 127.0.0.1), waits for the other node and then starts verl's main_ppo with
  the recipe's real arguments; a python3 put first on its PATH (tests/containers/multinode/) skips the steps
  that need a GPU run's model and rows and replaces main_ppo by a probe that composes those arguments with
  verl's own main_ppo, joins Ray with the very `ray.init` arguments main_ppo would use, and runs a task pinned
  to the other node (NodeAffinitySchedulingStrategy);
- the other node is `make ray-worker HEAD=127.0.0.1`: the shipped worker service and command.
The cluster must form (two nodes, GPUS_PER_NODE GPUs each), the pinned task must run on the worker node and
see every variable train.sh hands each worker (every TOOLCANARY_* but secrets, and TENSORBOARD_DIR) with the
head's values, the simulator token from the worker's own environment only, and the results volume.

Everything stays on one machine: the containers share the host's network, the head advertises RAY_HEAD_ADDRESS
127.0.0.1 and the worker joins 127.0.0.1. Ray on Linux still advertises the machine's own address for both nodes
(it replaces 127.0.0.1, which only its single-node mode keeps) and binds its GCS and raylets on every interface
while the test runs; its dashboard and job API stay on 127.0.0.1.

Needs a Docker engine, or root to start one (engine.py), and builds the CPU train image (shared with
test_cpu_stack.py: the second build is the layer cache's). About a minute beyond the build on 2 cores.
Run: .venvs/dev/bin/python -m pytest tests/containers/test_multinode.py -q -s
"""

from __future__ import annotations

import json
import re
import secrets
import socket
import time

import pytest
from project import Project, build_images, checkout_copy, configure, image_lines, wait_for

from toolcanary.common.loopback import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2700)]

RUN = "mtest"
PROJECT = "toolcanary-mtest"
IMAGE = "toolcanary/train-cpu:0.1.0"  # TOOLCANARY_VERSION's default
GPUS_PER_NODE = 1
HEAD = f"{PROJECT}-head"
TRAIN_SH = "/opt/toolcanary/recipes/trustee-qwen3-4b/train.sh"
# Ports Ray's head takes whatever RAY_PORT is (client server, dashboard, dashboard agent) and its workers' range.
RAY_FIXED = {10001, 8265, 52365, *range(10002, 20000)}


def ray_port() -> int:
    while (port := free_port()) in RAY_FIXED:
        pass
    return port


def listens(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def state(project: Project, container: str) -> dict:
    return json.loads(project.engine.docker("inspect", container).stdout)[0]["State"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, engine, base_image, wheels_url, stack_user):
    """The scenario, run once: build, head, worker, probe; the tests read what it left."""
    project = Project(checkout_copy(tmp_path_factory.mktemp("project")), engine, stack_user, PROJECT)
    root = project.root
    project.port, project.token = ray_port(), secrets.token_urlsafe(16)
    configure(project, {**image_lines(base_image, wheels_url), "RUN": RUN, "NNODES": 2,
                        "GPUS_PER_NODE": GPUS_PER_NODE, "RAY_PORT": project.port, "RAY_HEAD_ADDRESS": "127.0.0.1",
                        "TOOLCANARY_SIMULATOR_TOKEN": project.token})
    (root / "tests" / "containers" / "multinode" / "python3").chmod(0o755)
    build_images(project, ["trainer"])
    image_env = json.loads(engine.docker("image", "inspect", IMAGE).stdout)[0]["Config"]["Env"]
    path = next(item.split("=", 1)[1] for item in image_env if item.startswith("PATH="))
    started = time.monotonic()
    try:
        # The trainer service as `make up` would start it on the head, running the GPU recipe's train.sh.
        project.compose("head", "run", "-d", "--no-deps", "--name", HEAD, "--volume",
                        f"{root / 'tests' / 'containers' / 'multinode'}:/probe:ro", "--env", f"PATH=/probe:{path}",
                        "trainer", "bash", TRAIN_SH)
        wait_for("the head's Ray", lambda: listens(project.port) or state(project, HEAD)["Status"] == "exited",
                 timeout=180)
        project.timings["head's Ray up"] = round(time.monotonic() - started, 1)
        project.make("make ray-worker", "ray-worker", "HEAD=127.0.0.1")
        project.exit = wait_for("the probe on the head", lambda: (lambda s: s if s["Status"] == "exited" else None)(
            state(project, HEAD)), timeout=600, every=1)
        project.timings["cluster and probe"] = round(time.monotonic() - started, 1)
        project.head_log = project.logs(HEAD)
        project.worker_log = project.logs(f"{PROJECT}-ray-worker-1")
        found = re.findall(r"^PROBE (.*)$", project.head_log, flags=re.M)
        project.probe = json.loads(found[-1]) if found else None
        yield project
    finally:
        engine.docker("rm", "-f", HEAD, check=False, timeout=120)
        project.make("make down", "down", timeout=300, check=False)
        print(f"\nmulti-node timings (s): {json.dumps({**engine.timings, **project.timings})}")


def probe(cluster) -> dict:
    assert cluster.probe, f"no PROBE line; the head's log:\n{cluster.head_log[-6000:]}\nthe worker's:\n" \
                          f"{cluster.worker_log[-3000:]}"
    return cluster.probe


def test_the_head_runs_train_sh_to_the_end(cluster):
    assert cluster.exit["ExitCode"] == 0, cluster.head_log[-6000:]
    assert f"Ray cluster ready: 2 nodes, {2 * GPUS_PER_NODE} GPUs" in cluster.head_log


def test_the_cluster_forms_with_exactly_gpus_per_node_on_each_node(cluster):
    found = probe(cluster)
    assert len(found["nodes"]) == 2
    assert [node["gpus"] for node in found["nodes"]] == [GPUS_PER_NODE, GPUS_PER_NODE]
    assert found["recipe"] == {"nnodes": 2, "n_gpus_per_node": GPUS_PER_NODE}  # NNODES, GPUS_PER_NODE reached verl


def test_main_ppo_joins_the_cluster_the_head_started_instead_of_starting_its_own(cluster):
    assert probe(cluster)["ray_init"]["address"] == "auto"


def test_a_task_pinned_to_the_worker_node_runs_there_and_sees_the_recipes_wiring(cluster):
    found = probe(cluster)
    worker, wiring = found["worker"], found["wiring"]
    assert worker and worker["node"] != found["head"]
    assert {node["id"] for node in found["nodes"]} == {found["head"], worker["node"]}
    handed = {name for name in wiring if name.startswith("TOOLCANARY_") or name == "TENSORBOARD_DIR"}
    assert {"TOOLCANARY_TRAIN_RUN", "TOOLCANARY_TRAIN_SIMULATOR_URL", "TOOLCANARY_TRAIN_MODE", "TOOLCANARY_RUNS_DIR",
            "TOOLCANARY_RESULTS_DIR", "TOOLCANARY_CHECKPOINTS_DIR", "TENSORBOARD_DIR"} <= handed
    assert wiring["TOOLCANARY_TRAIN_RUN"] == RUN
    assert {name: worker["env"][name] for name in wiring} == wiring


def test_the_token_stays_out_of_the_wiring_and_reaches_the_worker_from_its_own_environment(cluster):
    found = probe(cluster)
    assert "TOOLCANARY_SIMULATOR_TOKEN" not in found["wiring"] and cluster.token not in found["wiring"].values()
    assert found["worker"]["env"]["TOOLCANARY_SIMULATOR_TOKEN"] == cluster.token
    # verl prints its whole config and main_ppo its ray.init arguments: the token is in neither (the probe's own
    # report, which shows what the worker saw, aside).
    assert cluster.token not in re.sub(r"^PROBE .*$", "", cluster.head_log, flags=re.M)


def test_the_worker_node_writes_to_the_shared_volumes(cluster):
    written = cluster.root / "volumes" / "results" / RUN / "written-by-a-worker-node.txt"
    assert written.read_text() == probe(cluster)["worker"]["node"]
    assert (written.stat().st_uid, written.stat().st_gid) == cluster.user


def test_the_worker_is_the_shipped_service_and_make_down_stops_it(cluster):
    info = json.loads(cluster.engine.docker("inspect", f"{PROJECT}-ray-worker-1").stdout)[0]
    assert info["HostConfig"]["NetworkMode"] == "host"
    assert info["Config"]["Cmd"] == ["ray", "start", "--block", f"--address=127.0.0.1:{cluster.port}",
                                     f"--num-gpus={GPUS_PER_NODE}", "--disable-usage-stats"]
    cluster.make("make down (test)", "down", timeout=300)
    left = cluster.engine.docker("ps", "-aq", "--filter", f"label=com.docker.compose.project={PROJECT}", "--filter",
                                 "label=com.docker.compose.service=ray-worker").stdout.split()
    assert left == []
