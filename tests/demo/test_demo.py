"""`make demo QUICK=1` end to end on CPU with the real components, and that no process outlives it.

The run writes into a temporary volume root; its CSVs, table, figures and audit must exist and agree with
each other (the table's first-step values are recomputed here from the CSV with the contract's aggregate
definitions, independently of the analysis code).

Run: .venvs/dev/bin/python -m pytest tests/demo -q      (several minutes: it trains, serves and scores)
"""

import csv
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import pytest
from conftest import processes_mentioning, volume_env

from toolcanary.contract import OFFLINE_CATEGORIES, aggregate_value, read_bfcl_by_category, read_train_metrics

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("volumes")
    done = subprocess.run([sys.executable, "-m", "toolcanary.demo", "--quick", "--policy", "tiny", "--run", "ci-demo"],
                          capture_output=True, text=True, env=volume_env(root), timeout=1800)
    return root, done


def test_the_quick_demo_finishes_and_prints_its_summary(demo):
    root, done = demo
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "ToolCanary demo finished: run ci-demo" in done.stdout
    assert "| Abstention required |" in done.stdout and "Next, on GPUs: docs/gpu.md" in done.stdout


def test_the_report_page_renders_in_a_browser_with_the_tables_numbers(demo):
    """The page the closing screen names, opened in Chromium by the analysis environment's browser driver
    (tests/analysis/report_browser.py); its screenshot goes under TOOLCANARY_TEST_OUTPUT when make test sets it."""
    root, done = demo
    results = root / "results" / "ci-demo"
    page = results / "report" / "index.html"
    assert "  report       " in done.stdout and str(page).endswith(done.stdout.split("  report       ")[1].split()[0])
    shots = Path(os.environ.get("TOOLCANARY_TEST_OUTPUT", root)) / "report-pages"
    seen = subprocess.run([str(REPO / ".venvs" / "analysis" / "bin" / "python"), str(REPO / "tests" / "analysis" /
                           "report_browser.py"), str(page), str(shots / "demo_report.png")],
                          capture_output=True, text=True, timeout=300)
    assert seen.returncode == 0, seen.stderr[-3000:]
    seen = json.loads(seen.stdout)
    assert seen["errors"] == [] and seen["outside_requests"] == []
    assert seen["scored"] == [0, 2] and seen["pending"] == []
    assert {"headline", "items", "stability", "audit", "provenance"} <= set(seen["sections"])
    # The numbers on the page are the ones make_figures wrote to the full-precision CSV, row by row.
    with (results / "tables" / "headline.csv").open() as handle:
        table = {row["aggregate"]: row for row in csv.DictReader(handle)}
    assert list(seen["headline"]) == list(table)
    for name, cells in seen["headline"].items():
        for (_, value), column in zip(cells, ("step0", "step_last", "rel_delta_pct", "delta_pp"), strict=False):
            assert float(value) == pytest.approx(float(table[name][column]), nan_ok=True), (name, column)
    assert "Counts per category" in seen["text"]  # the audit ran before the page was written


def test_every_pass_is_in_tensorboard_as_tensorboard_reads_it(demo):
    """Each pass's category scores, read back with TensorBoard's event reader (the eval environment's), equal
    its rows in bfcl_by_category.csv."""
    root, _ = demo
    results = root / "results" / "ci-demo"
    read = ("import json, sys\n"
            "from tensorboard.backend.event_processing.event_accumulator import EventAccumulator\n"
            "reader = EventAccumulator(sys.argv[1]); reader.Reload()\n"
            "print(json.dumps({t: [[e.step, e.value] for e in reader.Scalars(t)] for t in reader.Tags()['scalars']}))")
    done = subprocess.run([str(REPO / ".venvs" / "eval" / "bin" / "python"), "-c", read,
                           str(results / "tensorboard" / "bfcl")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    scalars = json.loads(done.stdout)
    rows = read_bfcl_by_category(results / "bfcl_by_category.csv")
    for row in rows:
        points = dict(scalars[f"bfcl_category/{row.category}/pass{row.pass_index}"])
        assert points[row.step] == pytest.approx(100 * row.correct / row.total, abs=1e-4), row
    assert {p for tag in scalars for p in [tag.rsplit("/", 1)[1]]} == {"pass1", "pass2"}


def test_the_summary_says_where_the_time_went_from_what_the_services_recorded(demo):
    root, done = demo
    spent = json.loads((root / "results" / "ci-demo" / "demo_timings.json").read_text())
    phases = spent["phases_s"]
    assert list(phases) == ["simulator start", "starting policy", "train", "eval", "audit", "analysis"]
    metrics = read_train_metrics(root / "results" / "ci-demo" / "train_metrics.csv")
    assert spent["grpo_steps_s"] == [round(r["step_seconds"], 1) for r in metrics]
    assert sum(spent["grpo_steps_s"]) <= phases["train"]  # the steps are inside the train phase
    manifests = [json.loads(p.read_text()) for p in (root / "results" / "ci-demo" / "passes").glob("*/manifest.json")]
    assert spent["passes"] == len(manifests) == 4
    assert spent["pass_phases_s"]["total"] == pytest.approx(sum(m["timings_s"]["total"] for m in manifests), abs=0.1)
    # The repeats of a step run at once: their wall time is the union of their spans, within the eval phase.
    spans = [(datetime.fromisoformat(m["started_at"]), datetime.fromisoformat(m["finished_at"])) for m in manifests]
    assert spent["passes_wall_s"] <= min(phases["eval"], spent["pass_phases_s"]["total"] + 0.1)
    assert spent["passes_wall_s"] >= max((end - start).total_seconds() for start, end in spans) - 0.1
    for name in phases:
        assert re.search(rf"^    {re.escape(name)} +\d+\.\d min +\d+%", done.stdout, re.M), name
    assert "2 GRPO steps" in done.stdout and "4 passes" in done.stdout and "vLLM starts" in done.stdout


def test_the_summary_states_the_reward_trend_with_its_noise(demo):
    root, done = demo
    metrics = read_train_metrics(root / "results" / "ci-demo" / "train_metrics.csv")
    means = [r["reward_mean"] for r in metrics]
    line = next(x for x in done.stdout.splitlines() if x.startswith("Reward in the simulator:"))
    assert f"{means[0]:+.3f} at the first step, {means[-1]:+.3f} at the last" in line
    sd = math.sqrt(sum((m - sum(means) / len(means)) ** 2 for m in means) / (len(means) - 1))
    assert f"step-to-step s.d. {sd:.3f}" in line and "within-step s.d." in line


def test_the_summary_gives_each_categorys_counts_at_the_first_and_last_step(demo):
    root, done = demo
    rows = read_bfcl_by_category(root / "results" / "ci-demo" / "bfcl_by_category.csv")
    lines = done.stdout.splitlines()
    start = lines.index("Per category, correct/total over every pass of the step:")
    assert lines[start + 1].split() == ["category", "step", "0", "step", "2"]
    shown = {line.split()[0]: line.split()[1:] for line in lines[start + 2: start + 2 + len(OFFLINE_CATEGORIES)]}
    assert list(shown) == list(OFFLINE_CATEGORIES)
    for category, cells in shown.items():
        for step, cell in zip((0, 2), cells, strict=True):
            mine = [r for r in rows if r.step == step and r.category == category]
            assert cell == f"{sum(r.correct for r in mine)}/{sum(r.total for r in mine)}"
            assert cell.endswith("/2")  # one item, two passes


def test_no_process_outlives_the_demo(demo):
    root, _ = demo
    assert processes_mentioning(str(root)) == []


def test_checkpoints_metrics_and_bfcl_rows_are_complete(demo):
    root, _ = demo
    steps = sorted(p.name for p in (root / "checkpoints" / "ci-demo").glob("step_*"))
    assert steps == ["step_0000", "step_0002"]
    assert all((root / "checkpoints" / "ci-demo" / s / "manifest.json").is_file() for s in steps)
    assert [r["step"] for r in read_train_metrics(root / "results" / "ci-demo" / "train_metrics.csv")] == [1.0, 2.0]
    rows = read_bfcl_by_category(root / "results" / "ci-demo" / "bfcl_by_category.csv")
    passes = sorted({(r.step, r.pass_index) for r in rows})
    assert passes == [(0, 1), (0, 2), (2, 1), (2, 2)]
    assert {r.category for r in rows} == set(OFFLINE_CATEGORIES) and all(r.total == 1 for r in rows)
    assert len(list((root / "runs" / "ci-demo" / "simulator").glob("step_*.jsonl"))) >= 1


def test_the_table_agrees_with_the_csv(demo):
    root, _ = demo
    results = root / "results" / "ci-demo"
    per_pass, uncredited, as_bfcl = defaultdict(dict), defaultdict(dict), defaultdict(dict)
    for row in read_bfcl_by_category(results / "bfcl_by_category.csv"):
        per_pass[(row.step, row.pass_index)][row.category] = (row.correct, row.total)
        uncredited[(row.step, row.pass_index)][row.category] = (row.correct - row.correct_unparsed, row.total)
        # BFCL's own verdict: cut and overlong items as BFCL scored them (the demo counts overlong ones in the total)
        as_bfcl[(row.step, row.pass_index)][row.category] = (
            row.correct + row.truncated_bfcl_correct + row.overlong_bfcl_correct, row.total)
    with (results / "tables" / "headline.csv").open() as handle:
        table = {row["aggregate"]: row for row in csv.DictReader(handle)}
    no_credit, bfcls = "Abstention required, no unparsed credit", "Abstention required, as BFCL scores it"
    assert list(table) == [bfcls, "Abstention required", no_credit, "Tool call required", "Non-Live", "Live",
                           "Multi-Turn"]
    sources = {no_credit: uncredited, bfcls: as_bfcl}
    for name, row in table.items():
        source, aggregate = (sources[name], "Abstention required") if name in sources else (per_pass, name)
        first = [aggregate_value(aggregate, counts) for (step, _), counts in source.items() if step == 0]
        assert math.isclose(float(row["step0"]), sum(first) / len(first), abs_tol=1e-9), name


def test_the_item_level_analysis_is_written_and_summarised(demo):
    root, done = demo
    tables = root / "results" / "ci-demo" / "tables"
    found = json.loads((tables / "findings.json").read_text())
    assert found["items"]["steps"] == [0, 2] and (tables / "items_step0_step2.csv").is_file()
    assert found["stability"]["repeated_steps"] == [0, 2] and (tables / "stability.csv").is_file()
    abstention = found["items"]["aggregates"]["Abstention required"]
    assert f"Item by item, step 0 to 2: Abstention required {abstention['delta_pp']:+.2f} pp over " \
           f"{abstention['items']} items (permutation p={abstention['permutation_p']:.2g})" in done.stdout
    assert "Items whose outcome differs between repeat passes: " in done.stdout
    assert "Abstention without BFCL's credit for unparsed call markup: " in done.stdout


def test_figures_and_audit_are_written(demo):
    root, _ = demo
    results = root / "results" / "ci-demo"
    for name in ("f1", "f2", "f3", "f4"):
        for suffix in ("png", "pdf"):
            files = list((results / "figures").glob(f"{name}*.{suffix}"))
            assert files and files[0].stat().st_size > 1000, (name, suffix)
    assert (results / "audit" / "audit.csv").is_file() and (results / "audit" / "audit.md").is_file()


def test_ctrl_c_stops_every_process_the_demo_started(tmp_path):
    env = volume_env(tmp_path)
    demo = subprocess.Popen([sys.executable, "-m", "toolcanary.demo", "--quick", "--policy", "tiny", "--run",
                             "interrupted"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    train_log = tmp_path / "runs" / "interrupted" / "logs" / "train.log"
    deadline = time.monotonic() + 300
    while not train_log.exists() and time.monotonic() < deadline and demo.poll() is None:
        time.sleep(1)
    assert train_log.exists(), "the demo never reached training"
    time.sleep(3)
    demo.send_signal(signal.SIGINT)
    output, _ = demo.communicate(timeout=120)
    assert demo.returncode == 130, output[-2000:]
    assert "every process it started was stopped" in output
    time.sleep(1)
    assert processes_mentioning(str(tmp_path)) == []


@pytest.fixture(scope="module")
def smollm2_quick(tmp_path_factory):
    """`make demo QUICK=1` with the default policy (SmolLM2, one GRPO step, checkpoints 0 and 1 scored once, one
    item per category), made cheaper where the path stays the same: a deliberately small starting policy (one
    warm-start step instead of the preset's 30, which would add about eight minutes), one task of two episodes
    in its GRPO step instead of two of four, 32-token turns in training and serving instead of 128, and a served window of
    2,048 positions instead of 8,192, so that BFCL's long multi-turn prompts are refused at once (counted wrong)
    instead of prefilled on two cores."""
    root = tmp_path_factory.mktemp("smollm2")
    env = {**volume_env(root), "TOOLCANARY_TRAIN_WARM_START_STEPS": "1", "TOOLCANARY_TRAIN_TASKS_PER_STEP": "1",
           "TOOLCANARY_TRAIN_ROLLOUTS_PER_TASK": "2",
           "TOOLCANARY_TRAIN_MAX_TURN_TOKENS": "32", "TOOLCANARY_DEMO_MAX_TOKENS": "32",
           "TOOLCANARY_DEMO_MAX_MODEL_LEN": "2048"}
    done = subprocess.run([sys.executable, "-m", "toolcanary.demo", "--quick", "--run", "ci-smollm2"],
                          capture_output=True, text=True, env=env, timeout=1800)
    return root / "results" / "ci-smollm2", done


def test_the_default_policys_quick_demo_trains_one_step_and_ends_with_the_table(smollm2_quick):
    results, done = smollm2_quick
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "ToolCanary demo finished: run ci-smollm2" in done.stdout
    assert "| Abstention required |" in done.stdout and "| step 0 | step 1 |" in done.stdout
    metrics = read_train_metrics(results / "train_metrics.csv")
    assert [r["step"] for r in metrics] == [1]
    assert sorted({(r.step, r.pass_index) for r in read_bfcl_by_category(results / "bfcl_by_category.csv")}) == [
        (0, 1), (1, 1)]
    # The cap goes with every request, so each pass manifest records the cap its answers were really cut at.
    manifests = [json.loads(m.read_text()) for m in (results / "passes").glob("*/manifest.json")]
    assert len(manifests) == 2 and {m["max_tokens"] for m in manifests} == {32}
    # The training side reports its one step and names what one step cannot give.
    findings = (results / "tables" / "findings.txt").read_text()
    row = metrics[0]
    assert (f"Training: one step (step 1): tool-calling share of assistant turns {row['tool_call_share']:.3f}, "
            f"mean reward {row['reward_mean']:+.3f}") in findings
    assert "Not measurable from one step" in findings
    line = next(x for x in done.stdout.splitlines() if x.startswith("Reward in the simulator:"))
    assert "no trend measurable (1 step with a value: a trend needs two or more); one step only" in line
    assert (results / "figures" / "f1_training.png").stat().st_size > 1000


def test_the_readmes_five_minute_path_is_the_quick_tiny_demo_this_suite_runs():
    """README's first command, `make demo QUICK=1 POLICY=tiny`, is the `demo` fixture's command after setup."""
    readme = (REPO / "README.md").read_text()
    first = re.search(r"```bash\n(.*?)```", readme, flags=re.S)[1]
    assert "make demo QUICK=1 POLICY=tiny" in first
    dry = subprocess.run(["make", "--no-print-directory", "-n", "demo", "QUICK=1", "POLICY=tiny"], cwd=REPO, capture_output=True, text=True)
    assert dry.returncode == 0 and dry.stdout.splitlines()[0] == "python3 scripts/setup_venvs.py"
    assert dry.stdout.splitlines()[1].split() == [".venvs/dev/bin/python", "-m", "toolcanary.demo", "--quick",
                                                  "--policy", "tiny"]


def test_the_smollm2_demo_reaches_the_trainer_with_its_own_sizes_and_window():
    from toolcanary.demo.settings import REPO_ROOT, DemoSettings

    dry = subprocess.run(["make", "-n", "demo", "POLICY=smollm2"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert dry.returncode == 0 and "-m toolcanary.demo" in dry.stdout and "--policy smollm2" in dry.stdout
    smol = DemoSettings.from_env(policy="smollm2")
    assert smol.max_model_len == 8192  # SmolLM2's window; vLLM refuses more
    assert smol.checkpoint_steps == [0, 2] and smol.expected_passes == 4
    assert DemoSettings.from_env(policy="tiny").max_model_len == 32768
    refused = subprocess.run([sys.executable, "-m", "toolcanary.demo", "--policy", "gpt"], capture_output=True,
                             text=True)
    assert refused.returncode == 2 and "invalid choice: 'gpt'" in refused.stderr


def unregistered_or_unreadable(root: Path, run: str) -> tuple[list[str], list[str]]:
    """(files no registry entry describes, files whose content is not what their entry says), under `root`."""
    from toolcanary.contract.volumes import ROOTS, Csv, Document, Lines, match

    unknown, unreadable = [], []
    for name in ROOTS:
        base = root / name / run
        for path in sorted(p for p in base.rglob("*") if p.is_file()):
            relative = path.relative_to(base).as_posix()
            entry = match(name, relative)
            if entry is None:
                unknown.append(f"{name}/{run}/{relative}")
                continue
            try:
                if isinstance(entry.holds, Lines):
                    for line in path.read_text().splitlines():
                        entry.holds.model.model_validate_json(line)
                elif isinstance(entry.holds, Document):
                    entry.holds.model.model_validate_json(path.read_text())
                elif isinstance(entry.holds, Csv):
                    assert path.read_text().splitlines()[0] == ",".join(entry.holds.columns)
            except (ValueError, AssertionError, IndexError) as err:
                unreadable.append(f"{name}/{run}/{relative}: {str(err)[:200]}")
    return unknown, unreadable


def test_every_file_the_demo_writes_is_registered_with_its_contract_type(demo):
    root, done = demo
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    unknown, unreadable = unregistered_or_unreadable(root, "ci-demo")
    assert unknown == [], "add these to toolcanary.contract.volumes.VOLUME_FILES"
    assert unreadable == []
