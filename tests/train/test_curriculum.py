"""TRUSTEE's curriculum: every reachable level against TRUSTEE's table of derived values, the update rule, the soft
epsilon, no-call tasks, and state that survives a save and restore.

The table below is written out by hand from TRUSTEE's released multipliers and clamps (derived values at every reachable level),
not computed from the code under test.
Run: .venvs/train/bin/python -m pytest tests/train/test_curriculum.py -q
"""

from __future__ import annotations

import random

import pytest

from toolcanary.train.curriculum import Curriculum, derive, reachable_levels

# levels: (tools, calls, persona/ambiguity/turns, criteria raw, criteria capped, system prompt, user, asst, tool)
TABLE = [
    ((1, 4, 7, 10, 13, 16, 19), (1, 1, 0, 1, 1, 0, 1, 2, 1)),
    ((22,), (2, 1, 0, 1, 1, 0, 1, 2, 1)),
    ((25, 28), (2, 1, 0, 2, 2, 0, 1, 2, 1)),
    ((31,), (3, 1, 0, 2, 2, 0, 1, 2, 1)),
    ((34, 37), (3, 1, 0, 2, 2, 1, 1, 2, 1)),
    ((40, 43, 46, 49), (4, 1, 0, 2, 2, 1, 1, 2, 1)),
    ((52, 55, 58), (5, 1, 1, 3, 2, 1, 1, 3, 1)),
    ((61, 64), (6, 1, 1, 3, 2, 1, 1, 3, 1)),
    ((67,), (6, 2, 1, 3, 2, 2, 2, 4, 2)),
    ((70, 73), (7, 2, 1, 3, 2, 2, 2, 4, 2)),
    ((76, 79), (7, 2, 1, 4, 2, 2, 2, 4, 2)),
    ((82,), (8, 2, 1, 4, 2, 2, 2, 4, 2)),
    ((85, 88), (8, 2, 1, 4, 2, 2, 2, 5, 2)),
    ((91, 94, 97), (9, 2, 1, 4, 2, 2, 2, 5, 2)),
    ((100,), (10, 3, 2, 5, 2, 3, 3, 6, 3)),
]
EXPECTED = {level: values for levels, values in TABLE for level in levels}


def test_the_table_covers_exactly_the_reachable_levels():
    assert sorted(EXPECTED) == reachable_levels() == list(range(1, 101, 3))


@pytest.mark.parametrize("level", sorted(EXPECTED))
def test_derived_settings_match_the_fact_sheet(level):
    tools, calls, pat, raw, capped, prompt, user, asst, tool = EXPECTED[level]
    got = derive(level)
    assert (got.num_tools, got.expected_calls) == (tools, calls)
    assert got.user_persona == got.query_ambiguity == got.expected_turns == pat
    assert (got.num_criteria_raw, got.num_criteria, got.system_prompt) == (raw, capped, prompt)
    assert (got.max_user_turns, got.max_assistant_turns, got.max_tool_turns) == (user, asst, tool)
    assert derive(level, criteria_cap=None).num_criteria == raw


def test_every_level_reached_by_the_update_rule_is_in_the_table():
    curriculum, seen = Curriculum(), {1}
    rng = random.Random(3)
    for _ in range(2000):
        seen.add(curriculum.update(rng.choice([-1.0, 0.0, 0.25, 0.5, 1.0])))
    assert seen == set(EXPECTED)


@pytest.mark.parametrize(("reward", "move"), [(0.5, 3), (0.9, 3), (0.49, 0), (0.01, 0), (0.0, -3), (-1.0, -3)])
def test_update_thresholds(reward, move):
    curriculum = Curriculum(level=31)
    assert curriculum.update(reward) == 31 + move and curriculum.step == 1


def test_level_is_clamped_to_1_and_100():
    low, high = Curriculum(level=1), Curriculum(level=97)
    assert low.update(-1.0) == 1
    assert high.update(1.0) == 100 and high.update(1.0) == 100 and high.update(-1.0) == 97
    with pytest.raises(ValueError, match=r"\[1, 100\]"):
        derive(101)


def test_without_epsilon_draws_are_level_bound():
    curriculum = Curriculum(level=67, epsilon=0.0)
    for _ in range(50):
        drawn = curriculum.draw(random.Random(_))
        assert (drawn.num_tools, drawn.expected_calls, drawn.user_persona) == (6, 2, 1)
        assert drawn.call_expected


def test_soft_curriculum_draws_full_ranges_about_epsilon_of_the_time():
    curriculum, rng = Curriculum(level=1, epsilon=0.5), random.Random(0)
    draws = [curriculum.draw(rng) for _ in range(2000)]
    off_level = [d for d in draws if (d.num_tools, d.expected_calls, d.user_persona, d.query_ambiguity,
                                      d.expected_turns) != (1, 1, 0, 0, 0)]
    # A soft draw lands exactly on the level-1 values with probability 1/10 * 1/3 * 1/27.
    assert 0.45 < len(off_level) / len(draws) < 0.55
    assert {d.num_tools for d in draws} == set(range(1, 11))
    assert {d.expected_calls for d in draws} == {1, 2, 3}
    assert {d.user_persona for d in draws} == {d.query_ambiguity for d in draws} == {0, 1, 2}


def test_no_call_fraction_makes_abstention_tasks():
    assert not any(not d.call_expected for d in (Curriculum().draw(random.Random(i)) for i in range(200)))
    rng = random.Random(1)
    draws = [Curriculum(no_call_fraction=0.25).draw(rng) for _ in range(2000)]
    abstain = [d for d in draws if not d.call_expected]
    assert 0.2 < len(abstain) / len(draws) < 0.3
    assert all(d.expected_calls == 0 for d in abstain)


def test_state_round_trips_and_refuses_a_bad_level():
    saved = Curriculum(level=1)
    for _ in range(10):
        saved.update(1.0)
    restored = Curriculum()
    restored.load_state_dict(saved.state_dict())
    assert (restored.level, restored.step) == (31, 10)
    with pytest.raises(ValueError):
        restored.load_state_dict({"level": 0, "step": 3})
    assert (restored.level, restored.step) == (31, 10)


def test_a_task_pool_cycles_fixed_tasks_and_keeps_level_bound_limits():
    from toolcanary.train.rollout import step_specs

    low, high = Curriculum(level=1), Curriculum(level=100)
    first = step_specs(low, step=1, groups=4, n=2, rng=random.Random(0), key_prefix="r", task_pool=6, max_tools=1)
    third = step_specs(high, step=4, groups=4, n=2, rng=random.Random(9), key_prefix="r", task_pool=6, max_tools=1)
    keys = [s.task_key for s in first]
    assert keys[0] == keys[1] and len(set(keys)) == 4
    # Step 4 starts at pool index (3 * 4) % 6 = 0: the same task and settings, under level-100 limits.
    assert (third[0].task_key, third[0].difficulty) == (first[0].task_key, first[0].difficulty)
    assert third[0].max_assistant_turns == 6 and first[0].max_assistant_turns == 2
    assert all(s.difficulty.num_tools == 1 for s in first + third)
    fresh = step_specs(low, step=1, groups=4, n=2, rng=random.Random(0), key_prefix="r")
    assert len({s.task_key for s in fresh}) == 4 and fresh[0].task_key == "r-s0001-g00"


def test_a_pool_is_call_tasks_whatever_the_share_and_the_share_brings_fresh_abstention_tasks():
    """The two arms of a study share their starting policy: the pool (and the warm start that imitates it) must
    not depend on the abstention share; the share's groups are fresh abstention tasks instead."""
    from toolcanary.train.cpu.gold_conversations import warm_start_requests
    from toolcanary.train.rollout import step_specs

    def specs(share, seed=3):
        curriculum = Curriculum(level=1, no_call_fraction=share)
        return [s for step in range(1, 41) for s in step_specs(
            curriculum, step=step, groups=4, n=2, rng=random.Random(seed), key_prefix="r", task_pool=8,
            max_tools=1, seed=seed, pool_seed=0)]

    none, half = specs(0.0), specs(0.5)
    assert all(s.difficulty.call_expected for s in none)
    pool = {s.task_key: s.difficulty for s in none}
    assert len(pool) == 8 and all(key.startswith("r-pool-0-") for key in pool)
    declined = [s for s in half if not s.difficulty.call_expected]
    # A binomial(160 groups, 0.5) share, far from 0 and 1; each abstention group a fresh task, none in the pool.
    assert 0.35 < len(declined) / len(half) < 0.65
    assert all(s.task_key not in pool and s.difficulty.expected_calls == 0 for s in declined)
    assert all(pool[s.task_key] == s.difficulty for s in half if s.difficulty.call_expected)
    # Another GRPO seed, the same pool: the starting policy's seed names it, not the run's.
    assert {s.task_key for s in specs(0.0, seed=4)} == set(pool)

    warm = warm_start_requests(key_prefix="r", seed=0, count=20, task_pool=8, max_tools=1, no_call_fraction=0.1)
    assert [r.task_key for r in warm[:8]] == sorted(pool)
    assert [r.difficulty.call_expected for r in warm] == [True] * 8 + [False] * 2
    assert warm[:8] == warm_start_requests(key_prefix="r", seed=0, count=20, task_pool=8, max_tools=1)
