"""Task keys a third party cannot claim first: the run's tag (made once, kept, private to the trainer) and an
attacker who reads the run id from `/health` and claims the keys it would predict, through the real simulator
and the CPU run's command line.

Run: .venvs/train/bin/python -m pytest tests/train/test_task_keys.py -q
"""

from __future__ import annotations

import re
import stat
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from drills import SMALL, SimulatorProcess, episodes, train

from toolcanary.contract.errors import ContractError
from toolcanary.train.task_keys import TAG_FILE, task_key_prefix


def test_the_prefix_is_made_once_kept_private_and_differs_between_runs(tmp_path):
    first = task_key_prefix(tmp_path / "a" / "trainer", "r1")
    assert re.fullmatch(r"r1-[0-9a-f]{16}", first)
    assert task_key_prefix(tmp_path / "a" / "trainer", "r1") == first  # a resumed run builds the same keys
    assert stat.S_IMODE((tmp_path / "a" / "trainer" / TAG_FILE).stat().st_mode) == 0o600
    assert task_key_prefix(tmp_path / "b" / "trainer", "r1") != first
    assert [p.name for p in (tmp_path / "a" / "trainer").iterdir()] == [TAG_FILE]  # no draft left behind


def test_processes_that_race_on_a_new_run_all_get_the_same_tag(tmp_path):
    with ThreadPoolExecutor(8) as pool:
        prefixes = set(pool.map(lambda _: task_key_prefix(tmp_path / "trainer", "r"), range(64)))
    assert len(prefixes) == 1


@pytest.mark.parametrize("content", ["", "zz", "0123456789ABCDEF", "0123456789abcdef0"])
def test_a_damaged_tag_is_refused_rather_than_replaced(tmp_path, content):
    (tmp_path / TAG_FILE).write_text(content)
    with pytest.raises(ContractError, match="16 lowercase hex digits") as err:
        task_key_prefix(tmp_path, "r")
    assert "resumed step would ask the simulator for other tasks" in str(err.value)
    assert (tmp_path / TAG_FILE).read_text() == content  # nothing is lost


@pytest.mark.slow
def test_keys_claimed_ahead_of_the_trainer_by_an_attacker_who_knows_the_run_id_cost_it_nothing(tmp_path):
    root = tmp_path / "root"
    simulator = SimulatorProcess(root / "runs").start()
    try:
        run = httpx.get(f"{simulator.url}/health", timeout=5).json()["run"]
        greedy = {"num_tools": 3, "expected_calls": 3, "user_persona": 2, "query_ambiguity": 2, "expected_turns": 2}
        # The keys a trainer without a tag would ask for (its fixed pool, the default, and fresh draws), claimed
        # with another difficulty than the trainer's.
        guessed = [f"{run}-pool-0-{index:03d}" for index in range(8)] + [f"{run}-s0001-g{g:02d}" for g in range(2)]
        for key in guessed:
            claimed = httpx.post(f"{simulator.url}/v1/task", json={"task_key": key, "difficulty": greedy, "step": 1},
                                 timeout=30)
            assert claimed.status_code == 200, claimed.text
        done = train(root, "--run", run, "--steps", "1", "--save-every", "1", "--no-warm-start",
                     "--simulator-url", simulator.url, *SMALL)
    finally:
        simulator.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    prefix = task_key_prefix(root / "runs" / run / "trainer", run)
    played = episodes(root, run)
    assert [e["abort_detail"] for e in played if e.get("abort_cause") == "rejected"] == []
    assert len(played) == 4 and all(e["task_key"].startswith(prefix + "-pool-0-") for e in played)
    assert not {e["task_key"] for e in played} & set(guessed)


def test_warm_start_and_held_out_tasks_are_drawn_alike_in_every_run_under_each_runs_private_keys():
    from toolcanary.train.cpu.gold_conversations import warm_start_requests

    def requests(prefix, **options):
        return warm_start_requests(key_prefix=prefix, seed=0, count=4, task_pool=0, max_tools=1, **options)

    one, two = requests("r1-aaaa"), requests("r2-bbbb")
    assert [r.task_key for r in one] == [f"r1-aaaa-warm-0-{i:03d}" for i in range(4)]
    assert [r.draw for r in one] == [r.draw for r in two] == [f"warm-0-{i:03d}" for i in range(4)]
    assert [r.difficulty for r in one] == [r.difficulty for r in two]
    # The held-out check's draws: its keys of before the run's tag, so every run is checked on those tasks.
    held = requests("heldout-r1-aaaa", draw_prefix="heldout-warm")
    assert [r.draw for r in held] == [f"heldout-warm-0-{i:03d}" for i in range(4)]
