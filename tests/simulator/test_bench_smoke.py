"""The simulator throughput benchmark still runs: a short run exits 0 and writes every ratio it reports.

Run: .venvs/simulator/bin/python -m pytest tests/simulator/test_bench_smoke.py -q
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "simulator_throughput.py"


def test_the_throughput_bench_runs_short_and_writes_its_ratios(tmp_path):
    out = tmp_path / "result.json"
    done = subprocess.run([sys.executable, str(BENCH), "--seconds", "0.5", "--repeats", "1", "--tasks", "3",
                           "--in-flight", "4", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    scripted, llm = report["scripted"], report["llm_stub"]
    for key in ("ratio_vs_service", "ratio_vs_roles", "service_cpu_ms_per_call", "bytes_persisted_per_call"):
        assert scripted[key] > 0, (key, scripted)
    assert llm["ratio_vs_ideal"] > 0 and set(scripted["outcomes"]) == {"ok"}, (scripted, llm)
