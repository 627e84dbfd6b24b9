"""Benchmark: the quick study (`python -m toolcanary.demo.study --quick`) with one server per run, the way it
scores, against a new server per checkpoint (`TOOLCANARY_EVALUATE_RELOAD=false`, the way eval-all scored before).

Both sides run the whole quick study (four runs: two arms x two seeds, two GRPO steps, a 20-item bank) in a
fresh volume root of their own, the starting policy built once per side. Prints each side's time per phase and
the ratios ours / baseline for the eval phase and the whole study, and writes bench/results/demo_study.json.

    .venvs/dev/bin/python bench/demo_study.py                # about a quarter of an hour on 2 cores
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIDES = {"baseline": {"TOOLCANARY_EVALUATE_RELOAD": "false"}, "ours": {"TOOLCANARY_EVALUATE_RELOAD": "true"}}


def run_study(root: Path, extra_env: dict[str, str]) -> dict:
    env = {**os.environ, **extra_env,
           **{f"TOOLCANARY_{name.upper()}_DIR": str(root / name) for name in ("checkpoints", "runs", "results")}}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "toolcanary.demo.study", "--quick", "--run", "bench"], env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the study failed ({done.returncode}):\n{done.stderr[-2000:]}")
    spent = json.loads((root / "results" / "_study" / "bench" / "study_timings.json").read_text())
    return {"wall_s": round(time.monotonic() - started, 1), "phases_s": spent["phases_s"],
            "passes": spent["passes"], "passes_wall_s": spent["passes_wall_s"]}


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="demo_study_"))
    sides = {}
    for name, extra in SIDES.items():
        sides[name] = run_study(work / name, extra)
        print(f"{name}: {sides[name]['wall_s'] / 60:.1f} min; phases (s) {sides[name]['phases_s']}", flush=True)
    base, ours = sides["baseline"], sides["ours"]
    result = {
        "benchmark": "demo_study", "baseline": "a new vLLM server per checkpoint (--no-reload)",
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus", **sides,
        "eval_ratio": round(ours["phases_s"]["eval"] / base["phases_s"]["eval"], 3),
        "study_wall_ratio": round(ours["wall_s"] / base["wall_s"], 3),
    }
    out = REPO / "bench" / "results" / "demo_study.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"eval phase: ours / baseline = {result['eval_ratio']:.3f}; whole study: {result['study_wall_ratio']:.3f}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
