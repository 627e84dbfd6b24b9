"""TRUSTEE's recipe (recipes/trustee-qwen3-4b/trustee_reference.yaml) against this one, key by key: every
difference is a row of the README's deviation table, and every row is a difference.

The recipe is composed exactly as test_recipe.py composes it (the `report` fixture of conftest.py: verl's own
main_ppo up to ray.init, every check passed, interpolations resolved). For each key of the reference's `verl:`
section the value here is the composed config's, or, for a key listed in trustee_equivalents.yaml, the value
at the place that file names (TRUSTEE's curriculum keys are constants of toolcanary.train.curriculum here,
for one). A key verl 0.9.1's config does not have and that has no equivalent counts as a difference.

Which keys are compared: every key whose value TRUSTEE's files determine, with two exceptions.
- `value: unknown` (TRUSTEE sets nothing and verl 0.7.0's default was not read) and `value: unset` (TRUSTEE
  leaves the key out) name no value to match.
- A key whose note calls it inert AND that verl 0.9.1's config does not have (sampling_control.* under
  TRUSTEE's disabled switch): it has no effect in TRUSTEE's run and no place here. An inert key that verl
  0.9.1 does have (critic.*, the dynamic-batch token caps, algorithm.gamma) is compared: the recipe could
  carry it, so a difference is listed, as inert, rather than passed over. The switch itself
  (sampling_control.enable) carries no inert note and is compared.

Values compare as numbers when both are numbers (0.1 == 0.10, 3/100 == 0.03; a bool is not a number), as
lists item by item, and otherwise by equality. The README table is parsed from its markdown: the first
table under "### Keys" in the section "Deviations from TRUSTEE's `scripts/run.sh`"; the backticked keys of
a row's first cell are the keys it lists, and its TRUSTEE cell must state TRUSTEE's value.

The simulator block compares the reference's `simulator.role_call` and `simulator.task_author_call` facts that
are settings with the simulator service's settings in its trustee mode (the serving facts are checked
where vLLM's command line is: tests/simulator/test_start_simulator.py).

Run: .venvs/train/bin/python -m pytest tests/train/test_trustee_deviations.py -q
"""

from __future__ import annotations

import importlib
import re
from fractions import Fraction
from numbers import Number

import pytest
import yaml
from conftest import RECIPE
from omegaconf import OmegaConf

from toolcanary.simulator.settings import SimulatorSettings

README = RECIPE / "README.md"
SECTION = "## Deviations from TRUSTEE's `scripts/run.sh`"
KEYS_HEADING = "### Keys"
REFERENCE = yaml.safe_load((RECIPE / "trustee_reference.yaml").read_text())
EQUIVALENTS = yaml.safe_load((RECIPE / "trustee_equivalents.yaml").read_text())
AGENT_LOOP = yaml.safe_load((RECIPE / "agent_loops.yaml").read_text())[0]
NO_VALUE = {"unknown", "unset"}


class _Absent:
    def __repr__(self) -> str:
        return "absent"


ABSENT = _Absent()


def same(trustee, ours) -> bool:
    """Equal as TRUSTEE's YAML means it: numbers by value, lists item by item, the rest by equality."""
    if isinstance(trustee, list) and isinstance(ours, list | tuple):
        return len(trustee) == len(ours) and all(same(a, b) for a, b in zip(trustee, ours, strict=True))
    if isinstance(trustee, bool) or isinstance(ours, bool):
        return type(trustee) is type(ours) and trustee == ours
    if isinstance(trustee, Number) and isinstance(ours, Number):
        return _exact(trustee) == _exact(ours)
    return trustee == ours


def _exact(number: Number) -> Fraction:
    """A float as the decimal it was written as (0.03 -> 3/100), so that no tolerance is needed."""
    return Fraction(repr(number)) if isinstance(number, float) else Fraction(number)


def equivalent_value(entry: dict):
    """The value at the place a trustee_equivalents.yaml entry names."""
    if "agent_loop" in entry:
        return AGENT_LOOP.get(entry["agent_loop"], ABSENT)
    module, _, path = entry["python"].partition(":")
    value = importlib.import_module(module)
    for part in path.split("."):
        if isinstance(value, dict):
            value = value[part]
        elif isinstance(value, type) and part in getattr(value, "model_fields", {}):
            value = value.model_fields[part].default  # a settings field: its declared default
        else:
            value = getattr(value, part)
    return value


def ours(config, key: str):
    """The value this repository runs with for a reference key (ABSENT: nowhere)."""
    if key in EQUIVALENTS:
        return equivalent_value(EQUIVALENTS[key])
    value = OmegaConf.select(config, key, default=ABSENT)
    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value


def skip_reason(entry: dict, in_verl: bool) -> str | None:
    if str(entry["value"]) in NO_VALUE:
        return f"value {entry['value']}"
    if "inert" in str(entry.get("note", "")) and not in_verl:
        return "inert in TRUSTEE's run and not a key of verl 0.9.1"
    return None


def differences(config) -> dict[str, tuple[object, object]]:
    """key -> (TRUSTEE's value, ours) for every compared key that differs or has no place here."""
    found = {}
    for key, entry in REFERENCE["verl"].items():
        value = ours(config, key)
        if skip_reason(entry, in_verl=value is not ABSENT):
            continue
        if value is ABSENT or not same(entry["value"], value):
            found[key] = (entry["value"], value)
    return found


def table_rows(readme: str) -> dict[str, list[str]]:
    """key -> cells of its row in the README's key table (a cell may list several keys)."""
    section = readme.split(SECTION, 1)[1].split("\n## ", 1)[0]
    assert KEYS_HEADING in section, f"README: no '{KEYS_HEADING}' heading under '{SECTION}'"
    lines = section.split(KEYS_HEADING, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    assert table[0] == ["Key", "TRUSTEE", "ToolCanary", "Why"], f"README key table header: {table[0]}"
    rows: dict[str, list[str]] = {}
    for cells in table[2:]:
        assert len(cells) == 4, f"README key table: a row without four cells: {cells}"
        keys = re.findall(r"`([^`]+)`", cells[0])
        assert keys, f"README key table: a row names no backticked key: {cells}"
        for key in keys:
            assert key not in rows, f"README key table: {key} has two rows"
            rows[key] = cells
    return rows


def unlisted(found: dict, rows: dict) -> list[str]:
    return [f"{key}: TRUSTEE {trustee!r}, here {here!r}" for key, (trustee, here) in found.items() if key not in rows]


def stale(found: dict, rows: dict) -> list[str]:
    problems = []
    for key in rows:
        if key not in REFERENCE["verl"]:
            problems.append(f"{key}: not a key of trustee_reference.yaml's verl section")
        elif key not in found:
            problems.append(f"{key}: resolves to TRUSTEE's value {REFERENCE['verl'][key]['value']!r} (or is skipped)")
    return problems


def rendered(value) -> str:
    """A value as the table writes it (YAML's spelling)."""
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ", ".join(rendered(v) for v in value) + "]"
    return str(value)


def misstated(found: dict, rows: dict) -> list[str]:
    """Rows whose TRUSTEE cell does not give TRUSTEE's value, or whose ToolCanary cell does not give ours
    (checked for numbers, booleans, null and absent keys: strings here depend on the environment)."""
    problems = []
    for key, (trustee, here) in found.items():
        if key not in rows:
            continue
        cells = [cell.replace("`", "") for cell in rows[key]]
        if rendered(trustee) not in cells[1]:
            problems.append(f"{key}: TRUSTEE cell {rows[key][1]!r} does not say {rendered(trustee)!r}")
        expected = "absent" if here is ABSENT else rendered(here) if not isinstance(here, str | list) else None
        if expected is not None and expected not in cells[2]:
            problems.append(f"{key}: ToolCanary cell {rows[key][2]!r} does not say {expected!r}")
    return problems


@pytest.fixture(scope="module")
def found(report) -> dict:
    return differences(report.config)


def test_every_difference_from_trustee_is_a_row_of_the_readme_table(found):
    missing = unlisted(found, table_rows(README.read_text()))
    assert not missing, ("keys that differ from TRUSTEE but have no row in the README's key table "
                         f"({README.name}, '{SECTION}'):\n  " + "\n  ".join(missing))


def test_no_row_of_the_readme_table_names_a_key_that_matches_trustee(found):
    extra = stale(found, table_rows(README.read_text()))
    assert not extra, "stale rows in the README's key table:\n  " + "\n  ".join(extra)


def test_every_row_states_trustees_value_and_ours(found):
    wrong = misstated(found, table_rows(README.read_text()))
    assert not wrong, "\n".join(wrong)


def test_a_row_removed_from_a_copy_of_the_table_is_reported_with_both_values(found):
    text = README.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `trainer.save_freq`"))
    rows = table_rows(text.replace(row + "\n", ""))
    assert unlisted(found, rows) == ["trainer.save_freq: TRUSTEE 50, here 10"]


def test_a_row_for_a_key_that_matches_trustee_is_reported_as_stale(found):
    text = README.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `trainer.save_freq`"))
    extra = "| `actor_rollout_ref.rollout.n` | 8 | 8 | no reason |"
    rows = table_rows(text.replace(row, f"{row}\n{extra}"))
    assert stale(found, rows) == ["actor_rollout_ref.rollout.n: resolves to TRUSTEE's value 8 (or is skipped)"]
    assert unlisted(found, rows) == []


def test_a_changed_recipe_value_shows_up_as_an_unlisted_difference(report):
    config = report.config.copy()
    config.actor_rollout_ref.rollout.gpu_memory_utilization = 0.6
    missing = unlisted(differences(config), table_rows(README.read_text()))
    assert missing == ["actor_rollout_ref.rollout.gpu_memory_utilization: TRUSTEE 0.8, here 0.6"]


def test_the_skipped_keys_are_the_ones_the_docstring_names(report):
    skipped = {key: skip_reason(entry, ours(report.config, key) is not ABSENT)
               for key, entry in REFERENCE["verl"].items()}
    skipped = {key: why for key, why in skipped.items() if why}
    assert skipped == {
        "actor_rollout_ref.actor.optim.lr": "value unknown",
        "actor_rollout_ref.actor.clip_ratio": "value unknown",
        "trainer.rollout_data_dir": "value unset",
        **{f"sampling_control.{name}": "inert in TRUSTEE's run and not a key of verl 0.9.1"
           for name in ("warmup_steps", "target_entropy", "temperature.min", "temperature.max", "temperature.delta")},
    }


def test_every_equivalent_names_a_reference_key_and_a_place_that_exists():
    for key, entry in EQUIVALENTS.items():
        assert key in REFERENCE["verl"], f"trustee_equivalents.yaml: {key} is not a key of the reference"
        assert sorted(set(entry) - {"why"}) in (["agent_loop"], ["python"]), f"{key}: name exactly one place"
        assert entry.get("why"), f"{key}: say why the place holds the same setting"
        assert equivalent_value(entry) is not ABSENT, f"{key}: {entry} names nothing"


@pytest.mark.parametrize(("trustee", "here", "equal"), [
    (0.1, 0.10, True), (0.03, Fraction(3, 100), True), (0, 0.0, True), (16, 16.0, True), (0.8, 0.6, False),
    (True, 1, False), (False, False, True), (["console", "wandb"], ["console", "wandb"], True),
    (["console", "wandb"], ["console", "tensorboard"], False), ([], [], True), ("vllm", "vllm", True),
    (None, None, True), (1, None, False),
])
def test_values_compare_as_trustees_yaml_means_them(trustee, here, equal):
    assert same(trustee, here) is equal


# --- the simulator block ---------------------------------------------------------------------------------

# The reference's facts that are settings of the simulator service; the rest of the block (messages, parsing,
# failure handling, role inputs) is behaviour, in the README's Behaviour table.
ROLE_CALL_FACTS = ("temperature", "frequency_penalty", "enable_thinking", "max_completion_tokens", "timeout_s",
                   "attempts_tool", "attempts_user", "attempts_verifier", "retry_delay_s")
TASK_AUTHOR_FACTS = ("temperature", "frequency_penalty", "max_completion_tokens", "timeout_s", "attempts",
                     "retry_delay_s")


def trustee_mode_calls(trustee_dir) -> dict[str, dict]:
    """The simulator's role-call and task-author-call settings in the trustee mode, as the reference names them:
    `retries` are extra attempts, a temperature of None is not sent, the author never gets a frequency penalty,
    and a retry delay counts only when the pause is fixed (as TRUSTEE's is)."""
    settings = SimulatorSettings.from_env({}, mode="trustee", backend="llm", trustee_dir=trustee_dir)
    roles = ("tool", "user", "verifier")
    attempts = settings.retries + 1
    sent = "not sent" if settings.temperature is None else settings.temperature
    fixed = settings.backoff == "fixed"
    return {
        "role_call": {
            "temperature": sent,
            "frequency_penalty": "not sent" if settings.frequency_penalty is None else settings.frequency_penalty,
            "enable_thinking": settings.enable_thinking,
            "max_completion_tokens": dict.fromkeys(roles, settings.max_tokens),
            "timeout_s": dict.fromkeys(roles, settings.timeout_s),
            "attempts_tool": attempts, "attempts_user": attempts, "attempts_verifier": attempts,
            "retry_delay_s": settings.backoff_s if fixed else f"doubling from {settings.backoff_s}",
        },
        "task_author_call": {
            "temperature": sent,
            "frequency_penalty": "not sent",
            "max_completion_tokens": settings.max_tokens_task,
            "timeout_s": settings.timeout_s_task,
            "attempts": settings.retries_task + 1,
            "retry_delay_s": settings.backoff_s_task if fixed else f"doubling from {settings.backoff_s_task}",
        },
    }


def _reference_calls() -> dict[str, dict]:
    block = REFERENCE["simulator"]
    return {"role_call": {fact: block["role_call"][fact]["value"] for fact in ROLE_CALL_FACTS},
            "task_author_call": {fact: block["task_author_call"][fact]["value"] for fact in TASK_AUTHOR_FACTS}}


def _mismatches(reference: dict, here: dict) -> list[str]:
    wrong = []
    for call, facts in reference.items():
        for fact, trustee in facts.items():
            value = here[call][fact]
            equal = (trustee.keys() == value.keys() and all(same(trustee[k], value[k]) for k in trustee)
                     if isinstance(trustee, dict) and isinstance(value, dict) else same(trustee, value))
            if not equal:
                wrong.append(f"simulator.{call}.{fact}: TRUSTEE {trustee!r}, trustee mode {value!r}")
    return wrong


def test_the_simulators_trustee_mode_calls_the_roles_as_trustee_does(trustee_checkout):
    wrong = _mismatches(_reference_calls(), trustee_mode_calls(trustee_checkout))
    assert not wrong, "\n".join(wrong)


def test_a_changed_simulator_fact_is_reported():
    reference = _reference_calls()
    here = {call: dict(facts) for call, facts in reference.items()}
    here["role_call"]["frequency_penalty"] = 0.0
    here["task_author_call"]["max_completion_tokens"] = 4096
    assert _mismatches(reference, here) == ["simulator.role_call.frequency_penalty: TRUSTEE 0.1, trustee mode 0.0",
                                            "simulator.task_author_call.max_completion_tokens: TRUSTEE 8192, "
                                            "trustee mode 4096"]
