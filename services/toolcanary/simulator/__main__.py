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
from pathlib import Path

from toolcanary.contract import DifficultySettings
from toolcanary.settings import add_flags
from toolcanary.simulator.settings import ENV_ONLY, SimulatorSettings

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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m toolcanary.simulator", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    verbs = parser.add_subparsers(dest="verb", required=True)
    serve = verbs.add_parser("serve", help="run the HTTP service", epilog=SERVE_EPILOG,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(serve, SimulatorSettings, skip=(*ENV_ONLY, "upstreams"),
              kinds={"temperature": str, "frequency_penalty": str})
    serve.add_argument("--upstream", dest="upstreams", action="extend", nargs="+", default=None, metavar="URL",
                       help="OpenAI-compatible base URL(s); several after one flag or the flag repeated (llm backend)")
    serve.add_argument("--check", action="store_true",
                       help="check the settings (in mode trustee, the TRUSTEE checkout and its library) and exit "
                            "without serving: exit 0 when they hold, 2 with the reason")
    check = verbs.add_parser("validate", help="check a library and that gold trajectories earn reward 1",
                             epilog=VALIDATE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    check.add_argument("--library", type=Path, default=None, help="library JSON (default: the packaged one)")
    check.add_argument("--tasks", type=int, default=300, help="tasks to generate and check (default: 300)")
    check.add_argument("--seed", type=int, default=0, help="scripted seed (default: 0)")
    build = verbs.add_parser("build-library", help="write the default library JSON from the catalog modules",
                             epilog=BUILD_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    build.add_argument("--out", type=Path, default=None, help="where to write (default: the packaged file)")
    build.add_argument("--check", action="store_true", help="only compare with --out; exit 1 when it differs")
    return parser


def build_library(args: argparse.Namespace) -> int:
    from toolcanary.simulator.library_builder import build_or_check

    status, line = build_or_check(args.out, args.check)
    print(line, file=sys.stderr if status else sys.stdout)
    return status


NO_TOKEN = ("no bearer token: expected TOOLCANARY_SIMULATOR_TOKEN in the environment (a long random string, the "
            "trainer sends the same), got none. Without it anyone who reaches the port can claim task keys and "
            "earn rewards. Set it (e.g. TOOLCANARY_SIMULATOR_TOKEN=$(python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))')), or pass --insecure to serve without one on purpose")


def serve(args: argparse.Namespace) -> int:
    from toolcanary.simulator.app import create_app
    from toolcanary.simulator.server import serve as serve_http

    overrides = {k: v for k, v in vars(args).items() if k not in ("verb", "check")}
    settings = SimulatorSettings.from_env(**overrides)
    if not settings.token and not settings.insecure:
        print(f"error: {NO_TOKEN}", file=sys.stderr)
        return 2
    if args.check:
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

    index = LibraryIndex(args.library or DEFAULT_LIBRARY_PATH)
    print(f"{index.path}: {len(index.categories)} categories, {index.describe()}")
    if index.left_out:
        print(f"left out: {index.left_out_summary()}")
    grid = itertools.cycle(itertools.product(range(1, 11), range(1, 4), range(3), range(3), range(3), [True, False]))
    failures = 0
    for number in tqdm(range(args.tasks), desc="gold trajectories", unit="task"):
        tools, calls, persona, ambiguity, turns, call_expected = next(grid)
        difficulty = DifficultySettings(num_tools=tools, expected_calls=calls, user_persona=persona,
                                        query_ambiguity=ambiguity, expected_turns=turns, call_expected=call_expected)
        task = make_task(index, difficulty, f"validate-{number}", args.seed, abstain=not call_expected)
        verdict = verify(task, gold_trajectory(task, index), 5)
        if verdict.reward != 1:
            failures += 1
            print(f"FAIL {task.task_id}: gold reward {verdict.reward}: {verdict.reasoning}", file=sys.stderr)
    print(f"{args.tasks - failures}/{args.tasks} gold trajectories earn reward 1")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return {"serve": serve, "validate": validate, "build-library": build_library}[args.verb](args)
    except ValueError as err:  # a ContractError is a ValueError
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
