"""Shared fixtures of the contract tests: `drill`, which prints a fault drill's figures to the terminal.

Run: .venvs/dev/bin/python -m pytest tests/contract -q
"""

from __future__ import annotations

import pytest


@pytest.fixture
def drill(capsys):
    """`drill(name, **figures)`: one line on the terminal, outside pytest's capture, so `make test` shows it."""

    def report(name: str, **figures) -> None:
        with capsys.disabled():
            print(f"\n  DRILL {name}: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in figures.items()))

    return report
