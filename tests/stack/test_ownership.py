"""Containers write volumes/ as the user who runs the stack: `user:` on every service, ids from make or .env.

The images run as uid 1001 (simulator, trainer) or 1000 (eval, analysis) and volumes/ belongs to whoever
cloned the repository, so without this a container cannot write its results, and eval cannot write a folder
the trainer created. Every service runs as TOOLCANARY_UID:TOOLCANARY_GID; make targets pass the invoking
user's ids, `make env` writes them into .env (never overwriting one), and a bare `docker compose` without
them stops with a message naming what to set.

Run: .venvs/dev/bin/python -m pytest tests/stack/test_ownership.py -q
"""

import os
import re
import subprocess

import pytest
from compose_env import (
    COMPOSE_BINARY,
    ROOT,
    TEST_GID,
    TEST_UID,
    calls,
    clean_environ,
    recorder,
    run_make,
    sandbox,
)

UID, GID = str(os.getuid()), str(os.getgid())
# Every target that runs Docker Compose, directly or through a script.
STACK_TARGETS = ("build", "up", "down", "logs", "ray-worker", "eval", "eval-all", "watch")


def test_every_service_runs_as_the_configured_user(resolved):
    users = {name: service.get("user") for name, service in resolved["services"].items()}
    assert users == dict.fromkeys(users, f"{TEST_UID}:{TEST_GID}")


def test_whatever_a_service_writes_lives_under_volumes(resolved):
    # All services share one user, so each can write what another created; their writable mounts are the
    # host folders under volumes/ (or the model cache the user chose), nothing else.
    for name, service in resolved["services"].items():
        for mount in service.get("volumes", []):
            if not mount.get("read_only"):
                assert mount["type"] == "bind" and mount["target"].startswith("/volumes/"), (name, mount)
                assert mount["source"].startswith(str(ROOT / "volumes")), (name, mount)


def test_a_bare_compose_run_without_the_ids_says_exactly_what_to_set(tmp_path):
    # .env copied from .env.example by hand: the two ids are empty.
    env_file = tmp_path / ".env"
    env_file.write_text((ROOT / ".env.example").read_text())
    # A socket that does not exist: if Compose got past the configuration it would fail on the engine instead.
    env = clean_environ({"DOCKER_HOST": f"unix://{tmp_path / 'no-engine.sock'}"})
    result = subprocess.run([str(COMPOSE_BINARY), "--env-file", str(env_file), "run", "--rm", "analysis",
                             "make_figures", "--table"], cwd=ROOT, capture_output=True, text=True, env=env,
                            timeout=60)
    assert result.returncode != 0
    assert "TOOLCANARY_UID is not set - run make env, or add TOOLCANARY_UID=$(id -u) to .env" in result.stderr, \
        result.stderr
    # With the ids, the same command gets past the configuration (and only then misses the absent engine).
    env_file.write_text(env_file.read_text().replace("TOOLCANARY_UID=\n", f"TOOLCANARY_UID={UID}\n")
                        .replace("TOOLCANARY_GID=\n", f"TOOLCANARY_GID={GID}\n"))
    result = subprocess.run([str(COMPOSE_BINARY), "--env-file", str(env_file), "run", "--rm", "analysis",
                             "make_figures", "--table"], cwd=ROOT, capture_output=True, text=True, env=env,
                            timeout=60)
    assert "TOOLCANARY_" not in result.stderr and "no-engine.sock" in result.stderr, result.stderr


def test_make_env_writes_the_example_with_the_invoking_users_ids(tmp_path):
    root = sandbox(tmp_path)
    result = run_make(root, "env")
    assert result.returncode == 0, result.stderr
    written = (root / ".env").read_text()
    example = (root / ".env.example").read_text()
    assert re.findall(r"^TOOLCANARY_[UG]ID=.*$", written, flags=re.M) == [f"TOOLCANARY_UID={UID}",
                                                                           f"TOOLCANARY_GID={GID}"]
    # Everything else is the example, line for line.
    strip = lambda text: re.sub(r"^TOOLCANARY_[UG]ID=.*$", "", text, flags=re.M)  # noqa: E731
    assert strip(written) == strip(example)


def test_make_env_never_overwrites_an_existing_env(tmp_path):
    root = sandbox(tmp_path)
    assert run_make(root, "env").returncode == 0
    edited = (root / ".env").read_text().replace("RUN=trustee-qwen3-4b-run1", "RUN=my-own-run")
    (root / ".env").write_text(edited)
    result = run_make(root, "env")
    assert result.returncode == 0, result.stderr
    assert "left unchanged" in result.stdout
    assert (root / ".env").read_text() == edited


@pytest.mark.parametrize(
    ("content", "expected"),
    [("RUN=r1\n", f"TOOLCANARY_UID is not set: add the line TOOLCANARY_UID={UID}"),
     (f"RUN=r1\nTOOLCANARY_UID={UID}\nTOOLCANARY_GID={GID}\nTRAINER_GPUS=4,5,6,7\n",
      "TRAINER_GPUS is no longer read (the stack would silently use its defaults): remove it and set "
      "one id per variable: TRAINER_GPU_0=0 ... TRAINER_GPU_3=3")],
    ids=["ids-missing", "retired-gpu-list"],
)
def test_make_env_on_an_incomplete_env_names_the_line_to_write_and_changes_nothing(tmp_path, content, expected):
    root = sandbox(tmp_path)
    (root / ".env").write_text(content)
    result = run_make(root, "env")
    assert result.returncode != 0
    assert expected in result.stderr, result.stderr
    assert (root / ".env").read_text() == content


@pytest.mark.parametrize("target", STACK_TARGETS)
def test_every_stack_target_passes_the_invoking_users_ids(target):
    result = run_make(ROOT, "-n", target, "RUN=r1", "STEP=200")
    assert result.returncode == 0, result.stderr
    assert f"TOOLCANARY_UID={UID} TOOLCANARY_GID={GID}" in result.stdout, result.stdout


def test_ids_typed_by_the_user_win():
    assert "TOOLCANARY_UID=4242 " in run_make(ROOT, "-n", "up", "TOOLCANARY_UID=4242").stdout
    assert "TOOLCANARY_GID=4243 " in run_make(ROOT, "-n", "up", env={"TOOLCANARY_GID": "4243"}).stdout


def test_make_up_hands_the_ids_to_compose_and_refuses_a_retired_variable(tmp_path):
    root = sandbox(tmp_path)
    compose, log = recorder(tmp_path)
    (root / ".env").write_text("RUN=r1\n")  # an .env without ids: make passes its own
    result = run_make(root, "up", f"COMPOSE={compose}")
    assert result.returncode == 0, result.stderr
    [call] = calls(log)
    assert call["command"] == "up" and call["env"]["TOOLCANARY_UID"] == UID and call["env"]["TOOLCANARY_GID"] == GID
    (root / ".env").write_text("RUN=r1\nSIMULATOR_GPUS=0,1,2,3\n")
    result = run_make(root, "up", f"COMPOSE={compose}")
    assert result.returncode != 0 and "SIMULATOR_GPUS is no longer read" in result.stderr, result.stderr
    assert len(calls(log)) == 1, "compose must not start with a .env the stack would partly ignore"
