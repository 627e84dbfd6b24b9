"""The starting-policy cache through the CPU run's command line: a second run of the same recipe takes the
warm-started policy from the cache (same weights, same loss curve, no training), another recipe misses, and a
cache on another machine (another folder, another tag) keys the same recipe alike.

Run: .venvs/train/bin/python -m pytest tests/train/test_starting_policy_cache.py -q
"""

from __future__ import annotations

import hashlib

import pytest
from drills import SMALL, train

from toolcanary.contract.training_files import TASK_KEY_TAG_FILE

HIT = "starting policy from the cache"


def _weights(root, run: str) -> str:
    weights = root / "runs" / run / "trainer" / "reference" / "model.safetensors"
    return hashlib.sha256(weights.read_bytes()).hexdigest()


def _warm(root, run: str) -> str:
    return (root / "results" / run / "warm_start.csv").read_text()


@pytest.mark.slow
def test_a_second_run_of_the_same_recipe_reuses_the_starting_policy_and_another_recipe_misses(tmp_path):
    cache = tmp_path / "cache"
    args = ["--steps", "1", "--save-every", "1", "--starting-policy-cache", str(cache), *SMALL, "--log-level", "INFO"]
    first = train(tmp_path, "--run", "a", *args)
    assert first.returncode == 0, first.stderr[-3000:]
    assert HIT not in first.stderr
    entries = [p for p in cache.iterdir() if p.is_dir()]
    assert len(entries) == 1 and (cache / TASK_KEY_TAG_FILE).is_file()

    second = train(tmp_path, "--run", "b", *args)
    assert second.returncode == 0, second.stderr[-3000:]
    assert HIT in second.stderr
    assert _weights(tmp_path, "b") == _weights(tmp_path, "a") and _warm(tmp_path, "b") == _warm(tmp_path, "a")
    assert len(_warm(tmp_path, "b").splitlines()) == 4  # the header and the 3 cached warm-start steps

    # Two machines: a cache folder each (each with its own tag), the same recipe of fresh warm-start draws: one
    # key, as those tasks come from the seed, not from a tag. (A run's fixed task pool is keyed by its tag.)
    keys = []
    for root in (tmp_path / "here", tmp_path / "there"):
        fresh = [*args[:5], str(root / "cache"), *args[6:], "--task-pool", "0"]
        done = train(root, "--run", "fresh", *fresh)
        assert done.returncode == 0, done.stderr[-3000:]
        keys.append([p.name for p in (root / "cache").iterdir() if p.is_dir()])
    assert keys[0] == keys[1] and len(keys[0]) == 1
    assert _weights(tmp_path / "here", "fresh") == _weights(tmp_path / "there", "fresh")

    other = train(tmp_path, "--run", "c", *args, "--warm-start-steps", "2")
    assert other.returncode == 0, other.stderr[-3000:]
    assert HIT not in other.stderr and len([p for p in cache.iterdir() if p.is_dir()]) == 2
    assert len(_warm(tmp_path, "c").splitlines()) == 3
