"""What the CLI tests of several suites check of a command line generated from a settings declaration.

Importable from every suite (pytest puts tests/ on the path for tests/conftest.py).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from pydantic import BaseModel

from toolcanary.settings import cli_of, flag_names


def flag_problems(parser: argparse.ArgumentParser, model: type[BaseModel], *, env_only: Iterable[str] = ()
                  ) -> list[str]:
    """What is wrong with `parser` as the command line of `model` (empty: nothing).

    Every field but those read from the environment only needs its flag(s) writing to the field, and help that
    starts with the field's description.
    """
    env_only = set(env_only) | {n for n, info in model.model_fields.items() if cli_of(info).env_only}
    flags = {option: action for action in parser._actions for option in action.option_strings}
    positional = {action.dest: action for action in parser._actions if not action.option_strings}
    problems = []
    for field, info in model.model_fields.items():
        names = flag_names(model, field)
        if field in env_only:
            problems += [f"{name}: {field} is read from the environment only" for name in names if name in flags]
            continue
        action = positional.get(field) if cli_of(info).positional else flags.get(names[0])
        if action is None:
            problems.append(f"{model.__name__}.{field} has no flag {names[0]} in {parser.prog}")
        elif action.dest != field:
            problems.append(f"{names[0]} writes {action.dest}, not {field}")
        elif info.description and not (action.help or "").replace("%%", "%").startswith(info.description):
            problems.append(f"{names[0]}: help {action.help!r} is not the description {info.description!r}")
    return problems

