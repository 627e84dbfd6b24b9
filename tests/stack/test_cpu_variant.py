"""The stack without GPUs, as Compose resolves it: one line of .env selects it, every service keeps to the
loopback, no GPU is asked for, and the images are the same Dockerfiles with CPU build arguments.
tests/containers builds and runs it for real.

Run: .venvs/dev/bin/python -m pytest tests/stack/test_cpu_variant.py -q
"""

import json
import re
import subprocess

import pytest
from compose_env import COMPOSE_BINARY, CPU_FILES, PROFILES, ROOT, clean_environ, resolve, with_ids

EXAMPLE = (ROOT / ".env.example").read_text()
CPU_LINE = re.search(r"^#\s*(COMPOSE_FILE=\S+)$", EXAMPLE, flags=re.M)


@pytest.fixture(scope="module")
def cpu(tmp_path_factory) -> dict:
    """The stack resolved the way a user gets it: .env.example with the CPU line uncommented, no -f flag."""
    project = tmp_path_factory.mktemp("cpu-project")
    for name in CPU_FILES:
        (project / name).write_text((ROOT / name).read_text())
    (project / ".env").write_text(with_ids(EXAMPLE.replace(f"# {CPU_LINE.group(1)}", CPU_LINE.group(1))))
    profiles = [arg for p in PROFILES for arg in ("--profile", p)]
    done = subprocess.run([str(COMPOSE_BINARY), *profiles, "config", "--format", "json"], cwd=project,
                          capture_output=True, text=True, env=clean_environ(), timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["services"]


def test_one_documented_line_of_env_selects_the_cpu_stack(cpu):
    assert CPU_LINE and CPU_LINE.group(1) == "COMPOSE_FILE=compose.yaml:compose.cpu.yaml"
    assert set(cpu) == {"simulator", "trainer", "serve", "eval", "analysis"}
    assert "--backend" in cpu["simulator"]["command"] and "scripted" in cpu["simulator"]["command"]
    assert cpu["trainer"]["command"][:4] == ["python3", "-m", "toolcanary.train", "cpu"]
    assert cpu["serve"]["command"][:3] == ["python3", "-m", "toolcanary.serve"]


def test_no_service_asks_for_a_gpu(cpu):
    for name, service in cpu.items():
        assert not service.get("deploy", {}).get("resources", {}).get("reservations"), name


def test_every_container_stays_on_the_loopback(cpu):
    # Host networking gives a container no address of its own; each server binds 127.0.0.1 only.
    assert {name: s.get("network_mode") for name, s in cpu.items()} == {
        "simulator": "host", "trainer": "host", "serve": "host", "eval": "host", "analysis": "none"}
    assert all(not s.get("ports") for s in cpu.values())
    for name in ("simulator", "serve"):
        command = cpu[name]["command"]
        assert command[command.index("--host") + 1] == "127.0.0.1", name
        assert "127.0.0.1" in cpu[name]["healthcheck"]["test"][-1], name
    simulator_port = cpu["simulator"]["command"][cpu["simulator"]["command"].index("--port") + 1]
    assert cpu["trainer"]["environment"]["TOOLCANARY_TRAIN_SIMULATOR_URL"] == f"http://127.0.0.1:{simulator_port}"
    serve_port = cpu["serve"]["command"][cpu["serve"]["command"].index("--port") + 1]
    assert cpu["eval"]["environment"]["TOOLCANARY_EVALUATE_BASE_URL"] == f"http://127.0.0.1:{serve_port}/v1"


def test_the_cpu_images_are_the_same_dockerfiles_with_cpu_build_arguments(cpu, resolved):
    gpu = resolved["services"]
    for name in ("simulator", "trainer", "serve"):
        build = cpu[name]["build"]
        assert build["dockerfile"] == gpu[name]["build"]["dockerfile"], name
        assert build["args"]["PLATFORM"] == "cpu" and build["args"]["BASE_IMAGE"].startswith("python:"), name
        assert build["network"] == "host", name  # the builds download packages; nothing else uses a network
        assert cpu[name]["image"] != gpu[name]["image"], name  # a CPU image never takes a GPU image's tag
    assert cpu["serve"]["image"] == cpu["simulator"]["image"]  # one image serves both, as on GPUs
    for name in ("eval", "analysis"):
        same = ("dockerfile", "args")  # the context differs only by where the project lies
        assert cpu[name]["image"] == gpu[name]["image"] and cpu[name]["build"]["network"] == "host", name
        assert [cpu[name]["build"][k] for k in same] == [gpu[name]["build"][k] for k in same], name


def test_the_simulator_comes_back_when_it_dies(cpu):
    assert cpu["simulator"]["restart"] == "unless-stopped"


def test_compose_and_the_dockerfiles_agree_on_every_default_base_image(resolved):
    for name, service in resolved["services"].items():
        dockerfile = (ROOT / service["build"]["dockerfile"]).read_text()
        default = re.search(r"^ARG BASE_IMAGE=(\S+)$", dockerfile, flags=re.M).group(1)
        assert service["build"]["args"]["BASE_IMAGE"] == default, name


def test_the_build_context_leaves_out_environments_run_data_and_history():
    ignored = (ROOT / ".dockerignore").read_text().split()
    for heavy in (".venvs", "volumes", ".git", "build", ".env"):
        assert heavy in ignored, heavy


def test_a_cpu_setting_in_env_reaches_the_cpu_trainer(tmp_path):
    env = tmp_path / "cpu.env"
    env.write_text(with_ids(EXAMPLE) + "TOOLCANARY_TRAIN_STEPS=7\nCPU_SERVE_MAX_NEW_TOKENS=99\n")
    services = resolve(env, files=CPU_FILES)["services"]
    assert services["trainer"]["environment"]["TOOLCANARY_TRAIN_STEPS"] == "7"
    command = services["serve"]["command"]
    assert command[command.index("--max-new-tokens") + 1] == "99"
