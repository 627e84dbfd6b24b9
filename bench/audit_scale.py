"""Benchmark: the contamination audit at TRUSTEE scale, 16,000 library tools and 25,600 generated tasks.

Builds a synthetic library and a run folder of 200 step files (128 task records each, four tools per
task) in a temporary folder, then audits all 17 offline BFCL categories twice, each in a fresh process:
- `chunked`: the shipped setting (`chunk_rows` 512 BFCL rows per sparse product);
- baseline `unchunked`: one sparse product per measure (chunk_rows larger than any row count).
Prints wall time and peak resident memory side by side, as ratios against the baseline, and writes
bench/results/audit_scale.json.

    .venvs/eval/bin/python bench/audit_scale.py
    .venvs/eval/bin/python bench/audit_scale.py --tools 4000 --tasks 6400      # a quicker look
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tqdm import tqdm

RESULTS = Path(__file__).parent / "results" / "audit_scale.json"
SYLLABLES = "ka lo mi ne ru sa ti vo ze bu da fe gi ho ju ly po qa re su".split()
ENGLISH = (
    "account order item price stock user file report weather city flight hotel booking payment invoice "
    "message email calendar event note task project team device light sensor song playlist video "
    "image document search list create update delete send schedule track convert translate summary "
    "location route distance currency rate balance transfer card product review rating recipe"
).split()


def _vocabulary(rng: random.Random, size: int = 4000) -> list[str]:
    made = {"".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(size)}
    return sorted(made) + ENGLISH * 20  # English words recur, so the synthetic data shares terms with BFCL


def _tool(rng: random.Random, words: list[str], number: int) -> dict:
    noun, verb = rng.choice(words), rng.choice(["get", "list", "create", "update", "search", "send"])
    params = {
        f"{rng.choice(words)}_{k}": {"type": "string", "description": " ".join(rng.choices(words, k=6))}
        for k in range(rng.randint(1, 5))
    }
    return {
        "type": "function",
        "function": {
            "name": f"{noun}{number}.{verb}_{rng.choice(words)}",
            "description": " ".join(rng.choices(words, k=18)),
            "parameters": {"type": "object", "properties": params},
        },
    }


def build_inputs(folder: Path, tools: int, tasks: int, seed: int = 0) -> tuple[Path, Path]:
    rng = random.Random(seed)
    words = _vocabulary(rng)
    flat = [_tool(rng, words, n) for n in range(tools)]
    library: dict[str, dict[str, list[dict]]] = {}
    for number, tool in enumerate(flat):
        category, toolset = f"category{number % 49}", f"toolset{number // 8}"
        library.setdefault(category, {}).setdefault(toolset, []).append(
            dict(tool, toolset_name=toolset, category=category)
        )
    library_path = folder / "library.json"
    library_path.write_text(json.dumps(library))
    simulator = folder / "runs" / "bench" / "simulator"
    simulator.mkdir(parents=True)
    per_step = max(1, tasks // 200)
    for step in tqdm(range(0, tasks, per_step), desc="writing task records", unit="step"):
        lines = []
        for number in range(step, min(step + per_step, tasks)):
            task = {
                "task_id": f"task-{number}",
                "task_key": f"key-{number}",
                "tools": rng.sample(flat, 4),
                "user_intent": " ".join(rng.choices(words, k=14)),
                "user_persona": "expert",
                "first_user_query": " ".join(rng.choices(words, k=24)),
                "difficulty": {
                    "num_tools": 4,
                    "expected_calls": 1,
                    "user_persona": 0,
                    "query_ambiguity": 0,
                    "expected_turns": 0,
                },
            }
            lines.append(
                json.dumps(
                    {
                        "contract_version": "1",
                        "time": "2026-01-01T00:00:00Z",
                        "run": "bench",
                        "step": step // per_step,
                        "role": "task",
                        "backend": "scripted",
                        "request": {},
                        "response": {"task": task},
                        "outcome": "ok",
                        "latency_s": 0.1,
                    }
                )
            )
        (simulator / f"step_{step // per_step:04d}.jsonl").write_text("\n".join(lines) + "\n")
    return library_path, folder / "runs"


def worker(folder: Path, library: Path, chunk_rows: int) -> dict:
    """One audit in this process; returns timings and peak memory."""
    from toolcanary.audit.run_audit import run_audit
    from toolcanary.audit.settings import AuditSettings

    settings = AuditSettings(
        runs_dir=folder / "runs",
        results_dir=folder / f"results-{chunk_rows}",
        library=library,
        chunk_rows=chunk_rows,
    )
    (settings.results_dir / "bench").mkdir(parents=True)
    start = time.perf_counter()
    result = run_audit("bench", settings, progress=False)
    wall = time.perf_counter() - start
    return {
        "chunk_rows": chunk_rows,
        "wall_s": round(wall, 2),
        "flagged": result.flagged,
        "items": len(result.audits),
        "tasks": len(result.reading.tasks),
        "stages_s": result.seconds,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n")[-1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--tools", type=int, default=16_000)
    parser.add_argument("--tasks", type=int, default=25_600)
    parser.add_argument(
        "--worker", nargs=3, metavar=("FOLDER", "LIBRARY", "CHUNK_ROWS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(Path(args.worker[0]), Path(args.worker[1]), int(args.worker[2]))))
        return 0
    with tempfile.TemporaryDirectory(prefix="audit-bench-") as tmp:
        folder = Path(tmp)
        start = time.perf_counter()
        library, _ = build_inputs(folder, args.tools, args.tasks)
        print(f"built {args.tools} tools and {args.tasks} tasks in {time.perf_counter() - start:.1f} s")
        runs = {}
        for name, chunk_rows in (("unchunked (baseline)", 1_000_000), ("chunked", 512)):
            done = subprocess.run(
                [sys.executable, __file__, "--worker", str(folder), str(library), str(chunk_rows)],
                capture_output=True,
                text=True,
                check=True,
            )
            runs[name] = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{name}: {runs[name]}")
    base, ours = runs["unchunked (baseline)"], runs["chunked"]
    print(f"\n{'measure':<16}{'unchunked':>12}{'chunked':>12}{'ratio':>9}")
    for key in ("wall_s", "peak_rss_mib"):
        print(f"{key:<16}{base[key]:>12}{ours[key]:>12}{ours[key] / base[key]:>9.2f}")
    for stage, seconds in base["stages_s"].items():
        ratio = ours["stages_s"][stage] / seconds if seconds else float("nan")
        print(f"{stage + ' s':<16}{seconds:>12.2f}{ours['stages_s'][stage]:>12.2f}{ratio:>9.2f}")
    report = {
        "tools": args.tools,
        "tasks": args.tasks,
        "cpus": len(__import__("os").sched_getaffinity(0)),
        "python": platform.python_version(),
        "baseline": base,
        "chunked": ours,
        "ratios": {k: round(ours[k] / base[k], 3) for k in ("wall_s", "peak_rss_mib")},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
