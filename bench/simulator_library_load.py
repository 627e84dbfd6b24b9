"""Benchmark: loading TRUSTEE's ToolBench library at its real size, time and peak memory, against `json.load`.

The library is generated (tests/simulator/toolbench_like_library.py: about 15.5 MB of indented JSON with
ToolBench's quirks and a few unusable entries) into a temporary folder. Each case runs in a fresh interpreter
that first imports the same modules, so the cases differ only in the load:

    floor          the imports alone
    json_load      baseline: `json.load` of the file, which is all TRUSTEE does
    load_library   `toolcanary.contract.tasks.load_tool_library`: usable tools checked and built, the unusable
                   left out (what the contamination audit runs)
    library_index  `toolcanary.simulator.library_index.LibraryIndex`: the simulator's start (the above, the
                   file's SHA-256, look-ups by name and result hints)

Each case runs `--repeats` times (median wall time of the load; median peak resident memory of the process, less
the floor's: what the load holds at its peak). Printed side by side as ratios against `json_load`, written to
bench/results/simulator_library_load.json. No assertion.

    .venvs/simulator/bin/python bench/simulator_library_load.py
    .venvs/simulator/bin/python bench/simulator_library_load.py --size-mb 2 --repeats 1      # a smoke run
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "simulator"))
from toolbench_like_library import write_toolbench_like  # noqa: E402

RESULTS = REPO / "bench" / "results" / "simulator_library_load.json"
IMPORTS = "import json, time\nfrom toolcanary.contract.tasks import load_tool_library\n" \
          "from toolcanary.simulator.library_index import LibraryIndex\n"
LOADS = {
    "floor": "pass",
    "json_load": "with open(PATH, encoding='utf-8') as file:\n    loaded = json.load(file)",
    "load_library": "loaded = load_tool_library(PATH)",
    "library_index": "loaded = LibraryIndex(PATH)",
}


def run_case(case: str, path: Path) -> tuple[float, float]:
    """(wall seconds of the load, peak resident MiB of the process) of one fresh interpreter."""
    body = "    " + LOADS[case].replace("\n", "\n    ")
    code = (f"{IMPORTS}PATH = {str(path)!r}\nstarted = time.perf_counter()\nif True:\n{body}\n"
            "print(time.perf_counter() - started)\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    output = child.stdout.read() if child.stdout else ""
    _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        raise SystemExit(f"bench: case {case} failed (wait status {status}); run it alone to see why")
    return float(output.split()[-1]), usage.ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="examples:\n  .venvs/simulator/bin/python bench/simulator_library_load.py\n"
                                            "  .venvs/simulator/bin/python bench/simulator_library_load.py "
                                            "--size-mb 2 --repeats 1")
    parser.add_argument("--size-mb", type=float, default=15.5, help="size of the generated library (default 15.5, "
                                                                    "TRUSTEE's)")
    parser.add_argument("--repeats", type=int, default=5, help="fresh interpreters per case (default 5)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"result file (default {RESULTS})")
    parser.add_argument("--make-library", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.size_mb <= 0 or args.repeats < 1:
        parser.error(f"expected a positive --size-mb and --repeats, got {args.size_mb} and {args.repeats}")
    if args.make_library:
        made = write_toolbench_like(args.make_library, int(args.size_mb * 1e6))
        print(json.dumps({"size_bytes": made.size_bytes, "usable": made.usable, "left_out": len(made.left_out)}))
        return 0
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "toolbench_tools.json"
        # In a child of its own: a case forked from a parent that held the generated library would start with
        # its memory and report it as the load's.
        made = json.loads(subprocess.run([sys.executable, __file__, "--size-mb", str(args.size_mb), "--make-library",
                                          str(path)], check=True, capture_output=True, text=True).stdout)
        runs = {case: [run_case(case, path) for _ in range(args.repeats)] for case in LOADS}
    load_s = {case: statistics.median(s for s, _ in found) for case, found in runs.items() if case != "floor"}
    peak = {case: statistics.median(m for _, m in found) for case, found in runs.items()}
    held = {case: peak[case] - peak["floor"] for case in load_s}
    result = {
        "library_mb": round(made["size_bytes"] / 1e6, 2), "tools": made["usable"], "left_out": made["left_out"],
        "repeats": args.repeats,
        "load_s": {case: round(value, 3) for case, value in load_s.items()},
        "peak_rss_mib": {case: round(value, 1) for case, value in peak.items()},
        "held_mib": {case: round(value, 1) for case, value in held.items()},
        **{f"ratio_{case}_time_to_json_load": load_s[case] / load_s["json_load"]
           for case in ("load_library", "library_index")},
        **{f"ratio_{case}_memory_to_json_load": held[case] / held["json_load"]
           for case in ("load_library", "library_index")},
        "python": platform.python_version(), "cpus": os.cpu_count(),
    }
    print(f"library {result['library_mb']} MB: {made['usable']} tools, {made['left_out']} entries unusable; "
          f"floor (imports) {peak['floor']:.0f} MiB; medians of {args.repeats}")
    print(f"{'':16}{'load s':>9}{'x json_load':>13}{'held MiB':>10}{'x json_load':>13}")
    for case in load_s:
        print(f"{case:16}{load_s[case]:>9.3f}{load_s[case] / load_s['json_load']:>13.2f}"
              f"{held[case]:>10.1f}{held[case] / held['json_load']:>13.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
