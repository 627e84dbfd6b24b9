"""Refusals come in three kinds with one message form: bad data, bad usage, busy.

Run: .venvs/dev/bin/python -m pytest tests/contract/test_error_kinds.py -q
"""

from __future__ import annotations

import pytest

from toolcanary.contract import BusyError, ContractError, UsageError, read_train_metrics
from toolcanary.settings import ServiceSettings


class _Settings(ServiceSettings, env_prefix="TOOLCANARY_KINDS_"):
    steps: int = 2


@pytest.mark.parametrize("kind", [ContractError, UsageError, BusyError])
def test_every_kind_says_where_what_was_expected_what_came_and_what_to_do(kind):
    error = kind("--steps", "a positive integer", "'-1'", "Pass a step count of 1 or more")
    assert str(error) == "--steps: expected a positive integer, got '-1'. Pass a step count of 1 or more"
    assert isinstance(error, ContractError)  # a command that stops on any refusal catches the base alone


def test_a_setting_that_does_not_fit_is_a_usage_error_naming_the_flag_and_the_variable():
    with pytest.raises(UsageError, match="flag --steps or environment variable TOOLCANARY_KINDS_STEPS"):
        _Settings.from_env({"TOOLCANARY_KINDS_STEPS": "two"})


def test_a_bad_file_is_bad_data_not_bad_usage(tmp_path):
    path = tmp_path / "train_metrics.csv"
    path.write_text("step\nnot-a-number\n")
    with pytest.raises(ContractError) as caught:
        read_train_metrics(path)
    assert type(caught.value) is ContractError
