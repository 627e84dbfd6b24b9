"""Every command line's `--help` shows the defaults a run really uses.

Each CLI runs `--help` in its own environment (.venvs/<env>) with an empty environment (no TOOLCANARY_* variable
but the test suite's stand-in TRUSTEE commit),
and each `(default: X)` it prints is compared with the value the settings class resolves for a run of the same
command line (`from_env({})` with the flags that choose a preset: the demo's policy and size, the trainer's
policy), or with the declared default of a command's own option. A flag whose field has a default but whose help
shows none fails too, as does a demo size whose per-policy value the help does not list.

Run: .venvs/dev/bin/python -m pytest tests/stack/test_cli_help_defaults.py -q
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from toolcanary.analysis.settings import AnalysisOptions, AnalysisSettings
from toolcanary.audit.settings import AuditOptions, AuditSettings
from toolcanary.demo.settings import POLICY_SERVING, SIZES, DemoSettings, StudyOptions
from toolcanary.evaluate.settings import (
    SCHEDULE_ONLY,
    WATCH_ONLY,
    EvalSettings,
    ItemChoice,
    PassChoice,
    Verbosity,
    WatchLimits,
)
from toolcanary.serve.settings import ServeChoice, ServeSettings
from toolcanary.settings import ServiceSettings, cli_of, flag_names, project_root
from toolcanary.simulator.settings import BuildLibraryOptions, ServeCheck, SimulatorSettings, ValidateOptions
from toolcanary.train.__main__ import (
    BuildPolicy,
    HeldOut,
    Logging,
    MainPpoArgs,
    Progress,
    SeedData,
    WaitForNodes,
)
from toolcanary.train.settings import TrainSettings

ROOT = project_root()
# The environment of every help and resolution here: only the test suite's stand-in TRUSTEE commit (tests/conftest.py
# pins it for the processes the tests start).
ENVIRONMENT = {k: v for k, v in os.environ.items() if k.startswith("TOOLCANARY_") and k.endswith("_TRUSTEE_COMMIT")}

# (environment, module and arguments before --help, the models its flags come from, the values that choose a preset
# and, under "absent", the fields of those models the subcommand has no flag for)
CLIS: list[tuple[str, list[str], tuple[type[BaseModel], ...], dict[str, Any]]] = [
    ("dev", ["toolcanary.demo"], (DemoSettings,), {}),
    ("dev", ["toolcanary.demo", "--policy", "tiny"], (DemoSettings,), {"policy": "tiny"}),
    ("dev", ["toolcanary.demo", "--policy", "tiny", "--quick"], (DemoSettings,), {"policy": "tiny", "quick": True}),
    ("dev", ["toolcanary.demo", "--quick"], (DemoSettings,), {"quick": True}),
    ("dev", ["toolcanary.demo.study"], (StudyOptions,), {}),
    ("eval", ["toolcanary.evaluate"], (Verbosity,), {}),
    ("eval", ["toolcanary.evaluate", "run"], (PassChoice, ItemChoice, EvalSettings), {"absent": SCHEDULE_ONLY}),
    ("eval", ["toolcanary.evaluate", "eval-all"], (ItemChoice, EvalSettings), {"absent": WATCH_ONLY}),
    ("eval", ["toolcanary.evaluate", "watch"], (WatchLimits, ItemChoice, EvalSettings), {}),
    ("serve", ["toolcanary.serve"], (ServeChoice, ServeSettings), {}),
    ("simulator", ["toolcanary.simulator", "serve"], (SimulatorSettings, ServeCheck), {}),
    ("simulator", ["toolcanary.simulator", "validate"], (ValidateOptions,), {}),
    ("simulator", ["toolcanary.simulator", "build-library"], (BuildLibraryOptions,), {}),
    ("analysis", ["toolcanary.analysis"], (AnalysisOptions, AnalysisSettings), {}),
    ("eval", ["toolcanary.audit"], (AuditOptions, AuditSettings), {}),
    ("train", ["toolcanary.train", "cpu"], (Logging, Progress, TrainSettings), {}),
    ("train", ["toolcanary.train", "cpu", "--policy", "smollm2"], (Logging, Progress, TrainSettings),
     {"policy": "smollm2"}),
    ("train", ["toolcanary.train", "starting-policy"], (Logging, Progress, HeldOut, TrainSettings), {}),
    ("train", ["toolcanary.train", "build-policy"], (Logging, BuildPolicy), {}),
    ("train", ["toolcanary.train", "seed-data"], (Logging, SeedData), {}),
    ("train", ["toolcanary.train", "check-recipe"], (Logging, MainPpoArgs), {}),
    ("train", ["toolcanary.train", "wait-for-nodes"], (Logging, WaitForNodes), {}),
]
ENTRY = re.compile(r"^  (-[^ ].*?)(?:  +(.*))?$")


def help_text(venv: str, argv: list[str]) -> str:
    python = ROOT / ".venvs" / venv / "bin" / "python"
    if not python.exists():
        pytest.skip(f".venvs/{venv} is not built (make setup)")
    # No TOOLCANARY_* variable: the defaults shown are those of an empty environment. A wide terminal keeps each
    # option's help on one line.
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "COLUMNS": "10000", **ENVIRONMENT}
    done = subprocess.run([str(python), "-m", *argv, "--help"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def options(text: str) -> dict[str, str]:
    """flag -> its help, for every option the help lists (the help may start on the line after the flags)."""
    found, current = {}, None
    for line in text.splitlines():
        match = ENTRY.match(line)
        if match:
            flags = [part.split(" ")[0] for part in match.group(1).split(", ")]
            current = flags
            for flag in flags:
                found[flag] = match.group(2) or ""
        elif current and line.startswith(" " * 8) and line.strip():
            for flag in current:
                found[flag] = (found[flag] + " " + line.strip()).strip()
        else:
            current = None
    return found


def default_shown(help_line: str, description: str) -> str | None:
    """The default a flag's help shows after its description: "(default: X)" or "(default: X; by ...)"."""
    help_line, description = " ".join(help_line.split()), " ".join(description.split())
    assert help_line.startswith(description), (help_line, description)
    rest = help_line[len(description):].strip()
    if not rest:
        return None
    if rest == "(required)":
        return rest
    match = re.fullmatch(r"\((?:default: ([^;]*))?(?:;? ?by .*)?\)", rest)
    assert match, f"after the description: {rest!r}"
    return match.group(1)


def shown(value: Any) -> str | None:
    """How a default reads in the help; None: no default shown (nothing set)."""
    if value is None or value in ("", [], ()):
        return None
    if isinstance(value, list | tuple):
        return " ".join(str(v) for v in value)
    return str(value)


def resolved(model: type[BaseModel], chosen: dict[str, Any]) -> BaseModel | None:
    if issubclass(model, ServiceSettings):
        return model.from_env(ENVIRONMENT, **{k: v for k, v in chosen.items() if k in model.model_fields})
    return None


@pytest.mark.parametrize(("venv", "argv", "models", "chosen"), CLIS, ids=[" ".join(c[1]) for c in CLIS])
def test_each_default_the_help_shows_is_the_one_a_run_uses(venv, argv, models, chosen):
    helps = options(help_text(venv, argv))
    chosen = dict(chosen)
    absent = set(chosen.pop("absent", ()))
    checked = 0
    for model in models:
        run = resolved(model, chosen)
        for field, info in model.model_fields.items():
            cli = cli_of(info)
            if cli.env_only or cli.positional or field in absent:
                continue
            flag = flag_names(model, field)[0]
            assert flag in helps, f"{' '.join(argv)} --help lists no {flag}"
            got = default_shown(helps[flag], info.description or "")
            if info.is_required():
                assert got == "(required)", f"{flag}: a required flag says so"
                continue
            if not cli.show_default:
                assert got is None, f"{flag}: its description says its default"
                continue
            expected = shown(getattr(run, field) if run is not None else info.get_default(call_default_factory=True))
            if expected is None and "default" not in (info.description or ""):
                expected = "none"  # nothing set, and the help says so
            assert got == expected, f"{' '.join(argv)} --help: {flag} shows {got!r}, a run uses {expected!r}"
            checked += 1
    assert checked


@pytest.mark.parametrize("quick", [False, True])
def test_the_demo_help_lists_each_policys_sizes(quick):
    text = options(help_text("dev", ["toolcanary.demo", *(["--quick"] if quick else [])]))
    for policy, sizes in SIZES.items():
        for size, values in sizes.items():
            label = f"{policy}/{'quick' if size == 'quick' else 'no-quick'}"
            for field, value in {**values, **POLICY_SERVING.get(policy, {})}.items():
                assert f"{label} {value}" in text[flag_names(DemoSettings, field)[0]], (field, label)


def test_the_demo_defaults_are_the_smollm2_demo_and_a_chosen_policy_changes_them():
    smollm2, tiny = DemoSettings.from_env({}), DemoSettings.from_env({}, policy="tiny", quick=True)
    assert (smollm2.steps, smollm2.sample, smollm2.max_model_len) == (2, 3, 8192)
    assert (tiny.steps, tiny.sample, tiny.max_model_len) == (2, 1, 32768)
    flags = options(help_text("dev", ["toolcanary.demo", "--policy", "tiny"]))
    assert flags["--steps"].startswith("GRPO steps (default: 12;")
    # The environment chooses a preset as a flag does, and a flag still beats it.
    assert DemoSettings.from_env({"TOOLCANARY_DEMO_POLICY": "tiny"}).steps == 12
    assert DemoSettings.from_env({"TOOLCANARY_DEMO_POLICY": "tiny", "TOOLCANARY_DEMO_STEPS": "5"}).steps == 5
    assert DemoSettings.from_env({"TOOLCANARY_DEMO_STEPS": "5"}, steps=7).steps == 7


def test_help_shows_a_default_the_environment_sets(tmp_path: Path):
    python = ROOT / ".venvs" / "serve" / "bin" / "python"
    if not python.exists():
        pytest.skip(".venvs/serve is not built (make setup)")
    env = {"PATH": os.environ["PATH"], "COLUMNS": "10000", "TOOLCANARY_SERVE_PORT": "8123"}
    done = subprocess.run([str(python), "-m", "toolcanary.serve", "--help"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert "TCP port vLLM listens on (default: 8123)" in options(done.stdout)["--port"]
