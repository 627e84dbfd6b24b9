"""Run every benchmark under bench/ in its image's environment and write one results file.

Each bench/<env-prefix>_<what>.py writes bench/results/<name>.json; this collects them into
bench/results/summary.json and prints every measured ratio side by side.

    python3 scripts/run_bench.py                 # all benchmarks
    python3 scripts/run_bench.py analysis_table  # one, by file stem
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV_OF_PREFIX = {"analysis": "analysis", "simulator": "simulator", "eval": "eval", "audit": "eval", "train": "train",
                 "demo": "dev"}


def flatten(prefix: str, value, out: dict) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            flatten(f"{prefix}.{key}" if prefix else key, inner, out)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out[prefix] = value


def main(argv: list[str]) -> int:
    scripts = sorted((ROOT / "bench").glob("*.py"))
    if argv:
        scripts = [s for s in scripts if s.stem in argv]
    results_dir = ROOT / "bench" / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    status, summary = 0, {}
    for script in scripts:
        env = ENV_OF_PREFIX.get(script.stem.split("_")[0])
        if env is None:
            print(f"bench: no environment for {script.name} (expected a prefix of {sorted(ENV_OF_PREFIX)})")
            status = 1
            continue
        print(f"=== {script.name} in .venvs/{env}", flush=True)
        started = time.monotonic()
        result = subprocess.run([str(ROOT / ".venvs" / env / "bin" / "python"), str(script)], cwd=ROOT)
        summary[script.stem] = {"exit_status": result.returncode, "wall_s": round(time.monotonic() - started, 1)}
        status |= result.returncode != 0
    for path in sorted(results_dir.glob("*.json")):
        if path.name != "summary.json":
            flat: dict = {}
            flatten("", json.loads(path.read_text()), flat)
            summary.setdefault(path.stem, {}).update(flat)
    (results_dir / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True))
    print("\n=== ratios (measured / baseline)")
    for name, values in sorted(summary.items()):
        for key, value in sorted(values.items()):
            if "ratio" in key:
                print(f"  {name:<28} {key:<44} {value:8.3f}")
    print(f"\nall results: {results_dir.relative_to(ROOT)}/summary.json")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
