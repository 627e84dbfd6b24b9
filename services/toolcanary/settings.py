"""The one way every service reads its settings: a pydantic-settings class per service.

Each field is declared once, with a default and a description. From that declaration come
- its environment variable: the class's prefix + the field name in capitals (`TOOLCANARY_SIMULATOR_` + `seed` ->
  `TOOLCANARY_SIMULATOR_SEED`), or the names given by `env(...)` for the stack's shared variables
  (`TOOLCANARY_RUNS_DIR`, `TOOLCANARY_RESULTS_DIR`, `TOOLCANARY_CHECKPOINTS_DIR`, `TOOLCANARY_RUN`, `TRUSTEE_DIR`);
- its CLI flag: `--field-name`, added by `add_flags` with the description as help and the default shown.

Precedence: CLI flag > environment variable > a service's preset or mode default > the declared default.
An empty variable counts as unset (Compose and .env write `NAME=` for "no value"). A value that does not fit
its field raises `ContractError` naming the flag and the variable, what was expected, what came and what to do.

    class MySettings(ServiceSettings, env_prefix="TOOLCANARY_MINE_"):
        run: RunId = Field("default", description="run id")

    settings = MySettings.from_env(run="demo")        # os.environ, then the given overrides
    add_flags(parser, MySettings)                      # --run, with help "run id (default: default)"
"""

from __future__ import annotations

import argparse
import contextvars
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, Self, get_args, get_origin

from pydantic import AliasChoices, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from toolcanary.contract.errors import ContractError
from toolcanary.contract.run_id import RUN_ID_PATTERN, RUN_ID_RULE

# The environment `from_env` reads; unset, a plain constructor call reads none (defaults and arguments only).
_ENVIRON: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar("toolcanary_environ",
                                                                                    default=None)


def project_root() -> Path:
    """The checkout this package runs from (an editable install), else the current folder (inside an image).

    The data roots default to <project root>/volumes/<name>/.
    """
    candidate = Path(__file__).resolve().parents[2]
    return candidate if (candidate / "pyproject.toml").is_file() else Path.cwd()


def volume(name: str) -> Path:
    """The default data root volumes/<name>/ of the project."""
    return project_root() / "volumes" / name


def env(*names: str) -> AliasChoices:
    """The environment variable(s) a field is read from instead of prefix + NAME, first one found wins."""
    return AliasChoices(*names)


class _Environment(EnvSettingsSource):
    """The environment `from_env` was given (os.environ by default); nothing for a plain constructor call."""

    def _load_env_vars(self) -> Mapping[str, str | None]:
        environ = _ENVIRON.get()
        if environ is None:
            return {}
        return {key.lower(): value for key, value in environ.items() if value != ""}


class ServiceSettings(BaseSettings):
    """Base of every service's settings: declare fields, subclass with `env_prefix=`, call `from_env`."""

    model_config = SettingsConfigDict(extra="forbid", populate_by_name=True, env_ignore_empty=True,
                                      case_sensitive=False)
    # The field named by an error of the whole model (a check across fields), e.g. the simulator's "mode".
    whole_model_field: ClassVar[str | None] = None

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, _Environment(settings_cls)

    @classmethod
    def env_names(cls, field: str) -> list[str]:
        """The environment variables `field` is read from, in the order they are looked up."""
        info = cls.model_fields[field]
        if isinstance(info.validation_alias, AliasChoices):
            return [str(choice) for choice in info.validation_alias.choices]
        if isinstance(info.validation_alias, str):
            return [info.validation_alias]
        return [f"{cls.model_config.get('env_prefix', '')}{field}".upper()]

    @classmethod
    def flag(cls, field: str) -> str:
        return "--" + field.replace("_", "-")

    @classmethod
    def environment_values(cls, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """field -> raw value of each field set in `environ` (default os.environ); empty values are unset."""
        environ = os.environ if environ is None else environ
        values = {}
        for name in cls.model_fields:
            for variable in cls.env_names(name):
                if environ.get(variable, "") != "":
                    values[name] = environ[variable]
                    break
        return values

    @classmethod
    def preset(cls, values: Mapping[str, Any]) -> dict[str, Any]:
        """Values that replace the declared defaults, given what the environment and overrides set."""
        return {}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Self:
        """Declared defaults, then the preset, then `environ` (default os.environ), then `overrides` not None.

        Raises:
            ContractError: a value does not fit its field, naming the flag and the variable.
        """
        environ = dict(os.environ if environ is None else environ)
        given = {k: v for k, v in overrides.items() if v is not None}
        unknown = sorted(set(given) - set(cls.model_fields))
        if unknown:
            raise TypeError(f"{cls.__name__} has no field(s) {unknown}")
        preset = {k: v for k, v in cls.preset({**cls.environment_values(environ), **given}).items()
                  if k not in given and not any(environ.get(n, "") != "" for n in cls.env_names(k))}
        token = _ENVIRON.set(environ)
        try:
            return cls(**preset, **given)
        except ValidationError as err:
            raise cls.contract_error(err) from err
        finally:
            _ENVIRON.reset(token)

    @classmethod
    def contract_error(cls, err: ValidationError) -> ContractError:
        """The first problem of `err` as a ContractError naming the flag and the environment variable."""
        first = err.errors()[0]
        where = str(first["loc"][0]) if first["loc"] else ""
        field = next((name for name in cls.model_fields
                      if where == name or where.upper() in cls.env_names(name)), cls.whole_model_field)
        if field is None:
            return ContractError("settings", first["msg"].removeprefix("Value error, "),
                                 repr(first.get("input"))[:200], "Fix the flags or the environment variables.")
        expected = first["msg"].removeprefix("Value error, ")
        if first["type"].endswith(("_parsing", "_type")):
            expected = f"a value of type {getattr(_kind(cls.model_fields[field].annotation)[0], '__name__', 'str')}"
        elif first["type"] == "string_pattern_mismatch" and first.get("ctx", {}).get("pattern") == RUN_ID_PATTERN:
            expected = RUN_ID_RULE
        got = repr(first.get("input"))[:200]
        if any(word in field for word in ("token", "key", "secret", "password")):
            got = f"a value of {len(str(first.get('input') or ''))} characters (not shown)"
        # The variable ends the place named, so a message reads "... or VARIABLE: expected ..., got ...".
        return ContractError(
            f"setting {field}, flag {cls.flag(field)} or environment variable {' / '.join(cls.env_names(field))}",
            expected, got, "Fix the flag or the environment variable.",
        )


def _kind(annotation: Any) -> tuple[Any, tuple | None, bool]:
    """(argparse type, choices, is a list) of a field's annotation; None and Optional are looked through."""
    origin = get_origin(annotation)
    if origin is Literal:
        return str, tuple(str(a) for a in get_args(annotation)), False
    if origin in (list, tuple):
        inner = [a for a in get_args(annotation) if a is not Ellipsis]
        return (_kind(inner[0])[0] if inner else str), None, True
    args = [a for a in get_args(annotation) if a is not type(None)]
    if args and origin is not None:
        if len(args) == 1:
            return _kind(args[0])
        return str, None, False
    if hasattr(annotation, "__metadata__"):
        return _kind(annotation.__origin__)
    if annotation in (int, float, Path, bool):
        return annotation, None, False
    return str, None, False


def add_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup, settings: type[ServiceSettings], *,
              skip: Iterable[str] = (), kinds: Mapping[str, Any] | None = None,
              defaults: ServiceSettings | None = None) -> list[str]:
    """Add `--field-name` for each field of `settings` (but `skip`), help = description + default; None default.

    A bool field gets `--name/--no-name`; a list field takes several values after one flag. `kinds` overrides
    the argparse type of a field (e.g. str for a float that also takes "none"). Returns the fields added.
    """
    kinds = dict(kinds or {})
    added = []
    for name, info in settings.model_fields.items():
        if name in skip:
            continue
        added.append(name)
        kind, choices, many = _kind(info.annotation)
        kind = kinds.get(name, kind)
        default = getattr(defaults, name) if defaults is not None else _default(info)
        shown = "" if default is None or default == [] or default == () else f" (default: {_show(default)})"
        help_text = f"{info.description or name.replace('_', ' ')}{shown}".replace("%", "%%")
        if kind is bool:
            parser.add_argument(settings.flag(name), dest=name, action=argparse.BooleanOptionalAction, default=None,
                                help=help_text)
        elif many:
            parser.add_argument(settings.flag(name), dest=name, type=kind, nargs="*", default=None, help=help_text)
        else:
            parser.add_argument(settings.flag(name), dest=name, type=kind, default=None, choices=choices,
                                help=help_text)
    return added


def _default(info: FieldInfo) -> Any:
    return info.default_factory() if info.default_factory is not None else info.default


def _show(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def given(args: argparse.Namespace, settings: type[ServiceSettings]) -> dict[str, Any]:
    """The values of `settings`' fields that the command line gave (argparse leaves the others None)."""
    return {name: getattr(args, name) for name in settings.model_fields if getattr(args, name, None) is not None}


def flag_problems(parser: argparse.ArgumentParser, settings: type[ServiceSettings], *, env_only: Iterable[str] = (),
                  renamed: Mapping[str, str] | None = None, own_help: Iterable[str] = ()) -> list[str]:
    """What is wrong with `parser` as the command line of `settings` (empty: nothing); for the tests.

    Every field but `env_only` needs its flag (`renamed` maps a field to a flag of another name) writing to the
    field, and, but for the flags in `own_help`, help that starts with the field's description.
    """
    renamed, env_only, own_help = dict(renamed or {}), set(env_only), set(own_help)
    flags = {option: action for action in parser._actions for option in action.option_strings}
    problems = []
    for field, info in settings.model_fields.items():
        flag = renamed.get(field, settings.flag(field))
        if field in env_only:
            if flag in flags:
                problems.append(f"{flag}: {field} is read from the environment only")
        elif flag not in flags:
            problems.append(f"{settings.__name__}.{field} has no flag {flag} in {parser.prog}")
        elif flags[flag].dest != field:
            problems.append(f"{flag} writes {flags[flag].dest}, not {field}")
        elif field not in own_help and field not in renamed and info.description and not (
                (flags[flag].help or "").replace("%%", "%").startswith(info.description)):
            problems.append(f"{flag}: help {flags[flag].help!r} is not the description {info.description!r}")
    return problems
