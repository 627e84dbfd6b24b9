"""The report page (make_figures --report) as a reader sees it in a real browser: Debian's Chromium, driven by
Playwright. Checked: no console or page error, no request leaving the file, every section present, the headline
table's numbers equal an independent computation from the CSV (pandas + statsmodels, tests/analysis/conftest.py),
the status line's scored and pending steps, and a full-page screenshot written under the test's output folder
(`TOOLCANARY_TEST_OUTPUT`, which make test sets to .venvs/reports/, else the test's temporary folder).

Run: .venvs/analysis/bin/python -m pytest tests/analysis/test_report_page.py -q
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import pytest
from report_browser import inspect_page

from toolcanary.analysis.__main__ import main
from toolcanary.analysis.settings import newey_west_lags
from toolcanary.analysis.verdicts import p_text
from toolcanary.contract.manifests import PublishedCheckpoint, append_published

SECTIONS = ["status", "headline", "findings", "figures", "categories", "items", "stability", "training",
            "distribution", "audit", "provenance"]
SHOWN_COLUMNS = ("step0", "step_last", "rel_delta_pct", "delta_pp", "slope_pp_per_10", "t", "t_hac", "rho",
                 "p_change")
AUDIT_MD = """# Contamination audit: run `run`

- Tool library: `demo` (3 tools)

## Counts per category

| category | items | exact_name | flagged |
|---|---:|---:|---:|
| simple_python | 12 | 0 | 0 |

## Robustness of the result

| aggregate | all items | without flagged |
|---|---:|---:|
| Abstention required | 50.00 | 50.00 |

## Flagged items

- `simple_python_3` (simple_python): exact_name
"""


def outcome(step: int, pass_index: int, category: str, item: str) -> tuple[str, str | None]:
    """Correct items thin out with the step; one item flips between the repeat passes."""
    index = int(item.rsplit("_", 1)[1])
    correct = index < 9 - step // 10 or (index == 11 and pass_index == 2)
    return ("correct" if correct else "wrong_answer"), ("text" if "irrelevance" in category else "calls")


def publish(checkpoints: Path, run: str, steps: list[int]) -> None:
    for step in steps:
        append_published(checkpoints / run, PublishedCheckpoint(step=step, path=f"step_{step:04d}",
                                                                weights_sha256="0" * 64))


def output_folder(tmp_path: Path) -> Path:
    base = os.environ.get("TOOLCANARY_TEST_OUTPUT")
    return Path(base) / "report-pages" if base else tmp_path / "shots"


def render(run_dir: Path, checkpoints: Path, capsys, *extra: str) -> Path:
    code = main(["--data", str(run_dir), "--checkpoints-dir", str(checkpoints), "--report", *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    page = run_dir / "report" / "index.html"
    assert f"wrote {page}" in captured.err
    return page


def shown(value: float, spec: str, suffix: str = "") -> str:
    return "n/a" if value != value else f"{value:{spec}}{suffix}"


def test_the_page_of_a_scored_run_renders_with_the_tables_numbers(item_run, independent, tmp_path, capsys):
    run_dir = item_run(outcome, {0: 2, 10: 1, 20: 2}, name="run")
    (run_dir / "audit").mkdir()
    (run_dir / "audit" / "audit.md").write_text(AUDIT_MD)
    checkpoints = tmp_path / "checkpoints"
    publish(checkpoints, "run", [0, 10, 20])
    page = render(run_dir, checkpoints, capsys)
    seen = inspect_page(page, output_folder(tmp_path) / "scored_run.png")

    assert seen["errors"] == [] and seen["outside_requests"] == []
    assert seen["sections"] == SECTIONS
    assert Path(seen["screenshot"]).stat().st_size > 20_000
    expected = independent.table(run_dir / "bfcl_by_category.csv", newey_west_lags(3))
    for name, values in expected.items():
        cells = seen["headline"][name]
        specs = [(".2f", ""), (".2f", ""), ("+.2f", "%"), ("+.2f", ""), ("+.3f", ""), ("+.2f", ""), ("+.2f", ""),
                 ("+.2f", ""), (None, "")]
        for (text, value), column, (spec, suffix) in zip(cells, SHOWN_COLUMNS, specs, strict=False):
            want = p_text(values[column]) if spec is None else shown(values[column], spec, suffix)
            assert text == want, (name, column)
            if values[column] == values[column]:
                assert float(value) == pytest.approx(values[column], rel=1e-9, abs=1e-9), (name, column)
        # the s.d. of the repeat passes at steps 0 and 20, the steps scored twice
        assert [text for text, _ in cells[len(SHOWN_COLUMNS):]] == [
            f"{values[f'sd_step{s}']:.2f}" for s in (0, 20)]
    assert "Abstention required, no unparsed credit" in seen["headline"]
    assert seen["scored"] == [0, 10, 20] and seen["pending"] == []
    # every figure drawn and shown, the per-category counts, the audit's summary without its item list
    assert len(seen["images"]) == 4 and all(width > 100 for _, width in seen["images"])
    simple = dict(seen["categories"])["simple_python"]
    assert simple == ["9/12", "10/12", "8/12", "7/12", "8/12"]
    assert "without flagged" in seen["text"] and "simple_python_3" not in seen["text"]
    assert "bfcl-eval\t2025.10.20" in seen["text"] and "served context\t40960" in seen["text"]


def test_a_run_with_one_scored_step_and_pending_steps_says_what_waits(item_run, independent, tmp_path, capsys):
    run_dir = item_run(outcome, {0: 1}, name="young")
    checkpoints = tmp_path / "checkpoints"
    publish(checkpoints, "young", [0, 10, 20])
    page = render(run_dir, checkpoints, capsys)
    html = page.read_text()
    assert '<meta http-equiv="refresh"' in html  # a page with pending steps reloads itself
    seen = inspect_page(page, output_folder(tmp_path) / "one_scored_step.png")

    assert seen["errors"] == [] and seen["outside_requests"] == []
    assert seen["sections"] == SECTIONS
    assert seen["scored"] == [0] and seen["pending"] == [10, 20]
    assert "one scored step, and the item-level comparison needs two" in seen["text"]
    assert "no step scored more than once" in seen["text"]
    assert "No audit yet: make audit RUN=young" in seen["text"]
    expected = dict(independent.aggregates(run_dir / "bfcl_by_category.csv").loc[(0, 1)])
    # The table's abstention row without BFCL's credit for unparsed call markup, from the CSV's own columns.
    rows = list(csv.DictReader((run_dir / "bfcl_by_category.csv").open()))
    abstention = [r for r in rows if r["category"] in ("irrelevance", "live_irrelevance")]
    expected["Abstention required, no unparsed credit"] = 100 * sum(
        int(r["correct"]) - int(r["correct_unparsed"]) for r in abstention) / sum(int(r["total"]) for r in abstention)
    assert list(seen["headline"]) == ["Abstention required", "Abstention required, no unparsed credit",
                                      "Tool call required", "Non-Live", "Live", "Multi-Turn"]
    for name, cells in seen["headline"].items():
        ((text, value),) = cells  # the step's value only: no change without a second step
        assert text == f"{expected[name]:.2f}" and float(value) == pytest.approx(expected[name], rel=1e-12)
    assert "the change, slope and t need a second scored step" in seen["text"]


def test_a_results_folder_without_its_checkpoints_says_it_cannot_tell_what_is_published(item_run, tmp_path, capsys):
    run_dir = item_run(outcome, {0: 1, 10: 1}, name="copied")
    page = render(run_dir, tmp_path / "nowhere", capsys)
    assert "Published checkpoints: unknown, no ledger at" in page.read_text()
    assert '<meta http-equiv="refresh"' not in page.read_text()


def test_a_refused_pass_is_listed_with_its_reason(item_run, tmp_path, capsys):
    run_dir = item_run(outcome, {0: 1, 10: 1}, name="refusal")
    refused = run_dir / "passes" / "step_0020_pass_1"
    refused.mkdir()
    (refused / "failure.json").write_text(json.dumps({"reason": "the server never answered", "at": "2026-12-01"}))
    page = render(run_dir, tmp_path / "checkpoints", capsys)
    assert "step 20 pass 1</span> the server never answered" in page.read_text()


def test_the_compare_page_renders(item_run, tmp_path, capsys, monkeypatch):
    for name in ("a", "b"):
        item_run(outcome, {0: 1, 10: 1}, name=name)
    monkeypatch.setenv("TOOLCANARY_RESULTS_DIR", str(tmp_path))
    code = main(["--compare", "a", "b", "--report"])
    err = capsys.readouterr().err
    assert code == 0, err
    page = next(Path(line.split(" ", 1)[1]) for line in err.splitlines() if line.endswith("report/index.html"))
    seen = inspect_page(page, output_folder(tmp_path) / "compare.png")
    assert seen["errors"] == [] and seen["outside_requests"] == []
    assert "b (B) against a (A)" in seen["text"] and len(seen["images"]) == 1


def test_the_page_is_one_file_that_opens_from_a_copy_anywhere(item_run, tmp_path, capsys):
    run_dir = item_run(outcome, {0: 1, 10: 1}, name="portable")
    page = render(run_dir, tmp_path / "checkpoints", capsys)
    elsewhere = tmp_path / "elsewhere" / "page.html"
    elsewhere.parent.mkdir()
    shutil.copy(page, elsewhere)
    seen = inspect_page(elsewhere, output_folder(tmp_path) / "copied_page.png")
    assert seen["errors"] == [] and seen["outside_requests"] == []
    assert all(width > 100 for _, width in seen["images"])
