"""Fixtures of the audit suite: a tiny tool library, run folders with task records and eval outcomes.

.venvs/eval/bin/python -m pytest tests/audit -q
"""

from __future__ import annotations

import json
import random
import sys
import types
from collections.abc import Iterable
from pathlib import Path

import pytest

from toolcanary.audit.__main__ import main
from toolcanary.contract.bfcl import OFFLINE_CATEGORIES
from toolcanary.contract.pass_files import PassRequest, write_request
from toolcanary.contract.simulator_api import RoleRecord
from toolcanary.contract.tasks import SimulatedTask
from toolcanary.evaluate.bfcl_data import category_ids


def tool(name: str, description: str, **parameters: str) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {p: {"type": "string", "description": d} for p, d in parameters.items()},
            },
        },
    }


# Tools of nothing BFCL asks about: a clean library must flag no item.
CLEAN_TOOLS = {
    "home": {
        "Aquarium": [
            tool(
                "aquarium.feed_fish",
                "Drop a measured portion of flakes into the tank feeder.",
                portion_grams="grams of food",
            ),
            tool(
                "aquarium.set_lamp_cycle",
                "Choose when the tank lamp switches on and off.",
                on_at="HH:MM",
                off_at="HH:MM",
            ),
        ]
    },
    "hobbies": {
        "Knitting": [
            tool(
                "knitting.count_rows", "Tally the rows finished in a knitting pattern.", pattern_id="pattern"
            ),
            tool(
                "knitting.suggest_yarn",
                "Propose a yarn weight for a needle size.",
                needle_mm="needle size in mm",
            ),
        ],
        "Beekeeping": [
            tool(
                "hive.log_inspection",
                "Record the brood frames and queen sighting of a hive check.",
                hive="hive label",
            ),
        ],
    },
}
CLEAN_QUERIES = [
    ("Please feed the fish in my aquarium two grams of flakes tonight.", "Feed the aquarium fish."),
    ("How many rows of my scarf pattern have I knitted so far?", "Count finished knitting rows."),
    ("Log today's hive inspection: seven brood frames and the queen was seen.", "Record a beehive check."),
    ("Set the tank lamp to come on at seven and go off at nine.", "Schedule the aquarium lamp."),
]


def write_library(path: Path, toolsets: dict[str, dict[str, list[dict]]]) -> Path:
    library = {
        category: {
            name: [dict(t, toolset_name=name, category=category) for t in tools]
            for name, tools in sets.items()
        }
        for category, sets in toolsets.items()
    }
    path.write_text(json.dumps(library))
    return path


def task_record(
    run: str, task_id: str, query: str, intent: str, tools: list[dict], step: int = 1, outcome: str = "ok"
) -> str:
    task = SimulatedTask.model_validate(
        {
            "task_id": task_id,
            "task_key": f"key-{task_id}",
            "tools": tools,
            "user_intent": intent,
            "user_persona": "expert",
            "first_user_query": query,
            "difficulty": {
                "num_tools": len(tools),
                "expected_calls": 1,
                "user_persona": 0,
                "query_ambiguity": 0,
                "expected_turns": 0,
            },
        }
    )
    record = RoleRecord(
        contract_version="1",
        time="2026-11-30T00:00:00Z",
        run=run,
        step=step,
        role="task",
        backend="scripted",
        request={"task_key": task.task_key},
        response={"task": task.model_dump(mode="json")} if outcome == "ok" else {},
        outcome=outcome,
        abort_cause=None if outcome == "ok" else "timeout",
        latency_s=0.1,
    )
    return record.model_dump_json()


def other_role_record(run: str) -> str:
    return RoleRecord(
        contract_version="1",
        time="2026-11-30T00:00:00Z",
        run=run,
        step=1,
        role="user",
        backend="scripted",
        request={},
        response={"reply": "ok"},
        outcome="ok",
        latency_s=0.1,
    ).model_dump_json()


def write_steps(runs_dir: Path, run: str, lines_by_step: dict[int, Iterable[str]]) -> Path:
    folder = runs_dir / run / "simulator"
    folder.mkdir(parents=True, exist_ok=True)
    for step, lines in lines_by_step.items():
        (folder / f"step_{step:04d}.jsonl").write_text("".join(line + "\n" for line in lines))
    return folder


def make_outcomes(seed: int, categories: Iterable[str] = OFFLINE_CATEGORIES) -> list[dict]:
    """Every item of the categories with a seeded outcome; some are "overlong"."""
    rng = random.Random(seed)
    outcomes = []
    for category in categories:
        for item in category_ids(category):
            draw = rng.random()
            outcome = "correct" if draw < 0.6 else ("overlong" if draw < 0.63 else "wrong_values")
            outcomes.append({"category": category, "id": item, "outcome": outcome})
    return outcomes


def write_pass(
    results_dir: Path,
    run: str,
    step: int,
    pass_index: int,
    outcomes: list[dict],
    overlong_counted_wrong: bool | None = True,
) -> Path:
    folder = results_dir / run / "passes" / f"step_{step:04d}_pass_{pass_index}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "outcomes.jsonl").write_text("".join(json.dumps(o) + "\n" for o in outcomes))
    if overlong_counted_wrong is not None:
        ids: dict[str, list[str]] = {}
        for o in outcomes:
            ids.setdefault(o["category"], []).append(o["id"])
        request = PassRequest(run=run, step=step, pass_index=pass_index, served_model=f"{run}-step{step:04d}",
                              registry_key="toolcanary-served-FC", weights_sha256=None, categories=list(ids),
                              ids=ids, temperature=0.001, overlong_counted_wrong=overlong_counted_wrong)
        write_request(folder / "request.json", request)
    return folder


def count(
    outcomes: list[dict], overlong_counted_wrong: bool = True, leave_out: set[tuple[str, str]] = frozenset()
) -> dict[str, tuple[int, int]]:
    """(correct, total) per category, counted here independently of the audit's code."""
    tallies: dict[str, list[int]] = {}
    for o in outcomes:
        tally = tallies.setdefault(o["category"], [0, 0])
        if (o["category"], o["id"]) in leave_out or (
            o["outcome"] == "overlong" and not overlong_counted_wrong
        ):
            continue
        tally[0] += o["outcome"] == "correct"
        tally[1] += 1
    return {c: (a, b) for c, (a, b) in tallies.items()}


def audit_run(library: Path, runs: Path, results: Path, run: str) -> Path:
    """Run the audit of `run` in-process on these folders; return its output folder."""
    code = main(["--quiet", "--run", run, "--library", str(library), "--runs-dir", str(runs),
                 "--results-dir", str(results)])
    assert code == 0
    return results / run / "audit"


@pytest.fixture
def cli(capsys):
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(["--quiet", *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture(scope="session")
def fx() -> types.ModuleType:
    """The helpers above (with --import-mode=importlib a test module cannot import conftest)."""
    return sys.modules[__name__]
