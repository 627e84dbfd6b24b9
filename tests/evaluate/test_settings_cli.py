"""Every evaluation setting has its flag in each subcommand that scores, written to the setting's field.

Run: .venvs/eval/bin/python -m pytest tests/evaluate/test_settings_cli.py -q
"""

from __future__ import annotations

import argparse

import pytest

from toolcanary.evaluate.__main__ import OWN_FLAGS, build_parser, settings_from
from toolcanary.evaluate.settings import EvalSettings
from toolcanary.settings import flag_problems


def subparser(verb: str) -> argparse.ArgumentParser:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[verb]


@pytest.mark.parametrize("verb", ["run", "eval-all", "watch"])
def test_each_setting_has_a_flag(verb):
    parser = subparser(verb)
    # run scores one pass: the serving and repeat settings belong to eval-all and watch.
    not_here = {"serving", "serve_command", "serve_port", "health_timeout_s", "repeat_steps", "repeat_passes",
                "watch_interval_s", "gpus"} if verb == "run" else {"watch_interval_s"} if verb == "eval-all" else set()
    problems = flag_problems(parser, EvalSettings, own_help=OWN_FLAGS, renamed={"overlong_counted_wrong": "--overlong-wrong"})
    assert [p for p in problems if not any(f"EvalSettings.{n} " in p for n in not_here)] == []


def test_a_flag_beats_the_environment(monkeypatch):
    monkeypatch.setenv("TOOLCANARY_EVALUATE_PROBE_TIMEOUT_S", "5")
    monkeypatch.setenv("TOOLCANARY_EVALUATE_THREADS", "3")
    args = build_parser().parse_args(["eval-all", "--probe-timeout-s", "7", "--repeat-steps", "0", "9"])
    settings = settings_from(args)
    assert (settings.probe_timeout_s, settings.threads, settings.repeat_steps) == (7.0, 3, (0, 9))
