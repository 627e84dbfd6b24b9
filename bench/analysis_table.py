"""Benchmark make_figures: 1,001 steps x 3 passes x 17 categories through --table --findings --fig all.

Each case runs in a fresh interpreter (so peak RSS is its own), against ToolCanary's shape (21 checkpoints,
three passes at 0, 150 and 200) as the baseline; printed side by side as ratios, written to
bench/results/analysis_table.json. CPU seconds are printed beside wall seconds because wall time on a
shared machine moves with its load (recorded as load_average). No assertion on time.

    .venvs/analysis/bin/python bench/analysis_table.py
    .venvs/analysis/bin/python bench/analysis_table.py --steps 2001
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from toolcanary.contract.bfcl import BY_NAME, OFFLINE_CATEGORIES
from toolcanary.contract.csv_schemas import TRAIN_METRICS_COLUMNS, BfclRow, append_bfcl_rows

RESULTS = Path(__file__).resolve().parent / "results" / "analysis_table.json"


def write_run(folder: Path, steps: list[int], repeats: dict[int, int], seed: int = 0) -> None:
    """A synthetic run: a slow decline in abstention, noise everywhere, and matching training metrics."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, step in enumerate(steps):
        for pass_index in range(1, repeats.get(step, 1) + 1):
            for name in OFFLINE_CATEGORIES:
                total = BY_NAME[name].items
                p = np.clip(0.8 - (0.04 * i / len(steps) if "irrelevance" in name else 0) + rng.normal(0, 0.01), 0, 1)
                rows.append(BfclRow(step, pass_index, name, int(round(total * p)), total))
    folder.mkdir(parents=True)
    append_bfcl_rows(folder / "bfcl_by_category.csv", rows)
    lines = [",".join(TRAIN_METRICS_COLUMNS)]
    for step in range(1, max(steps) + 1):
        values = {"step": step, "curriculum_level": min(1 + 3 * step // 2, 100),
                  "tool_call_share": 0.6 if step < max(steps) // 5 else 0.4, "reward_mean": rng.normal(0.5, 0.1)}
        lines.append(",".join(str(values.get(c, 0.5)) for c in TRAIN_METRICS_COLUMNS))
    (folder / "train_metrics.csv").write_text("\n".join(lines) + "\n")


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(folder: Path) -> dict[str, float]:
    """Run in a child: load, table + findings, and the whole command, timed; then this process's peak RSS."""
    from toolcanary.analysis.__main__ import main
    from toolcanary.analysis.data import load_bfcl
    from toolcanary.analysis.findings import bfcl_findings
    from toolcanary.analysis.settings import AnalysisSettings
    from toolcanary.analysis.table import headline_rows

    settings = AnalysisSettings()
    start = time.perf_counter()
    run = load_bfcl(folder / "bfcl_by_category.csv")
    loaded = time.perf_counter()
    bfcl_findings(run, headline_rows(run, settings), settings)
    computed = time.perf_counter()
    cpu_before = _cpu_seconds()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(["--data", str(folder), "--table", "--findings", "--fig", "all"])
    done = time.perf_counter()
    return {
        "exit_code": code, "rows": sum(len(s) for s in run.counts) * len(run.categories),
        "load_s": loaded - start, "table_findings_s": computed - loaded, "command_s": done - computed,
        "command_cpu_s": _cpu_seconds() - cpu_before, "load_average": os.getloadavg()[0],
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def child(folder: Path) -> dict[str, float]:
    output = subprocess.run([sys.executable, __file__, "--measure", str(folder)], capture_output=True,
                            text=True, check=True)
    return json.loads(output.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="examples:\n  .venvs/analysis/bin/python bench/analysis_table.py\n"
                                            "  .venvs/analysis/bin/python bench/analysis_table.py --steps 2001")
    parser.add_argument("--steps", type=int, default=1001, help="checkpoints in the large case (default: 1001)")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        write_run(Path(tmp) / "baseline", list(range(0, 201, 10)), {0: 3, 150: 3, 200: 3})
        write_run(Path(tmp) / "large", list(range(args.steps)), {s: 3 for s in range(args.steps)})
        cases = {"baseline": child(Path(tmp) / "baseline"), "large": child(Path(tmp) / "large")}
    base, large = cases["baseline"], cases["large"]
    keys = ("rows", "load_s", "table_findings_s", "command_s", "command_cpu_s", "peak_rss_mib")
    print(f"{'':22}{'baseline (21 steps)':>22}{f'{args.steps} steps x 3 passes':>26}{'ratio':>9}")
    for key in keys:
        print(f"{key:22}{base[key]:>22.3f}{large[key]:>26.3f}{large[key] / base[key]:>8.1f}x")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    ratios = {key: large[key] / base[key] for key in keys}
    RESULTS.write_text(json.dumps({"steps": args.steps, "passes": 3, "categories": 17, **cases,
                                   "ratio_large_to_baseline": ratios}, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
