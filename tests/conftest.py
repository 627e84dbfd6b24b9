"""Fixtures every suite shares: `drill`, which prints a fault drill's figures to the terminal.

pytest loads this file for any suite under tests/, whichever environment runs it (scripts/run_tests.sh).
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
