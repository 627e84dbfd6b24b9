"""Benchmark: one full BFCL pass against the instant oracle stub, our client versus bare bfcl-eval.

Both sides use the same stub server, thread count and registering wrapper; "bare" is `bfcl generate` then
`bfcl evaluate` with nothing around them, "ours" is `python -m toolcanary.evaluate run` with every guard.
Prints the median wall time and the peak RSS of the largest process (a bfcl-eval child on both sides) side
by side as ratios (ours / bare), and writes bench/results/eval_pass.json.

    .venvs/eval/bin/python bench/eval_pass.py                       # the 17 offline categories (about 5 min on 2 cores)
    .venvs/eval/bin/python bench/eval_pass.py --repeats 3
    .venvs/eval/bin/python bench/eval_pass.py --sample 20 --threads 8
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "evaluate"))
from stub_server import StubServer  # noqa: E402

from toolcanary.contract.bfcl import OFFLINE_CATEGORIES  # noqa: E402
from toolcanary.evaluate.bfcl_data import choose_sample  # noqa: E402
from toolcanary.evaluate.bfcl_process import bfcl_env  # noqa: E402
from toolcanary.evaluate.settings import EvalSettings  # noqa: E402

MEASURE = ("import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(rc)")


def timed(argv: list[str], env: dict[str, str], log: Path) -> tuple[float, int]:
    """(wall seconds, peak RSS in MiB of the largest process) of one command, output to `log`."""
    start = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run([sys.executable, "-c", MEASURE, *argv], env=env, stdout=out, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed with {done.returncode}; see {log}")
    return time.monotonic() - start, int(done.stderr.strip().splitlines()[-1]) // 1024


def run_bare(work: Path, server: StubServer, args: argparse.Namespace, key: str) -> dict:
    """Bare bfcl-eval: a fresh project root, generate then evaluate through the registering wrapper."""
    root = work / "root"
    root.mkdir(parents=True)
    env = bfcl_env(root, server.base_url, "EMPTY", server.model, key, 60.0, 0, 0)
    selection = ["--test-category", ",".join(args.categories)]
    if args.sample:
        (root / "test_case_ids_to_generate.json").write_text(json.dumps(choose_sample(args.categories, args.sample, 0)))
        selection = ["--run-ids"]
    wrapper = [sys.executable, "-m", "toolcanary.evaluate.bfcl_wrapper"]
    gen = timed([*wrapper, "generate", "--model", key, *selection, "--num-threads", str(args.threads)],
                env, work / "generate.log")
    ev = timed([*wrapper, "evaluate", "--model", key, "--test-category", ",".join(args.categories),
                "--partial-eval"], env, work / "evaluate.log")
    return {"wall_s": gen[0] + ev[0], "generate_s": gen[0], "evaluate_s": ev[0], "peak_rss_mib": max(gen[1], ev[1])}


def run_ours(work: Path, server: StubServer, args: argparse.Namespace) -> dict:
    """Our client with every guard on, same stub and threads."""
    work.mkdir(parents=True)
    env = {**os.environ, "TOOLCANARY_RESULTS_DIR": str(work), "TOOLCANARY_EVALUATE_THREADS": str(args.threads)}
    sample = ["--sample", str(args.sample)] if args.sample else []
    wall, rss = timed([sys.executable, "-m", "toolcanary.evaluate", "run", "--run", "bench", "--step", "0", "--pass", "1",
                       "--base-url", server.base_url, "--model", server.model, "--base-model", "oracle-stub",
                       "--categories", *args.categories, *sample], env, work / "client.log")
    return {"wall_s": wall, "peak_rss_mib": rss}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--sample", type=int, help="items per category (default: every item)")
    parser.add_argument("--categories", nargs="+", default=list(OFFLINE_CATEGORIES))
    parser.add_argument("--repeats", type=int, default=1, help="runs of each side, in alternating order")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "eval_pass.json")
    args = parser.parse_args()
    key = EvalSettings().registry_key
    server = StubServer(0, "bench-step0000", "oracle").start()
    work = Path(tempfile.mkdtemp(prefix="eval_pass_"))
    bare, ours = [], []
    try:
        for i in range(args.repeats):
            # Alternate which side goes first so warm caches favour neither.
            sides = [("bare", bare), ("ours", ours)] if i % 2 == 0 else [("ours", ours), ("bare", bare)]
            for name, runs in sides:
                folder = work / f"{name}_{i}"
                runs.append(run_bare(folder, server, args, key) if name == "bare" else run_ours(folder, server, args))
                print(f"run {i + 1}/{args.repeats} {name}: {runs[-1]['wall_s']:.1f} s", flush=True)
    finally:
        server.stop()
    wall = (statistics.median(r["wall_s"] for r in bare), statistics.median(r["wall_s"] for r in ours))
    rss = (max(r["peak_rss_mib"] for r in bare), max(r["peak_rss_mib"] for r in ours))
    items = sum(len(v) for v in choose_sample(args.categories, args.sample or 10**6, 0).values())
    result = {
        "benchmark": "eval_pass", "baseline": "bare bfcl generate + evaluate", "items": items,
        "categories": args.categories, "threads": args.threads, "repeats": args.repeats,
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "bare": {"median_wall_s": round(wall[0], 2), "peak_rss_mib": rss[0], "runs": bare},
        "ours": {"median_wall_s": round(wall[1], 2), "peak_rss_mib": rss[1], "runs": ours},
        "ratio_wall": round(wall[1] / wall[0], 3), "ratio_peak_rss": round(rss[1] / max(rss[0], 1), 3),
    }
    print(f"{'':22s}{'bare bfcl':>12s}{'ours':>12s}{'ours/bare':>12s}")
    print(f"{'median wall time (s)':22s}{wall[0]:12.1f}{wall[1]:12.1f}{result['ratio_wall']:12.3f}")
    print(f"{'peak RSS (MiB)':22s}{rss[0]:12d}{rss[1]:12d}{result['ratio_peak_rss']:12.3f}")
    print(f"{items} items, {len(args.categories)} categories, {args.threads} threads, {args.repeats} runs each; "
          f"outputs in {work}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
