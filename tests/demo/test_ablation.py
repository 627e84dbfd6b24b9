"""`make demo-ablation`: its two arms differ in the abstention share alone, a share that makes no ablation is
refused before anything runs, and the share reaches the trainer's command line.

The miniature itself (two demo runs and --compare) takes minutes; its time is in LOG.md, and the compare step it
ends with is tested on two runs in tests/analysis/test_compare.py.

Run: .venvs/dev/bin/python -m pytest tests/demo/test_ablation.py -q
"""

import subprocess
import sys

import pytest

from toolcanary.demo.ablation import arms


@pytest.mark.parametrize("policy", ["smollm2", "tiny"])
def test_the_two_arms_differ_only_in_run_id_and_abstention_share(policy):
    baseline, abstain = arms("abl", quick=True, policy=policy, no_call_fraction=0.25)
    assert (baseline.run, abstain.run) == ("abl-baseline", "abl-abstain")
    assert (baseline.no_call_fraction, abstain.no_call_fraction) == (0.0, 0.25)
    a, b = baseline.model_dump(), abstain.model_dump()
    assert {k for k in a if a[k] != b[k]} == {"run", "no_call_fraction"}


@pytest.mark.parametrize("share", ["0", "1.5", "-0.1"])
def test_a_share_that_makes_no_ablation_is_refused_with_what_was_expected(share):
    done = subprocess.run([sys.executable, "-m", "toolcanary.demo.ablation", "--no-call-fraction", share],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "expected a share in (0, 1]" in done.stderr and share in done.stderr


def test_the_share_reaches_the_trainers_command_line(monkeypatch, tmp_path):
    """run_demo hands --no-call-fraction to the GRPO run (and not to the starting policy, whose recipe the two
    arms share)."""
    import toolcanary.demo.pipeline as demo_main

    commands = []

    class Recorder:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def start(self, *args, **kwargs):
            pass

        def wait_http(self, *args, **kwargs):
            pass

        def stop(self, *args, **kwargs):
            pass

        def run(self, name, command, *args, **kwargs):
            commands.append((name, command))
            if name == "train":
                raise demo_main.ChildFailed("recorded")

    monkeypatch.setattr(demo_main, "ProcessGroup", Recorder)
    monkeypatch.setenv("TOOLCANARY_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("TOOLCANARY_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("TOOLCANARY_CHECKPOINTS_DIR", str(tmp_path / "checkpoints"))
    _, abstain = arms("abl", quick=True, policy="tiny", no_call_fraction=0.5)
    with pytest.raises(demo_main.ChildFailed):
        demo_main.run_demo(abstain, demo_main.PhaseClock())
    by_name = dict(commands)
    assert "--no-call-fraction" not in by_name["starting policy"]
    train = by_name["train"]
    assert train[train.index("--no-call-fraction") + 1] == "0.5"
