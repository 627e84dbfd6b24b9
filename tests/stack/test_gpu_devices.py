"""GPU reservations resolve to lists of single device ids, one .env variable per device.

Hosts that resolve GPUs through CDI look each entry of `device_ids` up as one device: "4,5,6,7" is no device
there. Compose cannot split a string, so each device has its own variable (TRAINER_GPU_0..3, SIMULATOR_GPU_0..3,
SERVE_GPU).

Run: .venvs/dev/bin/python -m pytest tests/stack/test_gpu_devices.py -q
"""

import re

from compose_env import resolve

DEFAULTS = {"trainer": ["0", "1", "2", "3"], "simulator": ["4", "5", "6", "7"], "serve": ["0"]}


def device_ids(config: dict) -> dict[str, list[str]]:
    ids = {}
    for name, service in config["services"].items():
        for device in service.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices", []):
            ids.setdefault(name, []).extend(device.get("device_ids", []))
    return ids


def test_the_example_env_reserves_todays_gpus_one_id_per_entry(resolved):
    assert device_ids(resolved) == DEFAULTS


def test_every_device_has_its_own_variable(example_env, tmp_path):
    text = example_env.read_text()
    for name, value in {"TRAINER_GPU_2": "12", "SIMULATOR_GPU_0": "10", "SIMULATOR_GPU_3": "13", "SERVE_GPU": "9"}.items():
        text, count = re.subn(rf"^{name}=.*$", f"{name}={value}", text, flags=re.M)
        assert count == 1, f".env.example should document {name}"
    custom = tmp_path / "custom.env"
    custom.write_text(text)
    assert device_ids(resolve(custom)) == {"trainer": ["0", "1", "12", "3"], "simulator": ["10", "5", "6", "13"],
                                           "serve": ["9"]}


def test_without_the_variables_compose_falls_back_to_the_same_defaults(example_env, tmp_path):
    bare = tmp_path / "bare.env"
    bare.write_text(re.sub(r"^(TRAINER|SIMULATOR)_GPU_\d=.*$|^SERVE_GPU=.*$", "", example_env.read_text(), flags=re.M))
    assert device_ids(resolve(bare)) == DEFAULTS


def test_no_entry_holds_more_than_one_id(resolved):
    for service, ids in device_ids(resolved).items():
        for entry in ids:
            assert re.fullmatch(r"[0-9]+|GPU-[0-9a-f-]+", entry), f"{service}: device id {entry!r} is not one device"
