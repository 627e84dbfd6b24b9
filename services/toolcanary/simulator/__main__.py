"""Command line of the simulator: `serve` the HTTP service, `validate` a library and its gold data, `build-library`.

    python -m toolcanary.simulator serve --insecure --backend scripted --run demo
    python -m toolcanary.simulator validate --tasks 300
    python -m toolcanary.simulator build-library --check

Flags override `TOOLCANARY_SIMULATOR_*` environment variables, which override the defaults in `settings.py`.
The bearer token is read from the environment only (TOOLCANARY_SIMULATOR_TOKEN), never from a flag; `serve`
refuses to start without one unless told `--insecure` (then anyone who reaches the port gets tasks and rewards).
"""

from __future__ import annotations

import argparse
import itertools
import logging
import sys
from collections.abc import Sequence

from toolcanary.contract import DifficultySettings
from toolcanary.settings import add_flags, given, resolve_defaults
from toolcanary.simulator.settings import BuildLibraryOptions, ServeCheck, SimulatorSettings, ValidateOptions

EPILOG = """examples:
  python -m toolcanary.simulator serve --insecure --backend scripted --run demo --port 8300
  TOOLCANARY_SIMULATOR_TOKEN=$TOKEN python -m toolcanary.simulator serve --host 0.0.0.0 --backend llm --mode trustee --trustee-dir ../TRUSTEE --run r1 --upstream http://vllm-a:8000 http://vllm-b:8000
  python -m toolcanary.simulator validate --tasks 300
  python -m toolcanary.simulator build-library --check
"""
SERVE_EPILOG = """examples:
  python -m toolcanary.simulator serve --insecure --backend scripted --run demo --port 8300
  python -m toolcanary.simulator serve --backend llm --mode trustee --trustee-dir ../TRUSTEE --upstream http://vllm-a:8000 http://vllm-b:8000
  python -m toolcanary.simulator serve --check --backend llm --mode trustee --trustee-dir ../TRUSTEE --upstream http://x
  TOOLCANARY_SIMULATOR_TOKEN=$TOKEN python -m toolcanary.simulator serve --run demo --no-call-fraction 0.1
"""
VALIDATE_EPILOG = """examples:
  python -m toolcanary.simulator validate --tasks 300
  python -m toolcanary.simulator validate --library my_tools.json --tasks 200 --seed 3
"""
BUILD_EPILOG = """examples:
  python -m toolcanary.simulator build-library
  python -m toolcanary.simulator build-library --check
  python -m toolcanary.simulator build-library --out build/library.json
"""


def _parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The simulator's command line; `serve --help` shows the defaults of the mode `argv` chooses."""
    parser = argparse.ArgumentParser(prog="python -m toolcanary.simulator", description=" ".join(__doc__.split("\n\n")[0].split()),
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    verbs = parser.add_subparsers(dest="verb", required=True)
    serve = verbs.add_parser("serve", help="run the HTTP service", epilog=SERVE_EPILOG,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(serve, SimulatorSettings, defaults=resolve_defaults(SimulatorSettings, argv))
    add_flags(serve, ServeCheck)
    check = verbs.add_parser("validate", help="check a library and that gold trajectories earn reward 1",
                             epilog=VALIDATE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(check, ValidateOptions)
    build = verbs.add_parser("build-library", help="write the default library JSON from the catalog modules",
                             epilog=BUILD_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(build, BuildLibraryOptions)
    return parser


def build_library(args: argparse.Namespace) -> int:
    from toolcanary.simulator.library_builder import build_or_check

    options = BuildLibraryOptions.of(args)
    status, line = build_or_check(options.out, options.check)
    print(line, file=sys.stderr if status else sys.stdout)
    return status


NO_TOKEN = ("no bearer token: expected TOOLCANARY_SIMULATOR_TOKEN in the environment (a long random string, the "
            "trainer sends the same), got none. Without it anyone who reaches the port can claim task keys and "
            "earn rewards. Set it (e.g. TOOLCANARY_SIMULATOR_TOKEN=$(python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))')), or pass --insecure to serve without one on purpose")


def serve(args: argparse.Namespace) -> int:
    from toolcanary.simulator.app import create_app
    from toolcanary.simulator.server import serve as serve_http

    settings = SimulatorSettings.from_env(**given(args, SimulatorSettings))
    if not settings.token and not settings.insecure:
        print(f"error: {NO_TOKEN}", file=sys.stderr)
        return 2
    if ServeCheck.of(args).check:
        from toolcanary.simulator.library_index import LibraryIndex

        index = LibraryIndex(settings.library)
        print(f"settings ok: backend {settings.backend}, mode {settings.mode}, library {settings.library} "
              f"({index.describe()})")
        if index.left_out:
            print(f"left out of the library: {index.left_out_summary()}")
        return 0
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not settings.token:
        logging.getLogger(__name__).warning("serving without a bearer token (--insecure): anyone who reaches "
                                            "%s:%d can ask for tasks and rewards", settings.host, settings.port)
    serve_http(create_app(settings), settings)
    return 0


def validate(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from toolcanary.simulator.library_index import DEFAULT_LIBRARY_PATH, LibraryIndex
    from toolcanary.simulator.scripted import gold_trajectory, make_task
    from toolcanary.simulator.scripted.roles import verify

    options = ValidateOptions.of(args)
    index = LibraryIndex(options.library or DEFAULT_LIBRARY_PATH)
    print(f"{index.path}: {len(index.categories)} categories, {index.describe()}")
    if index.left_out:
        print(f"left out: {index.left_out_summary()}")
    grid = itertools.cycle(itertools.product(range(1, 11), range(1, 4), range(3), range(3), range(3), [True, False]))
    failures = 0
    for number in tqdm(range(options.tasks), desc="gold trajectories", unit="task"):
        tools, calls, persona, ambiguity, turns, call_expected = next(grid)
        difficulty = DifficultySettings(num_tools=tools, expected_calls=calls, user_persona=persona,
                                        query_ambiguity=ambiguity, expected_turns=turns, call_expected=call_expected)
        task = make_task(index, difficulty, f"validate-{number}", options.seed, abstain=not call_expected)
        verdict = verify(task, gold_trajectory(task, index), 5)
        if verdict.reward != 1:
            failures += 1
            print(f"FAIL {task.task_id}: gold reward {verdict.reward}: {verdict.reasoning}", file=sys.stderr)
    print(f"{options.tasks - failures}/{options.tasks} gold trajectories earn reward 1")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser(argv).parse_args(argv)
    try:
        return {"serve": serve, "validate": validate, "build-library": build_library}[args.verb](args)
    except ValueError as err:  # a ContractError is a ValueError
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
