"""Every evaluation setting and option has its flag in each subcommand that reads it, written to its field, and a
flag beats the environment.

Run: .venvs/eval/bin/python -m pytest tests/evaluate/test_settings_cli.py -q
"""

from __future__ import annotations

import argparse

import pytest
from cli_checks import flag_problems

from toolcanary.evaluate.__main__ import build_parser, settings_from
from toolcanary.evaluate.settings import (
    SCHEDULE_ONLY,
    WATCH_ONLY,
    EvalSettings,
    ItemChoice,
    PassChoice,
    WatchLimits,
)


def subparser(verb: str) -> argparse.ArgumentParser:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[verb]


@pytest.mark.parametrize(("verb", "models", "not_here"), [
    ("run", (PassChoice, ItemChoice, EvalSettings), SCHEDULE_ONLY),
    ("eval-all", (ItemChoice, EvalSettings), WATCH_ONLY),
    ("watch", (WatchLimits, ItemChoice, EvalSettings), ()),
])
def test_each_setting_has_a_flag(verb, models, not_here):
    parser = subparser(verb)
    problems = [p for model in models for p in flag_problems(parser, model)]
    # run scores one pass: the serving and repeat settings belong to eval-all and watch.
    assert [p for p in problems if not any(f"EvalSettings.{n} " in p for n in not_here)] == []
    assert len(problems) == len(not_here)


def test_a_flag_beats_the_environment(monkeypatch):
    monkeypatch.setenv("TOOLCANARY_EVALUATE_PROBE_TIMEOUT_S", "5")
    monkeypatch.setenv("TOOLCANARY_EVALUATE_THREADS", "3")
    monkeypatch.setenv("TOOLCANARY_EVALUATE_SAMPLE", "4")
    args = build_parser().parse_args(["eval-all", "--probe-timeout-s", "7", "--repeat-steps", "0", "9"])
    settings = settings_from(args)
    assert (settings.probe_timeout_s, settings.threads, settings.repeat_steps) == (7.0, 3, (0, 9))
    assert settings.sample == 4
    assert settings_from(build_parser().parse_args(["eval-all", "--sample", "2"])).sample == 2


def test_the_options_of_a_pass_arrive_typed():
    args = build_parser().parse_args(["run", "--step", "20", "--pass", "2", "--resume", "--categories", "irrelevance",
                                      "simple_python", "--stop-after", "generate"])
    chosen, items = PassChoice.of(args), ItemChoice.of(args)
    assert (chosen.step, chosen.pass_index, chosen.resume, chosen.stop_after) == (20, 2, True, "generate")
    assert items.categories == ["irrelevance", "simple_python"] and items.ids_file is None
    limits = WatchLimits.of(build_parser().parse_args(["watch", "--until-step", "200", "--max-idle-s", "60"]))
    assert (limits.until_step, limits.max_idle_s) == (200, 60.0)
