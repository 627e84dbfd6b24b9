"""`python -m toolcanary.demo`: the main job in miniature on CPU, end to end, with the real components.

1. starts the simulator (scripted backend) as a local process;
2. builds the starting policy: the pretrained SmolLM2-135M (or the tiny random Qwen3 one) warm-started on the
   simulator's gold conversations, or the same policy from the cache when this recipe was built before;
   then trains GRPO steps against the simulator, publishing a checkpoint every few steps;
3. serves each checkpoint with vLLM's OpenAI server (production flags) and scores it with the BFCL client
   on a fixed sample of all 17 offline categories, with repeated passes at the first, middle and last;
4. runs the analysis (table, findings, figures) and the contamination audit;
5. prints where everything is. Every process it starts is stopped at the end, on failure and on Ctrl-C.

    make demo                 # or: .venvs/dev/bin/python -m toolcanary.demo (SmolLM2-135M-Instruct)
    make demo POLICY=tiny     # the tiny random policy: the fast plumbing run
    make demo QUICK=1         # one or two steps, one item per category
    make demo RUN=demo-...    # resume a run
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence

from toolcanary.contract.errors import ContractError
from toolcanary.demo.pipeline import run_demo
from toolcanary.demo.processes import ChildFailed
from toolcanary.demo.settings import DemoSettings
from toolcanary.demo.summary import render
from toolcanary.demo.timing import PhaseClock, breakdown_lines, timings, write_timings
from toolcanary.settings import add_flags, given, resolve_defaults

EPILOG = """examples:
  make demo
  make demo POLICY=tiny
  make demo QUICK=1 POLICY=tiny
  python -m toolcanary.demo --quick --policy tiny --run demo-ci
  python -m toolcanary.demo --policy tiny --help       # the defaults of the tiny policy's demo
"""


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The demo's command line; its help shows the defaults of the policy and size `argv` chooses."""
    parser = argparse.ArgumentParser(
        prog="python -m toolcanary.demo",
        description="Run the whole ToolCanary experiment in miniature on CPU. Each setting is also read from "
                    "TOOLCANARY_DEMO_<NAME>; the sizes depend on --policy and --quick.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_flags(parser, DemoSettings, defaults=resolve_defaults(DemoSettings, argv))
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        settings = DemoSettings.from_env(**given(args, DemoSettings))
    except ContractError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    started, clock = time.monotonic(), PhaseClock()
    try:
        run_demo(settings, clock)
    except ChildFailed as err:
        print(f"\ndemo failed: {err}\nResume after fixing it with: make demo RUN={settings.run}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\ndemo interrupted; every process it started was stopped. Resume: make demo RUN={settings.run}",
              file=sys.stderr)
        return 130
    spent = timings(clock, settings.result_dir)
    write_timings(settings.result_dir, spent)
    print(render(settings, time.monotonic() - started, breakdown_lines(spent)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
