"""The make_figures command line: the console script, --help, the default run folder, usage errors.

    .venvs/analysis/bin/python -m pytest tests/analysis/test_cli.py -q
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolcanary.analysis.__main__ import main


def test_console_script_prints_help_with_examples():
    script = Path(sys.executable).parent / "make_figures"
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0
    assert "examples:" in result.stdout and "make_figures --data volumes/results/RUN --table" in result.stdout
    for flag in ("--data", "--run", "--table", "--findings", "--fig", "--format", "--hac-maxlags", "--train-metrics"):
        assert flag in result.stdout


def stack_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TOOLCANARY_RUN"}
    return {**env, "TOOLCANARY_RESULTS_DIR": str(tmp_path / "results"), **extra}


def test_default_data_is_the_newest_run_under_the_results_dir(golden, tmp_path, independent):
    older = golden("results/older", seed=1)
    newer = golden("results/newer", seed=2)
    os.utime(older / "bfcl_by_category.csv", (1_000_000_000, 1_000_000_000))
    result = independent.run_cli("--table", "--format", "csv", env=stack_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert (newer / "tables" / "headline.csv").read_text() == result.stdout
    assert not (older / "tables").exists()


def test_the_stacks_run_id_picks_the_run_and_the_flags_beat_it(golden, tmp_path, independent):
    older = golden("results/older", seed=1)
    newer = golden("results/newer", seed=2)
    os.utime(older / "bfcl_by_category.csv", (1_000_000_000, 1_000_000_000))
    env = stack_env(tmp_path, TOOLCANARY_RUN="older")
    assert independent.run_cli("--table", "--format", "csv", env=env).returncode == 0
    assert (older / "tables" / "headline.csv").is_file() and not (newer / "tables").exists()
    assert independent.run_cli("--run", "newer", "--table", env=env).returncode == 0
    assert (newer / "tables" / "headline.md").is_file()
    missing = independent.run_cli("--run", "nope", "--table", env=env)
    assert missing.returncode == 2
    assert str(tmp_path / "results" / "nope") in missing.stderr and "--run" in missing.stderr


def test_no_run_folder_says_how_to_point_at_one(tmp_path, independent):
    env = {**stack_env(tmp_path), "TOOLCANARY_RESULTS_DIR": str(tmp_path / "empty")}
    result = independent.run_cli("--table", env=env)
    assert result.returncode == 2
    assert str(tmp_path / "empty") in result.stderr and "--data" in result.stderr
    assert "TOOLCANARY_RESULTS_DIR" in result.stderr


def test_nothing_to_do_is_a_usage_error(golden, capsys):
    folder = golden()
    with pytest.raises(SystemExit) as exit_:
        main(["--data", str(folder)])
    assert exit_.value.code == 2
    assert "nothing to do" in capsys.readouterr().err
    assert not (folder / "tables").exists()


def test_missing_data_folder_names_the_file(tmp_path, capsys):
    assert main(["--data", str(tmp_path / "nope"), "--table"]) == 2
    assert str(tmp_path / "nope" / "bfcl_by_category.csv") in capsys.readouterr().err


def test_table_and_findings_are_also_written_to_the_run_folder(golden, capsys):
    folder = golden()
    assert main(["--data", str(folder), "--table", "--findings"]) == 0
    out = capsys.readouterr().out
    table = (folder / "tables" / "headline.md").read_text()
    assert out.startswith(table)
    assert (folder / "tables" / "findings.json").read_text().strip() in out
    assert (folder / "tables" / "findings.txt").read_text().splitlines()[0] in out


def test_each_analysis_setting_has_a_flag_and_its_own_variable(golden, tmp_path):
    from cli_checks import flag_problems

    from toolcanary.analysis.__main__ import build_parser
    from toolcanary.analysis.settings import AnalysisOptions, AnalysisSettings

    assert flag_problems(build_parser(AnalysisSettings()), AnalysisSettings) == []
    assert flag_problems(build_parser(AnalysisSettings()), AnalysisOptions) == []
    settings = AnalysisSettings.from_env({"TOOLCANARY_ANALYSIS_DPI": "90", "TOOLCANARY_RESULTS_DIR": str(tmp_path)})
    assert (settings.dpi, settings.results_dir) == (90, tmp_path)
    assert AnalysisSettings.from_env({"TOOLCANARY_ANALYSIS_RESULTS_DIR": "/a", "TOOLCANARY_RESULTS_DIR": "/b"}
                                     ).results_dir == Path("/a")
