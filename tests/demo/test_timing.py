"""The demo's time breakdown: passes that ran at once count once in the eval phase's wall time.

Run: .venvs/dev/bin/python -m pytest tests/demo/test_timing.py -q
"""

from __future__ import annotations

import random

from toolcanary.demo.timing import breakdown_lines, covered_seconds


def test_covered_seconds_is_the_union_of_the_spans_against_counting_each_second():
    rng = random.Random(7)
    for _ in range(200):
        spans = [(start, start + rng.randint(0, 30)) for start in (rng.randint(0, 100) for _ in range(rng.randint(0, 6)))]
        seconds = {t for start, end in spans for t in range(start, end)}  # each covered unit second once
        assert covered_seconds([(float(a), float(b)) for a, b in spans]) == len(seconds)


def test_the_eval_line_never_goes_negative_when_passes_overlap():
    data = {"phases_s": {"eval": 460.0}, "grpo_steps_s": [], "passes": 4,
            "pass_phases_s": {"preflight": 4.0, "generate": 732.0, "evaluate": 30.0, "total": 774.0},
            "passes_wall_s": 420.0}
    (line,) = breakdown_lines(data)[1:]
    assert "4 passes 7.0 min, 12.9 min of pass time run at once" in line
    assert "vLLM starts and checkpoint checks 0.7 min" in line
