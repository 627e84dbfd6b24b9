"""The stack without GPUs, for real: every CPU image built, then the three commands a user types.

In a fresh copy of the project, with `.env` written by `make env` and the one line that selects
compose.cpu.yaml: `make build`; `make up` (the scripted simulator and a 4-step CPU GRPO run on the tiny
policy, checkpoints every 2 steps), during which the simulator container's process is killed (the fault
drill: Docker brings it back, the trainer records the episodes it lost as aborted and carries on); `make
eval STEP=<step>` for every published step on a one-item-per-category BFCL sample; `make eval-all` for the
repeat pass at step 0; `docker compose run --rm analysis make_figures --table`; `make down`. Every container
runs as a uid that is neither root nor the images' own, on the host's loopback (or no network).

Needs a Docker engine, or root to start one (engine.py); the first run builds the images (about 8 minutes
on 2 cores), later runs reuse the engine's layers under build/containers/. Prints the time of each build
and of the run.
Run: .venvs/dev/bin/python -m pytest tests/containers -q -s
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import signal
import time
from pathlib import Path

import pytest
from engine import ROOT, WORK, EngineError
from project import BUILT, Project, build_images, checkout_copy, configure, image_lines, wait_for

from toolcanary.common.loopback import free_port
from toolcanary.contract import OFFLINE_CATEGORIES

# The scenario runs once, in the module's fixture, whose time pytest-timeout counts against the first test:
# 15 minutes (the project's per-test limit) is about what a cold run takes on 2 cores, so the module gets 45.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2700)]

RUN = "ctest"
PROJECT = "toolcanary-ctest"
STEPS, SAVE_EVERY = 4, 2


def metric_rows(stack: Project) -> list[dict]:
    path = stack.results / "train_metrics.csv"
    if not path.exists():
        return []
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def tcp_sockets() -> list[dict]:
    """Every IPv4 TCP socket of the host network, from /proc/net/tcp: its address and port, the peer's port,
    its state, the bytes received and not yet read by its owner, and its inode (0 before it is accepted)."""
    found = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        (address, port), remote_port = fields[1].split(":"), fields[2].split(":")[1]
        octets = [str(int(address[i:i + 2], 16)) for i in (6, 4, 2, 0)]  # little-endian hex
        found.append({"address": ".".join(octets), "port": int(port, 16), "remote_port": int(remote_port, 16),
                      "state": fields[3], "unread": int(fields[4].split(":")[1], 16), "inode": int(fields[9])})
    return found


def listening_addresses() -> list[str]:
    """host:port of every listening TCP socket on the machine (IPv4)."""
    return [f"{s['address']}:{s['port']}" for s in tcp_sockets() if s["state"] == "0A"]  # 0A: TCP_LISTEN


def socket_inodes(pid: int) -> set[int]:
    """The inodes of the sockets held by process `pid` and its descendants (gone ones are skipped)."""
    inodes, pids = set(), [pid]
    while pids:
        current = pids.pop()
        try:
            for fd in Path(f"/proc/{current}/fd").iterdir():
                with contextlib.suppress(FileNotFoundError):
                    target = os.readlink(fd)
                    if target.startswith("socket:["):
                        inodes.add(int(target[len("socket:["):-1]))
            for task in Path(f"/proc/{current}/task").iterdir():
                pids += [int(child) for child in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return inodes


def request_unread(port: int, client_pid: int) -> bool:
    """Whether a request of `client_pid` (or its descendants) to `port` sits unread on the server's side."""
    sockets, held = tcp_sockets(), socket_inodes(client_pid)
    client_ports = {s["port"] for s in sockets if s["inode"] in held and s["remote_port"] == port}
    return any(s["port"] == port and s["remote_port"] in client_ports and s["unread"] for s in sockets)


@pytest.fixture(scope="module")
def stack(tmp_path_factory, engine, base_image, wheels_url, stack_user):
    """The whole scenario, run once; the tests below read what it left."""
    (WORK / "last-run.log").unlink(missing_ok=True)
    stack = Project(checkout_copy(tmp_path_factory.mktemp("project")), engine, stack_user, PROJECT)
    stack.ports = {"simulator": free_port(), "serve": free_port()}
    stack.results, stack.checkpoints = (stack.root / "volumes" / kind / RUN for kind in ("results", "checkpoints"))
    configure(stack, {
        **image_lines(base_image, wheels_url), "RUN": RUN, "SIMULATOR_PORT": stack.ports["simulator"],
        "SERVE_PORT": stack.ports["serve"], "TOOLCANARY_EVALUATE_BASE_URL": f"http://127.0.0.1:{stack.ports['serve']}/v1",
        "TOOLCANARY_TRAIN_STEPS": STEPS, "TOOLCANARY_TRAIN_SAVE_EVERY": SAVE_EVERY, "TOOLCANARY_SIMULATOR_SEED": 7,
        "TOOLCANARY_EVALUATE_SAMPLE": 1, "TOOLCANARY_EVALUATE_REPEAT_STEPS": 0, "TOOLCANARY_EVALUATE_REPEAT_PASSES": 2,
        "TOOLCANARY_EVALUATE_THREADS": 4, "TOOLCANARY_EVALUATE_HEALTH_TIMEOUT_S": 900,
    })
    stack.started = time.monotonic()
    try:
        build_images(stack)
        stack.make("make build", "build")
        stack.make("make up", "up", timeout=900)
        drill(stack)
        stack.trainer_exit = wait_for("the trainer finishes", lambda: exited(stack, "trainer"), timeout=1200, every=2)
        stack.trainer_log = stack.compose("trainer log", "logs", "--no-log-prefix", "trainer", timeout=120).stdout
        stack.published = [json.loads(line)["step"] for line in (stack.checkpoints / "published.jsonl").read_text().splitlines()]
        for step in stack.published:
            stack.make(f"make eval STEP={step}", "eval", f"STEP={step}", timeout=1500)
        # The host-side client runs from this checkout's environments (make test has built them; the copy's
        # recipes are the same): VENV points make at them, `-o setup` keeps make from building a second set
        # in the copy, and the volume roots, which default to this checkout's, are pointed at the copy's.
        volumes = {f"TOOLCANARY_{n.upper()}_DIR={stack.root / 'volumes' / n}" for n in ("checkpoints", "results", "runs")}
        stack.make("make eval-all", "-o", "setup", f"VENV={ROOT / '.venvs'}", "eval-all", f"RUN={RUN}",
                   *sorted(volumes), timeout=1500)
        stack.compose("analysis --table", "run", "--rm", "analysis", "make_figures", "--table", timeout=600)
        stack.compose("analysis --fig all", "run", "--rm", "analysis", "make_figures", "--findings", "--fig", "all",
                      timeout=600)
        stack.inspected = {s: stack.container(s) for s in ("simulator", "trainer", "serve")}
        yield stack
    finally:
        stack.make("make down", "down", timeout=300, check=False)
        stack.timings["total"] = round(time.monotonic() - stack.started, 1)
        print(f"\ncontainer timings (s): {json.dumps({**engine.timings, **stack.timings})}")


def exited(stack: Project, service: str) -> dict | None:
    state = stack.container(service)["State"]
    return state if state["Status"] == "exited" else None


def simulator_records_size(stack: Project) -> int:
    return sum(path.stat().st_size for path in (stack.root / "volumes" / "runs" / RUN / "simulator").glob("*.jsonl"))


def drill(stack: Project) -> None:
    """Kill the simulator's process while the trainer is waiting on it: a crash, not `docker stop`.

    A step of the tiny policy spends about a second in its rollouts, so a kill timed from the outside can land
    after the step's last call, with the simulator back before the trainer next needs it: nothing to observe.
    The drill therefore freezes the process (SIGSTOP) the moment a role call of the step after the last
    written row reaches disk, waits until a request of the trainer sits unread in the frozen simulator's
    sockets (a role call of that step, or, when the freeze came after its last call, the readiness check before
    the next step), and only then kills it (SIGKILL). Whichever it was, the trainer meets the death."""
    pid = stack.container("simulator")["State"]["Pid"]
    trainer = stack.container("trainer")["State"]["Pid"]
    wait_for("the trainer's first GRPO step", lambda: metric_rows(stack), timeout=1200, every=0.2)
    finished, fresh = len(metric_rows(stack)), False  # fresh: the size below was read as a row appeared
    while True:
        size = simulator_records_size(stack)
        wait_for("the next step's role calls, or its row", lambda size=size, finished=finished:
                 simulator_records_size(stack) > size or len(metric_rows(stack)) != finished, timeout=600, every=0.01)
        rows = len(metric_rows(stack))
        if rows == finished and fresh:
            break  # the first call of the step after `finished` is on disk; the rest are in flight
        finished, fresh = rows, rows != finished
        if finished >= STEPS - 1:
            raise EngineError("the trainer was in its last step before the drill saw a step's role calls begin")
    os.kill(pid, signal.SIGSTOP)
    wait_for("a request of the trainer waiting on the frozen simulator",
             lambda: request_unread(stack.ports["simulator"], trainer), timeout=600, every=0.05)
    stack.killed_at_step = len(metric_rows(stack))  # steps finished when it died; the next one met the death
    os.kill(pid, signal.SIGKILL)
    started = time.monotonic()
    wait_for("the simulator comes back healthy", lambda: (lambda s: s["RestartCount"] >= 1 and
             s["State"].get("Health", {}).get("Status") == "healthy")(stack.container("simulator")), timeout=300)
    stack.timings["simulator back after kill"] = round(time.monotonic() - started, 1)
    stack.listening = listening_addresses()


def test_every_cpu_image_builds_from_the_same_dockerfiles(stack):
    for service in BUILT:
        assert stack.outputs[f"build {service}"].returncode == 0
    images = stack.engine.docker("images", "--format", "{{.Repository}}:{{.Tag}}").stdout.split()
    assert {"toolcanary/simulator-cpu:0.1.0", "toolcanary/train-cpu:0.1.0", "toolcanary/eval:0.1.0",
            "toolcanary/analysis:0.1.0"} <= set(images)
    label = stack.engine.docker("inspect", "-f", '{{index .Config.Labels "org.opencontainers.image.revision"}}',
                                "toolcanary/train-cpu:0.1.0").stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?|unknown", label), label


def test_make_up_trains_and_publishes_every_checkpoint_through_the_simulator_service(stack):
    assert stack.trainer_exit["ExitCode"] == 0, stack.engine.docker("logs", stack.inspected["trainer"]["Id"]).stderr[-3000:]
    assert stack.published == list(range(0, STEPS + 1, SAVE_EVERY))
    for step in stack.published:
        manifest = json.loads((stack.checkpoints / f"step_{step:04d}" / "manifest.json").read_text())
        assert manifest["step"] == step and manifest["enable_thinking"] is False
        assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?", manifest["commit"]), manifest["commit"]  # the image's commit
    assert [int(r["step"]) for r in metric_rows(stack)] == list(range(1, STEPS + 1))  # every step once
    records = (stack.root / "volumes" / "runs" / RUN / "simulator").glob("*.jsonl")
    assert any(path.stat().st_size for path in records)  # the trainer went through the simulator service


def test_the_trainer_survives_the_simulator_being_killed_mid_run(stack):
    episodes = [json.loads(line) for line in (stack.results / "episodes.jsonl").read_text().splitlines()]
    aborted = [e for e in episodes if e["outcome"] == "aborted" and e["step"] > stack.killed_at_step]
    after = [e for e in episodes if e["step"] > stack.killed_at_step]
    print(f"\nfault drill: simulator killed after step {stack.killed_at_step}; {len(aborted)} episodes aborted "
          f"({sorted({e['abort_cause'] for e in aborted})}), back in {stack.timings['simulator back after kill']} s; "
          f"{len(after)} episodes after it, {sum(e['outcome'] == 'ok' for e in after)} finished")
    waited = re.findall(r"waiting up to \S+ s before step \d+", stack.trainer_log)
    print(f"the trainer waited for the simulator: {waited or 'no'}")
    assert stack.inspected["simulator"]["RestartCount"] >= 1
    # The episodes in flight when it died are recorded as aborted, by the simulator's death (cause upstream);
    # with none in flight (killed between two steps), the trainer must have waited for it before the next step.
    assert {e["abort_cause"] for e in aborted} <= {"upstream"}, aborted
    assert aborted or waited, "the trainer went on as if the simulator had never died"
    assert any(e["outcome"] == "ok" for e in episodes if e["step"] == STEPS)  # and training carried on


def test_make_eval_scores_every_published_step_on_every_category(stack):
    with (stack.results / "bfcl_by_category.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    scored = {(int(r["step"]), int(r["pass"]), r["category"]) for r in rows}
    for step in stack.published:
        assert {c for s, p, c in scored if (s, p) == (step, 1)} == set(OFFLINE_CATEGORIES), step
    assert {c for s, p, c in scored if (s, p) == (0, 2)} == set(OFFLINE_CATEGORIES)  # eval-all's repeat pass
    assert len(scored) == len(rows)  # no row twice
    sample = json.loads((stack.results / "sample.json").read_text())
    assert sample["size"] == 1  # TOOLCANARY_EVALUATE_SAMPLE from .env reached eval
    assert stack.inspected["serve"]["State"]["Status"] == "exited"  # make eval stops serve again


def test_the_analysis_command_prints_the_table_and_writes_the_figures(stack):
    table = stack.outputs["analysis --table"].stdout
    print(f"\n$ docker compose run --rm analysis make_figures --table\n{table}")
    assert "| Abstention required |" in table and "| Tool call required |" in table
    assert all(f"step {s}" in table for s in (0, STEPS))
    figures = sorted(p.name for p in (stack.results / "figures").glob("*.png"))
    assert figures == ["f1_training.png", "f2_aggregates.png", "f3_categories.png",
                       "f4_abstention_vs_tool_call.png", "f5_training_distribution.png"]


def environment(info: dict) -> dict[str, str]:
    # A name without "=" is one Compose passed without a value (unset): the container does not get it.
    return dict(item.split("=", 1) for item in info["Config"]["Env"] if "=" in item)


def test_settings_in_env_reach_the_containers_that_use_them(stack):
    assert environment(stack.inspected["simulator"])["TOOLCANARY_SIMULATOR_SEED"] == "7"
    trainer = environment(stack.inspected["trainer"])
    assert (trainer["TOOLCANARY_TRAIN_STEPS"], trainer["TOOLCANARY_TRAIN_SAVE_EVERY"]) == (str(STEPS), str(SAVE_EVERY))
    assert "TOOLCANARY_SIMULATOR_TOKEN" not in environment(stack.inspected["simulator"])  # commented out in .env


def test_every_file_under_volumes_belongs_to_the_user_who_runs_the_stack(stack):
    uid, gid = stack.user
    for service, info in stack.inspected.items():
        assert info["Config"]["User"] == f"{uid}:{gid}", service
    # `make eval-all` runs its client on the host, as the test's own user: the pass it scores is that user's, its
    # folder and its TensorBoard event file alike.
    host_pass = stack.results / "passes" / "step_0000_pass_2"
    [host_events] = (stack.results / "tensorboard" / "bfcl").glob("events.out.tfevents.*.step0000.pass2")

    def host_side(path):
        return path == host_events or host_pass in (path, *path.parents)

    owners = {p: (p.lstat().st_uid, p.lstat().st_gid) for p in (stack.root / "volumes").rglob("*")}
    foreign = [str(p) for p, owner in owners.items() if owner != (uid, gid) and not host_side(p)]
    assert not foreign, foreign[:10]
    assert {owners[p] for p in owners if host_side(p)} == {(os.getuid(), os.getgid())}


def test_every_container_stays_on_the_loopback(stack):
    for service, info in stack.inspected.items():
        assert info["HostConfig"]["NetworkMode"] == "host", service
    port = stack.ports["simulator"]
    bound = [address for address in stack.listening if address.endswith(f":{port}")]
    assert bound == [f"127.0.0.1:{port}"], bound  # the simulator answers on the loopback, and only there


def test_make_down_leaves_nothing_running(stack):
    # The module's stack fixture has not torn down yet: bring it down here and look.
    stack.make("make down (test)", "down", timeout=300)
    left = stack.engine.docker("ps", "-aq", "--filter", f"label=com.docker.compose.project={PROJECT}").stdout.split()
    assert left == []
