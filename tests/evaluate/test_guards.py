"""`python -m toolcanary.evaluate guards` lists every guard of the registry, with its phase, and the code that
enforces it; every phase of a pass is named in order.

Run: .venvs/eval/bin/python -m pytest tests/evaluate/test_guards.py -q
"""

from __future__ import annotations

from conftest import cli

from toolcanary.evaluate.guards import GUARDS, PHASES


def test_the_guards_command_lists_every_guard_with_its_phase_and_code(tmp_path):
    done = cli(tmp_path, "guards")
    assert done.returncode == 0, done.stderr
    assert " -> ".join(PHASES) in done.stdout
    assert len(GUARDS) == 7 and len({g.number for g in GUARDS}) == 7
    for guard in GUARDS:
        assert f"guard {guard.number} {guard.name}  (phase: {guard.phase})" in done.stdout
        assert guard.prevents in done.stdout and guard.phase in PHASES
        block = done.stdout.split(f"guard {guard.number} {guard.name}")[1].split("\n\n")[0]
        assert "code:     toolcanary.evaluate." in block  # some function carries @enforces(<this guard>)


def test_the_guards_command_has_help_with_an_example(tmp_path):
    done = cli(tmp_path, "guards", "--help")
    assert done.returncode == 0 and "python -m toolcanary.evaluate guards" in done.stdout
