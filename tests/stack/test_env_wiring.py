"""Every variable .env.example documents reaches something in the resolved Compose configuration.

A service setting (TOOLCANARY_SIMULATOR_* -> simulator, the simulator token also -> trainer, TOOLCANARY_TRAIN_*
-> trainer, TOOLCANARY_EVALUATE_* and TOOLCANARY_AUDIT_* -> eval, TOOLCANARY_ANALYSIS_* -> analysis) must arrive in that service's environment
with the value from the env file; every other documented variable must change the resolved configuration
(Compose interpolation) of the GPU stack or of the stack without GPUs (compose.cpu.yaml), except Compose's
own COMPOSE_FILE, which tests/stack/test_cpu_variant.py covers. A variable the stack would silently ignore
fails here. Values are distinct sentinels, so a hard-coded value that happens to equal the example cannot
pass.

Run: .venvs/dev/bin/python -m pytest tests/stack/test_env_wiring.py -q
"""

import json
import re

import pytest
from compose_env import CPU_FILES, GPU_FILES, ROOT, TEST_GID, TEST_UID, documented, resolve, with_ids

ROUTES = {
    "TOOLCANARY_SIMULATOR_": {"simulator"},
    "TOOLCANARY_TRAIN_": {"trainer"},
    "TOOLCANARY_EVALUATE_": {"eval"},
    "TOOLCANARY_AUDIT_": {"eval"},
    "TOOLCANARY_ANALYSIS_": {"analysis"},
}
# The trainer sends the simulator's bearer token with each role call.
EXTRA_ROUTES = {"TOOLCANARY_SIMULATOR_TOKEN": {"trainer"}}
# In-container values that must beat .env: eval reaches serve by its service name, .env holds the host's address.
PINNED = {("eval", "TOOLCANARY_EVALUATE_BASE_URL"): "http://serve:8000/v1"}
# Compose's own variables: they choose files, not values (test_cpu_variant.py checks COMPOSE_FILE's line).
COMPOSE_OWN = {"COMPOSE_FILE"}
# Values empty on purpose in .env.example, filled in by `make env` (tested in test_ownership.py).
FILLED_BY_MAKE_ENV = {"TOOLCANARY_UID": TEST_UID, "TOOLCANARY_GID": TEST_GID}


def routes(name: str) -> set[str]:
    services = next((s for prefix, s in ROUTES.items() if name.startswith(prefix)), set())
    return services | EXTRA_ROUTES.get(name, set())


EXAMPLE = (ROOT / ".env.example").read_text()
DOCUMENTED = documented(EXAMPLE)
COMMENTED_OUT = {name for name in DOCUMENTED if re.search(rf"^#\s*{name}=", EXAMPLE, flags=re.M)}
ROUTED = sorted(n for n in DOCUMENTED if routes(n))
INTERPOLATED = sorted(n for n in DOCUMENTED if not routes(n) and n not in COMPOSE_OWN)


def every_line_set(values: dict[str, str]) -> str:
    """An env file that sets every documented variable (commented-out ones too) to `values`, else its example."""
    merged = {name: FILLED_BY_MAKE_ENV.get(name, value) or value for name, value in DOCUMENTED.items()} | values
    return "".join(f"{name}={value}\n" for name, value in merged.items())


def sentinel(name: str, value: str) -> str:
    """A value other than the example's that still fits where Compose puts it (ports, GPU ids, paths, tags, and
    IPv4 addresses, which Compose checks where it publishes a port)."""
    value = FILLED_BY_MAKE_ENV.get(name, value)
    if value.isdigit():
        return str(int(value) + 11)
    if re.fullmatch(r"(\d{1,3}\.){3}\d{1,3}", value):
        *network, host = value.split(".")
        return ".".join([*network, str((int(host) + 11) % 256)])
    return f"{value}-x"


def test_the_example_documents_settings_of_every_service_and_some_interpolated_wiring():
    assert {s for n in ROUTED for s in routes(n)} == {"simulator", "trainer", "eval", "analysis"}
    assert {"RUN", "STEP", "SERVE_GPU", "TOOLCANARY_UID", "TOOLCANARY_COMMIT"} <= set(INTERPOLATED)


@pytest.fixture(scope="module")
def with_sentinels(tmp_path_factory) -> dict:
    """The stack resolved with a distinct sentinel in every routed variable at once."""
    values = {name: f"sentinel-{name.lower().replace('_', '-')}" for name in ROUTED}
    path = tmp_path_factory.mktemp("wiring") / "sentinels.env"
    path.write_text(every_line_set(values))
    return {"config": resolve(path), "values": values}


@pytest.mark.parametrize("name", ROUTED)
def test_a_service_setting_reaches_its_service_with_the_env_file_value(name, with_sentinels):
    services, value = with_sentinels["config"]["services"], with_sentinels["values"][name]
    for service in sorted(routes(name)):
        environment = services[service].get("environment", {})
        assert name in environment, (
            f"{name} is documented in .env.example but {service} never receives it: list it (without a value) in "
            f"{service}'s environment in compose.yaml")
        expected = PINNED.get((service, name), value)
        assert environment[name] == expected, f"{service} got {name}={environment[name]!r}, expected {expected!r}"
    for service, config in services.items():
        if service not in routes(name):
            assert value not in json.dumps(config.get("environment", {})), f"{name} leaks into {service}"


@pytest.mark.parametrize("name", INTERPOLATED)
def test_every_other_documented_variable_changes_the_resolved_configuration(name, tmp_path):
    base, changed = tmp_path / "base.env", tmp_path / "changed.env"
    base.write_text(every_line_set({}))
    new = sentinel(name, DOCUMENTED[name])
    changed.write_text(every_line_set({name: new}))
    moved = [files for files in (GPU_FILES, CPU_FILES)
             if services_only(resolve(base, files=files)) != services_only(resolve(changed, files=files))]
    assert moved, (
        f"{name} is documented in .env.example but changing it to {new!r} changes no service Compose resolves, "
        "with or without GPUs: use it in compose.yaml or compose.cpu.yaml, or drop it from .env.example")
    # Compose makes relative bind-mount paths absolute: look for the value without its leading "./", spelt as
    # JSON spells it inside a string (a JSON value such as SIMULATOR_HF_OVERRIDES has its quotes escaped there).
    after = resolve(changed, files=moved[0])
    assert json.dumps(new.removeprefix("./"))[1:-1] in json.dumps(after), (
        f"{name}={new!r} changed a service but appears nowhere")


def services_only(config: dict) -> dict:
    """What the containers get: the services (x- fields are interpolated too, but reach no container)."""
    return config["services"]


def test_no_container_receives_an_empty_value_and_commented_out_settings_stay_unset(resolved):
    # Compose gives a value-less entry NAME the shell's or .env's value; set in neither, it stays null and the
    # engine does not create the variable (a name without '=' means "remove"), so the service keeps its default.
    # An empty string instead would be read as a value: `int("")` fails in the eval client, Path("") is the cwd.
    assert {"TOOLCANARY_SIMULATOR_TOKEN", "TOOLCANARY_AUDIT_LIBRARY"} <= COMMENTED_OUT
    for service, config in resolved["services"].items():
        for name, value in config.get("environment", {}).items():
            assert value != "", f"{service} would receive {name} as an empty string"
            if name in COMMENTED_OUT and (service, name) not in PINNED:
                assert value is None, f"{service} got {name}={value!r} although .env.example leaves it commented out"


def test_what_the_user_exports_wins_over_the_env_file_but_not_over_a_pinned_value(example_env):
    config = resolve(example_env, env={"TOOLCANARY_EVALUATE_THREADS": "3", "TOOLCANARY_SIMULATOR_SEED": "17",
                                       "TOOLCANARY_EVALUATE_BASE_URL": "http://127.0.0.1:9999/v1"})
    services = config["services"]
    assert services["eval"]["environment"]["TOOLCANARY_EVALUATE_THREADS"] == "3"
    assert services["simulator"]["environment"]["TOOLCANARY_SIMULATOR_SEED"] == "17"
    assert services["eval"]["environment"]["TOOLCANARY_EVALUATE_BASE_URL"] == "http://serve:8000/v1"


def test_the_example_env_file_resolves_to_the_documented_values(resolved):
    """The plain example (ids filled in) gives each service the example's own values."""
    example = documented(with_ids(EXAMPLE))
    services = resolved["services"]
    for name in ROUTED:
        for service in routes(name):
            got = services[service]["environment"].get(name)
            if (service, name) in PINNED:
                assert got == PINNED[(service, name)]
            elif name not in COMMENTED_OUT:
                assert got == example[name], f"{service} got {name}={got!r}, .env.example says {example[name]!r}"
