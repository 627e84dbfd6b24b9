"""Bad input: task lines that hold no task are skipped and counted, torn and fenced lines skipped as the
simulator skips them, a broken middle line stops the audit as it stops the simulator, a bad pass is left out with its reason, and wrong
arguments stop the audit with a message that says what was expected, before anything is written.

Runs audit two small categories (simple_python, live_simple) to stay quick.

    .venvs/eval/bin/python -m pytest tests/audit/test_bad_input.py -q
"""

from __future__ import annotations

import csv
import json

import pytest

from toolcanary.audit.settings import AuditSettings
from toolcanary.audit.training_inputs import library_tools
from toolcanary.contract.errors import ContractError

RUN = "damaged"
SMALL = ("--categories", "simple_python", "live_simple")
PARAPHRASE = (
    "Could you compute the area of a triangle whose base is 10 units and whose height is 5 units?",
    "The user wants a triangle's area from base 10 units and height 5 units.",
)


@pytest.fixture
def dirs(tmp_path, fx):
    runs, results = tmp_path / "runs", tmp_path / "results"
    library = fx.write_library(tmp_path / "library.json", fx.CLEAN_TOOLS)
    return {
        "runs": runs,
        "results": results,
        "library": library,
        "args": (
            "--run",
            RUN,
            "--library",
            str(library),
            "--runs-dir",
            str(runs),
            "--results-dir",
            str(results),
            *SMALL,
        ),
    }


def test_task_lines_without_a_task_are_skipped_counted_and_the_rest_still_audited(dirs, fx, cli):
    aquarium = fx.CLEAN_TOOLS["home"]["Aquarium"]
    good = fx.task_record(RUN, "paraphrase", *PARAPHRASE, aquarium)
    no_task = json.loads(good)
    no_task["response"] = {"task": {"task_id": "x"}}
    fx.write_steps(
        dirs["runs"],
        RUN,
        {
            1: [
                json.dumps({"role": "task", "unexpected": True}),
                json.dumps(no_task),
                fx.task_record(RUN, "gave-up", "q", "i", aquarium, outcome="aborted"),
                good,
                good,
            ],
        },
    )
    # A writer killed mid-line leaves a torn tail, which both readers skip.
    (dirs["runs"] / RUN / "simulator" / "step_0002.jsonl").write_bytes(good.encode() + b"\n{\"role\": \"ta")
    code, out, _ = cli(*dirs["args"])
    assert code == 0
    assert (
        "skipped task lines: {'aborted task call': 1, 'no valid SimulatedTask in response.task': 1, "
        "'not a RoleRecord': 1}"
    ) in out
    rows = {r["id"]: r for r in csv.DictReader((dirs["results"] / RUN / "audit" / "audit.csv").open())}
    assert rows["simple_python_0"]["query_overlap"] == "1"
    assert rows["simple_python_0"]["query_task"] == "paraphrase"
    md = (dirs["results"] / RUN / "audit" / "audit.md").read_text()
    assert "1 distinct tasks from 2 files" in md and "2 repeats" in md
    assert "lines skipped: 1 aborted task call, 1 no valid SimulatedTask in response.task, 1 not a RoleRecord" in md


@pytest.mark.parametrize("broken", [b"{not json", b"\xff\xfe broken bytes"])
def test_a_broken_middle_line_stops_the_audit_as_it_stops_the_simulator(dirs, fx, cli, broken):
    """A middle line no writer fenced off is damage, not a torn write: counting past it would audit other tasks
    than the simulator reloads (it refuses the file)."""
    good = fx.task_record(RUN, "paraphrase", *PARAPHRASE, fx.CLEAN_TOOLS["home"]["Aquarium"])
    folder = dirs["runs"] / RUN / "simulator"
    folder.mkdir(parents=True)
    (folder / "step_0001.jsonl").write_bytes(good.encode() + b"\n" + broken + b"\n" + good.encode() + b"\n")
    code, out, err = cli(*dirs["args"])
    assert code != 0 and "step_0001.jsonl: line 2" in out + err and "no writer fenced off" in out + err
    assert not (dirs["results"] / RUN / "audit").exists()


def test_a_task_whose_text_holds_a_unicode_line_separator_is_read_whole(dirs, fx, cli):
    # The simulator writes records with raw non-ASCII text and reads them back line by "\n"; so must the audit.
    aquarium = fx.CLEAN_TOOLS["home"]["Aquarium"]
    records = [fx.task_record(RUN, "sep-2028", "feed the fish\u2028then the cat", "i", aquarium),
               fx.task_record(RUN, "sep-0085", "clean the tank\u0085today", "i", aquarium)]
    assert all("\u2028" in r or "\u0085" in r for r in records)  # written raw, not escaped
    fx.write_steps(dirs["runs"], RUN, {1: records})
    code, out, _ = cli(*dirs["args"])
    assert code == 0, out
    md = (dirs["results"] / RUN / "audit" / "audit.md").read_text()
    assert "2 distinct tasks from 1 files" in md and "skipped" not in out


def test_a_run_that_persisted_no_tasks_says_query_overlap_was_not_measured(dirs, cli):
    dirs["results"].joinpath(RUN).mkdir(parents=True)
    code, out, _ = cli(*dirs["args"])
    assert code == 0 and "0 generated tasks" in out
    md = (dirs["results"] / RUN / "audit" / "audit.md").read_text()
    assert "persisted no readable generated task" in md and "query overlap was not measured at all" in md


def test_a_missing_library_stops_with_a_fix_and_writes_nothing(dirs, cli):
    dirs["results"].joinpath(RUN).mkdir(parents=True)
    code, _, err = cli(*dirs["args"], "--library", str(dirs["library"].with_name("nope.json")))
    assert code == 2
    assert "nope.json: expected a tool library JSON file, got no such file. Pass --library PATH" in err
    assert not (dirs["results"] / RUN / "audit").exists()


def test_a_library_without_a_usable_tool_names_the_place(dirs, cli):
    dirs["results"].joinpath(RUN).mkdir(parents=True)
    dirs["library"].write_text(json.dumps({"home": {"Aquarium": [{"name": "no function key"}]}}))
    code, _, err = cli(*dirs["args"])
    assert code == 2 and "expected at least one usable tool" in err
    assert "'home' / 'Aquarium' [0]: no `function` object" in err


def test_an_unusable_entry_is_left_out_as_the_simulator_leaves_it_and_said(dirs, caplog):
    library = json.loads(dirs["library"].read_text())
    toolsets = next(iter(library.values()))
    next(iter(toolsets.values())).append({"name": "no function key"})
    dirs["library"].write_text(json.dumps(library))
    tools = library_tools(dirs["library"])
    assert len(tools) == sum(len(entries) for sets in library.values() for entries in sets.values()) - 1
    assert "1 entries left out" in caplog.text and "no `function` object" in caplog.text


def test_an_unknown_run_suggests_the_near_names(dirs, cli):
    dirs["results"].joinpath("damaged-v2").mkdir(parents=True)
    code, _, err = cli(*dirs["args"][:1], "damagd-v2", *dirs["args"][2:])
    assert code == 2 and "no folder named 'damagd-v2'" in err and "Did you mean: ['damaged-v2']" in err


def test_an_unknown_or_online_category_is_refused(dirs, cli):
    dirs["results"].joinpath(RUN).mkdir(parents=True)
    code, _, err = cli(*dirs["args"], "--categories", "simple_pyton", "web_search_base")
    assert code == 2 and "expected offline BFCL V4 categories" in err and "simple_python" in err


def test_a_bad_outcomes_line_leaves_that_pass_out_and_keeps_the_others(dirs, fx, cli):
    good = [o for o in fx.make_outcomes(3, ("simple_python", "live_simple"))]
    fx.write_pass(dirs["results"], RUN, 0, 1, good)
    bad = fx.write_pass(dirs["results"], RUN, 5, 1, good)
    with (bad / "outcomes.jsonl").open("a") as handle:
        handle.write('{"category": "simple_python"}\n')
    code, out, _ = cli(*dirs["args"])
    assert code == 0
    assert "robustness: step 5 pass 1 left out:" in out and "line 659" in out
    rows = list(csv.DictReader((dirs["results"] / RUN / "audit" / "robustness.csv").open()))
    assert {(r["step"], r["pass"]) for r in rows} == {("0", "1")}
    # Only two categories were scored: aggregates that need others are n/a, never a made-up number.
    assert {r["aggregate"]: r["full"] for r in rows}["Multi-Turn"] == ""


def test_outcomes_that_disagree_with_bfcl_by_category_are_reported(dirs, fx, cli):
    from toolcanary.contract.csv_schemas import BfclRow, append_bfcl_rows

    outcomes = fx.make_outcomes(4, ("simple_python", "live_simple"))
    fx.write_pass(dirs["results"], RUN, 0, 1, outcomes, overlong_counted_wrong=False)
    counts = fx.count(outcomes, overlong_counted_wrong=True)  # the CSV was counted the other way
    append_bfcl_rows(
        dirs["results"] / RUN / "bfcl_by_category.csv",
        [BfclRow(0, 1, c, a, b) for c, (a, b) in counts.items()],
    )
    code, out, _ = cli(*dirs["args"])
    assert code == 0 and "step 0 pass 1: outcomes.jsonl counts differ from bfcl_by_category.csv" in out


def test_settings_come_from_the_environment_and_bad_values_are_named():
    settings = AuditSettings.from_env(
        {"TOOLCANARY_AUDIT_SCHEMA_THRESHOLD": "0.9", "TOOLCANARY_RUNS_DIR": "/r"}
    )
    assert settings.schema_threshold == 0.9 and str(settings.runs_dir) == "/r"
    with pytest.raises(ContractError, match="TOOLCANARY_AUDIT_TOP_K: expected a value of type int"):
        AuditSettings.from_env({"TOOLCANARY_AUDIT_TOP_K": "three"})
    with pytest.raises(ContractError, match="--query_threshold: expected a number in"):
        AuditSettings().replace(query_threshold=1.5)


@pytest.mark.parametrize("damage", ["outcomes not utf8", "request not utf8", "request temperature 1e999"])
def test_a_pass_file_that_is_not_utf8_or_not_finite_leaves_that_pass_out(damage, dirs, fx, cli):
    good = [o for o in fx.make_outcomes(3, ("simple_python", "live_simple"))]
    fx.write_pass(dirs["results"], RUN, 0, 1, good)
    bad = fx.write_pass(dirs["results"], RUN, 5, 1, good)
    if damage == "outcomes not utf8":
        with (bad / "outcomes.jsonl").open("ab") as handle:
            handle.write(b'{"category": "simple_python", "id": "\xff", "outcome": "correct"}\n')
        reason = "UTF-8"
    elif damage == "request not utf8":
        (bad / "request.json").write_bytes((bad / "request.json").read_bytes().replace(b'"', b'"\xff', 1))
        reason = "invalid unicode"
    else:
        request = json.loads((bad / "request.json").read_text())
        (bad / "request.json").write_text(json.dumps(request).replace(f'"temperature": {request["temperature"]}',
                                                                       '"temperature": 1e999'))
        reason = "finite number"
    code, out, err = cli(*dirs["args"])
    assert code == 0, err
    assert "robustness: step 5 pass 1 left out:" in out and reason in out, out
    rows = list(csv.DictReader((dirs["results"] / RUN / "audit" / "robustness.csv").open()))
    assert {(r["step"], r["pass"]) for r in rows} == {("0", "1")}


def test_truncated_and_overlong_counts_that_disagree_with_bfcl_by_category_are_reported(dirs, fx, cli):
    from toolcanary.contract.csv_schemas import BfclRow, append_bfcl_rows

    outcomes = fx.make_outcomes(4, ("simple_python", "live_simple"))
    fx.write_pass(dirs["results"], RUN, 0, 1, outcomes)
    overlong = {c: sum(o["category"] == c and o["outcome"] == "overlong" for o in outcomes)
                for c in ("simple_python", "live_simple")}
    # The CSV's correct/total agree; its overlong count for one category does not. The cells the outcomes do
    # not measure (BFCL's verdict was not recorded) are left out of the comparison.
    append_bfcl_rows(dirs["results"] / RUN / "bfcl_by_category.csv", [
        BfclRow(0, 1, c, a, b, truncated=0, overlong=overlong[c] + (c == "live_simple"), overlong_bfcl_correct=0)
        for c, (a, b) in fx.count(outcomes).items()])
    code, out, _ = cli(*dirs["args"])
    assert code == 0 and "outcomes.jsonl counts differ" not in out
    assert (f"step 0 pass 1: outcomes.jsonl's truncated and overlong counts differ from bfcl_by_category.csv "
            f"(live_simple overlong: outcomes {overlong['live_simple']}, CSV {overlong['live_simple'] + 1})") in out
