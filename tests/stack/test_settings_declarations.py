"""Every setting is declared once (toolcanary.settings) and its environment name, CLI flag and wiring follow.

- each field of each service's settings class reads `<prefix><FIELD>` (shared names only in addition), and a
  value set there arrives in the field;
- each field has a `--field-name` flag in its service's command line, whose help is the field's description
  (secrets excepted: they are read from the environment only);
- each `TOOLCANARY_<SERVICE>_*` variable .env.example documents, and each TOOLCANARY_* variable Compose gives a
  container, is one that container's settings declare: a documented or wired name no settings class reads fails
  here (test_env_wiring.py checks the other half, that a documented variable reaches its container).

Run: .venvs/dev/bin/python -m pytest tests/stack/test_settings_declarations.py -q
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from cli_checks import flag_problems
from compose_env import CPU_FILES, GPU_FILES, ROOT, documented, resolve

from toolcanary.analysis.settings import AnalysisSettings
from toolcanary.audit.settings import AuditSettings
from toolcanary.demo.settings import DemoSettings
from toolcanary.evaluate.settings import EvalSettings
from toolcanary.serve.settings import ServeSettings
from toolcanary.settings import ServiceSettings, project_root
from toolcanary.simulator.settings import ENV_ONLY, SimulatorSettings
from toolcanary.train.settings import TrainSettings


def _simulator_parser() -> argparse.ArgumentParser:
    from toolcanary.simulator.__main__ import _parser

    return _subparser(_parser(), "serve")


def _train_parser() -> argparse.ArgumentParser:
    from toolcanary.train.__main__ import build_parser

    return _subparser(build_parser(), "cpu")


def _demo_parser() -> argparse.ArgumentParser:
    from toolcanary.demo.__main__ import build_parser

    return build_parser()


def _serve_parser() -> argparse.ArgumentParser:
    from toolcanary.serve.__main__ import build_parser

    return build_parser()


def _subparser(parser: argparse.ArgumentParser, verb: str) -> argparse.ArgumentParser:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[verb]


# Each settings class, its prefix, the parser(s) of its command line and the fields read from the environment only.
SERVICES = {
    "simulator": (SimulatorSettings, "TOOLCANARY_SIMULATOR_", lambda: [_simulator_parser()], set(ENV_ONLY)),
    "train": (TrainSettings, "TOOLCANARY_TRAIN_", lambda: [_train_parser()], set()),
    # Their command lines import their own environments' packages: tests/evaluate/test_settings_cli.py,
    # tests/audit/test_measures.py and tests/analysis/test_cli.py check their flags with flag_problems.
    "evaluate": (EvalSettings, "TOOLCANARY_EVALUATE_", None, set()),
    "audit": (AuditSettings, "TOOLCANARY_AUDIT_", None, set()),
    "analysis": (AnalysisSettings, "TOOLCANARY_ANALYSIS_", None, set()),
    "demo": (DemoSettings, "TOOLCANARY_DEMO_", lambda: [_demo_parser()], set()),
    "serve": (ServeSettings, "TOOLCANARY_SERVE_", lambda: [_serve_parser()], set()),
}
# The Compose services and the settings classes their processes read.
CONTAINERS = {
    "simulator": [SimulatorSettings],
    "trainer": [TrainSettings, SimulatorSettings],  # the trainer sends the simulator's token
    "eval": [EvalSettings, AuditSettings],
    "analysis": [AnalysisSettings],
    "serve": [ServeSettings],
}
# compose.yaml's x-run-env block, given to every container; each process reads the names it declares.
RUN_ENV = {"TOOLCANARY_RUN", "TOOLCANARY_CHECKPOINTS_DIR", "TOOLCANARY_RUNS_DIR", "TOOLCANARY_RESULTS_DIR"}
# TOOLCANARY_* names that are not service settings, with who reads them.
NOT_SETTINGS = {
    "TOOLCANARY_POLICY_MODEL": "the GPU recipe's YAML (trustee_qwen3_4b.yaml interpolates it)",
    "TOOLCANARY_COMMIT": "the images' build argument and the checkpoint manifests (publisher.py)",
}
PREFIXES = {prefix: name for name, (_, prefix, _, _) in SERVICES.items()}


def declared(classes: list[type[ServiceSettings]]) -> set[str]:
    return {variable for cls in classes for field in cls.model_fields for variable in cls.env_names(field)}


def sample(cls: type[ServiceSettings], field: str) -> tuple[str, object]:
    """An environment value other than the default, and what the field holds after reading it."""
    default = getattr(cls(), field)
    if isinstance(default, bool):
        return ("false" if default else "true"), not default
    if isinstance(default, int) and not isinstance(default, bool):
        return str(default + 7), default + 7
    if isinstance(default, float):
        return str(default + 0.25), default + 0.25
    if isinstance(default, tuple | list):
        return "3,5", (3, 5)
    if isinstance(default, Path) or "dir" in field or field in ("library", "checkpoints", "runs", "results"):
        return "/tmp/settings-sample", Path("/tmp/settings-sample")
    return "sample-1", "sample-1"


PAIRS = [(service, field) for service, (cls, *_) in SERVICES.items() for field in cls.model_fields]
# Fields whose values other fields constrain; they get a value that fits.
FITTING = {("simulator", "mode"): ("toolcanary", "toolcanary"), ("simulator", "backend"): ("scripted", "scripted"),
           ("simulator", "no_call_fraction"): ("0.5", 0.5), ("simulator", "temperature"): ("1.25", 1.25),
           ("simulator", "frequency_penalty"): ("0.5", 0.5), ("simulator", "log_level"): ("debug", "debug"),
           ("train", "policy"): ("smollm2", "smollm2"), ("train", "mode"): ("toolcanary", "toolcanary"),
           ("train", "max_aborted_frac"): ("0.25", 0.25), ("evaluate", "run"): ("r1", "r1"),
           ("audit", "schema_threshold"): ("0.9", 0.9), ("audit", "query_threshold"): ("0.75", 0.75),
           ("analysis", "run"): ("r1", "r1"), ("analysis", "hac_maxlags"): ("4", 4),
           ("analysis", "interval_level"): ("0.9", 0.9), ("demo", "policy"): ("smollm2", "smollm2"),
           ("demo", "run"): ("r1", "r1"), ("simulator", "run"): ("r1", "r1"), ("train", "run"): ("r1", "r1"),
           ("simulator", "upstreams"): ("http://a:1, http://b:2", ["http://a:1", "http://b:2"]),
           ("simulator", "backoff"): ("fixed", "fixed"), ("evaluate", "serving"): ("compose", "compose"),
           ("train", "starting_policy_cache"): ("/tmp/settings-sample", Path("/tmp/settings-sample")),
           ("evaluate", "gpus"): ("3,5", ("3", "5")),
           ("simulator", "token"): ("a-sample-token-of-32-characters", "a-sample-token-of-32-characters"),
           ("simulator", "trustee_commit"): ("1" * 40, "1" * 40), ("train", "trustee_commit"): ("1" * 40, "1" * 40),
           ("demo", "no_call_fraction"): ("0.5", 0.5), ("simulator", "replay_tasks_of"): ("r0", "r0"),
           ("train", "replay_tasks_of"): ("r0", "r0"), ("serve", "max_model_len"): ("4096", 4096),
           ("serve", "max_new_tokens"): ("64", 64), ("serve", "enable_thinking"): ("false", False),
           ("train", "starting_policy_seed"): ("3", 3), ("demo", "starting_policy_seed"): ("3", 3),
           ("demo", "warm_start_no_call_fraction"): ("0.5", 0.5), ("demo", "lr"): ("0.001", 0.001),
           ("demo", "ids_file"): ("/tmp/settings-sample", Path("/tmp/settings-sample")),
           ("demo", "starting_policy_cache"): ("/tmp/settings-sample", Path("/tmp/settings-sample"))}


@pytest.mark.parametrize(("service", "field"), PAIRS)
def test_each_field_reads_the_variable_its_declaration_names(service, field):
    cls, prefix, _, _ = SERVICES[service]
    names = cls.env_names(field)
    assert prefix + field.upper() in names, f"{cls.__name__}.{field} is not read from {prefix}{field.upper()}"
    assert all(re.fullmatch(r"[A-Z][A-Z0-9_]*", n) for n in names)
    raw, expected = FITTING.get((service, field)) or sample(cls, field)
    for name in names:
        got = getattr(cls.from_env({name: raw}), field)
        if isinstance(expected, Path):
            got = Path(got)
        assert got == expected, f"{name}={raw!r} gave {cls.__name__}.{field} = {got!r}"


@pytest.mark.parametrize("service", sorted(s for s, spec in SERVICES.items() if spec[2] is not None))
def test_each_field_has_a_flag_whose_help_is_its_description(service):
    cls, _, parsers, env_only = SERVICES[service]
    for parser in parsers():
        assert flag_problems(parser, cls, env_only=env_only) == []


def test_a_bad_value_names_the_flag_and_the_variable_and_what_to_do():
    from toolcanary.contract import ContractError

    with pytest.raises(ContractError, match=r"--threads or environment variable TOOLCANARY_EVALUATE_THREADS: "
                                            r"expected a value of type int, got 'many'\. Fix"):
        EvalSettings.from_env({"TOOLCANARY_EVALUATE_THREADS": "many"})
    with pytest.raises(ContractError, match="run id: 1-100 letters"):
        TrainSettings.from_env({}, run="../escape")


def test_a_plain_constructor_reads_no_environment(monkeypatch):
    monkeypatch.setenv("TOOLCANARY_SIMULATOR_SEED", "5")
    assert SimulatorSettings().seed == 0 and SimulatorSettings.from_env().seed == 5


def test_every_data_root_defaults_under_the_project_root():
    assert (project_root() / "pyproject.toml").is_file() and project_root() == ROOT
    for cls in (SimulatorSettings, TrainSettings, EvalSettings, AuditSettings, AnalysisSettings, DemoSettings,
                ServeSettings):
        for field, value in cls().model_dump().items():
            if isinstance(value, Path) and field != "library":
                assert value.parent == ROOT / "volumes", (cls.__name__, field, value)


EXAMPLE = documented((ROOT / ".env.example").read_text())


@pytest.mark.parametrize("name", sorted(n for n in EXAMPLE if any(n.startswith(p) for p in PREFIXES)))
def test_each_documented_service_setting_is_declared_by_that_service(name):
    service = next(s for p, s in PREFIXES.items() if name.startswith(p))
    assert name in declared([SERVICES[service][0]]), (
        f".env.example documents {name}, but {SERVICES[service][0].__name__} declares no such setting")


@pytest.mark.parametrize("files", [GPU_FILES, CPU_FILES], ids=["gpu", "cpu"])
def test_each_variable_compose_gives_a_container_is_declared_by_what_runs_there(files, example_env):
    services = resolve(example_env, files=files)["services"]
    assert set(services) == set(CONTAINERS)
    for service, config in services.items():
        names = {n for n in config.get("environment", {}) if n.startswith("TOOLCANARY_")}
        unknown = names - declared(CONTAINERS[service]) - RUN_ENV - set(NOT_SETTINGS)
        assert not unknown, f"compose gives {service} {sorted(unknown)}, which no settings class there reads"
    assert RUN_ENV <= declared([EvalSettings, AuditSettings, AnalysisSettings, TrainSettings, SimulatorSettings])


def test_one_run_id_rule_for_every_service():
    from toolcanary.contract import ContractError, check_run_id

    longest = "r" * 100
    assert check_run_id(longest) == longest and check_run_id("a.b_c-1") == "a.b_c-1"
    for bad in ("r" * 101, ".hidden", "-flag", "a/b", "a b", ""):
        with pytest.raises(ContractError, match="run id: 1-100 letters"):
            check_run_id(bad)
    for cls in (SimulatorSettings, TrainSettings, EvalSettings, AnalysisSettings, DemoSettings):
        assert cls.from_env({}, run=longest).run == longest
        with pytest.raises(ContractError, match="--run"):
            cls.from_env({}, run="r" * 101)
