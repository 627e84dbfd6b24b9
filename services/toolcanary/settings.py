"""The one way every service reads its settings and builds its command line: a pydantic model per service.

Each field is declared once, with a default and a description. From that declaration come
- its environment variable (settings classes, `ServiceSettings`): the class's prefix + the field name in capitals
  (`TOOLCANARY_SIMULATOR_` + `seed` -> `TOOLCANARY_SIMULATOR_SEED`), or the names given by `env(...)` for the
  stack's shared variables (`TOOLCANARY_RUNS_DIR`, `TOOLCANARY_RESULTS_DIR`, `TOOLCANARY_CHECKPOINTS_DIR`,
  `TOOLCANARY_RUN`, `TRUSTEE_DIR`);
- its CLI flag: `--field-name`, added by `add_flags` with the description as help and the default a run really
  uses shown (`Cli(...)` in the field's annotation when the flag needs another name, several values, a place
  after `--`). A command's own options (a step, an output folder) are fields of a plain pydantic model
  (`Options`) and get their flags from the same `add_flags`.

Precedence: CLI flag > environment variable > a preset (the defaults a policy or a mode picks, `Presets`) > the
declared default. An empty variable counts as unset (Compose and .env write `NAME=` for "no value"). A value that
does not fit its field raises `UsageError` naming the flag and the variable, what was expected, what came and
what to do.

    class MySettings(ServiceSettings, env_prefix="TOOLCANARY_MINE_"):
        run: RunId = Field("default", description="run id")

    settings = MySettings.from_env(run="demo")        # os.environ, then the given overrides
    add_flags(parser, MySettings, defaults=settings)   # --run, with help "run id (default: demo)"
"""

from __future__ import annotations

import argparse
import contextvars
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, Self, get_args, get_origin

from pydantic import AliasChoices, BaseModel, ConfigDict, TypeAdapter, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from toolcanary.contract.errors import ContractError, UsageError
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


@dataclass(frozen=True)
class Presets:
    """Defaults that depend on the values of other fields (a policy, a mode): below the environment and the flags,
    above the declared defaults.

    `by` names the fields that choose; `table` maps their values, in that order, to the fields they set.

        Presets(("mode",), {("trustee",): {"retries": 2}, ("toolcanary",): {"retries": 3}})
    """

    by: tuple[str, ...]
    table: Mapping[tuple[Any, ...], Mapping[str, Any]]

    def pick(self, model: type[BaseModel], values: Mapping[str, Any]) -> dict[str, Any]:
        """The preset for `values` (a chooser not given takes its declared default); none for an unknown choice."""
        key = []
        for name in self.by:
            info = model.model_fields[name]
            value = values.get(name, _default(info))
            try:
                value = TypeAdapter(info.annotation).validate_python(value)
            except ValidationError:
                return {}  # the field's own validation names the bad value
            key.append(value)
        return dict(self.table.get(tuple(key), {}))

    def fields(self) -> set[str]:
        return {name for values in self.table.values() for name in values}

    def listing(self, model: type[BaseModel], field: str) -> str:
        """`field`'s default per choice, for its help: "by policy/quick: smollm2/no-quick 2, ..., else 12"."""
        def label(name: str, value: Any) -> str:
            if isinstance(value, bool):
                return name if value else f"no-{name}"
            return str(value)

        shown = [f"{'/'.join(label(n, v) for n, v in zip(self.by, key, strict=True))} {_show(values[field])}"
                 for key, values in self.table.items() if field in values]
        if len(shown) < len(self.table):
            shown.append(f"else {_show(_default(model.model_fields[field]))}")
        return f"by {'/'.join(self.by)}: {', '.join(shown)}"


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
    # Defaults a policy or a mode picks; applied to a plain constructor call and to `from_env` alike.
    presets: ClassVar[Presets | None] = None

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
        return flag_names(cls, field)[0]

    @classmethod
    def preset(cls, values: Mapping[str, Any]) -> dict[str, Any]:
        """Values that replace the declared defaults, given what the environment and the arguments set."""
        return cls.presets.pick(cls, values) if cls.presets is not None else {}

    @model_validator(mode="before")
    @classmethod
    def _apply_preset(cls, data: Any) -> Any:
        # `data` holds what the arguments and the environment set, so the preset fills only the rest.
        if not isinstance(data, dict):
            return data
        given = {key.lower() for key in data}
        preset = {name: value for name, value in cls.preset(data).items()
                  if name not in given and not any(variable.lower() in given for variable in cls.env_names(name))}
        return {**preset, **data}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Self:
        """Declared defaults, then the preset, then `environ` (default os.environ), then `overrides` not None.

        Raises:
            UsageError: a value does not fit its field, naming the flag and the variable.
        """
        environ = dict(os.environ if environ is None else environ)
        given = {k: v for k, v in overrides.items() if v is not None}
        unknown = sorted(set(given) - set(cls.model_fields))
        if unknown:
            raise TypeError(f"{cls.__name__} has no field(s) {unknown}")
        token = _ENVIRON.set(environ)
        try:
            return cls(**given)
        except ValidationError as err:
            raise cls.contract_error(err) from err
        finally:
            _ENVIRON.reset(token)

    @classmethod
    def contract_error(cls, err: ValidationError) -> UsageError:
        """The first problem of `err` as a UsageError naming the flag and the environment variable."""
        first = err.errors()[0]
        where = str(first["loc"][0]) if first["loc"] else ""
        field = next((name for name in cls.model_fields
                      if where == name or where.upper() in cls.env_names(name)), cls.whole_model_field)
        if field is None:
            return UsageError("settings", _expected(first["msg"]),
                              repr(first.get("input"))[:200], "Fix the flags or the environment variables.")
        expected = _expected(first["msg"])
        if first["type"] == "missing":
            expected, first = "a value", {**first, "input": None}
        elif first["type"].endswith(("_parsing", "_type")):
            expected = f"a value of type {getattr(_kind(cls.model_fields[field].annotation)[0], '__name__', 'str')}"
        elif first["type"] == "string_pattern_mismatch" and first.get("ctx", {}).get("pattern") == RUN_ID_PATTERN:
            expected = RUN_ID_RULE
        got = repr(first.get("input"))[:200]
        if any(word in field for word in ("token", "key", "secret", "password")):
            got = f"a value of {len(str(first.get('input') or ''))} characters (not shown)"
        # The variable ends the place named, so a message reads "... or VARIABLE: expected ..., got ...".
        return UsageError(
            f"setting {field}, flag {cls.flag(field)} or environment variable {' / '.join(cls.env_names(field))}",
            expected, got, "Fix the flag or the environment variable.",
        )


class Options(BaseModel):
    """Base of a command's own options (a step, an output folder): flags only, no environment variable."""

    model_config = ConfigDict(extra="forbid")

    @classmethod
    def of(cls, args: argparse.Namespace) -> Self:
        """The options a parsed command line gave, the declared defaults for the rest.

        Raises:
            UsageError: a value does not fit its field, naming the flag.
        """
        try:
            return cls(**given(args, cls))
        except ValidationError as err:
            first = err.errors()[0]
            field = str(first["loc"][0]) if first["loc"] else ""
            where = f"flag {flag_names(cls, field)[0]}" if field in cls.model_fields else "the flags"
            raise UsageError(where, _expected(first["msg"]), repr(first.get("input"))[:200],
                             "Fix the flag.") from err


@dataclass(frozen=True)
class Cli:
    """How a field shows on the command line where `--field-name` taking one value of the field's type does not
    fit; put it in the annotation: `pass_index: Annotated[int, Cli(flags=("--pass",))]`."""

    flags: tuple[str, ...] = ()  # the flag's names instead of --field-name
    off: str | None = None  # a bool's flag that sets it false (default --no-<name>); "" for none
    nargs: int | str | None = None  # values after the flag (default: one, a list "*"); argparse.REMAINDER
    positional: bool = False  # an argument without a flag (the extra arguments after --)
    repeat: bool = False  # the flag may be given again, each time adding its values
    metavar: str | tuple[str, ...] | None = None
    show_default: bool = True  # False: the description says what the default is (a fresh run id)
    env_only: bool = False  # no flag at all: a secret shows in the process list
    kind: Any = None  # the type argparse reads instead of the field's (str for a number that also takes "none")


def cli_of(info: FieldInfo) -> Cli:
    return next((m for m in info.metadata if isinstance(m, Cli)), Cli())


def flag_names(model: type[BaseModel], field: str) -> tuple[str, ...]:
    """The flags of `field`: those its `Cli` names, else `--field-name`."""
    return cli_of(model.model_fields[field]).flags or ("--" + field.replace("_", "-"),)


def _expected(message: str) -> str:
    """What a pydantic error says was expected, as the object of "expected": "Input should be greater than or
    equal to 0" -> "a value greater than or equal to 0"."""
    message = message.removeprefix("Value error, ")
    if message.startswith("Input should be "):
        rest = message.removeprefix("Input should be ")
        return rest if rest.startswith(("a ", "an ", "'")) else f"a value {rest}"
    return message


def _kind(annotation: Any) -> tuple[Any, tuple | None, bool]:
    """(argparse type, choices, is a list) of a field's annotation; None and Optional are looked through."""
    origin = get_origin(annotation)
    if origin is Literal:
        return str, tuple(str(a) for a in get_args(annotation)), False
    if origin in (list, tuple):
        inner = [a for a in get_args(annotation) if a is not Ellipsis]
        kind, choices, _ = _kind(inner[0]) if inner else (str, None, False)
        return kind, choices, True
    args = [a for a in get_args(annotation) if a is not type(None)]
    if args and origin is not None:
        if len(args) == 1:
            return _kind(args[0])
        literal = [a for a in args if get_origin(a) is Literal and get_args(a) != ("",)]
        if len(literal) == len(args):
            return str, tuple(str(v) for a in literal for v in get_args(a)), False
        return str, None, False
    if hasattr(annotation, "__metadata__"):
        return _kind(annotation.__origin__)
    if annotation in (int, float, Path, bool):
        return annotation, None, False
    return str, None, False


def add_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup, model: type[BaseModel], *,
              skip: Iterable[str] = (), only: Iterable[str] | None = None, defaults: BaseModel | None = None,
              title: str | None = None) -> list[str]:
    """Add the flags of `model`'s fields (all but `skip`, or `only` those) to `parser`, under `title` if given.

    The help is the field's description and the default a run resolves: the value in `defaults` (the settings
    resolved from the environment and the flags that choose a preset, `resolve_defaults`), else the declared
    default, and for a field a preset sets, the value per choice. A bool field gets `--name/--no-name`; a list
    field takes several values after one flag. Flags the command line does not give stay None, so the
    environment and the declared defaults still apply (`given`). Returns the fields added.
    """
    target = parser.add_argument_group(title) if title else parser
    only = None if only is None else set(only)
    added = []
    for name, info in model.model_fields.items():
        cli = cli_of(info)
        if name in skip or (only is not None and name not in only) or cli.env_only:
            continue
        added.append(name)
        kind, choices, many = _kind(info.annotation)
        kind = cli.kind or kind
        help_text = _help(model, name, info, defaults).replace("%", "%%")
        names = flag_names(model, name)
        if cli.positional:
            target.add_argument(name, nargs=cli.nargs or "*", help=help_text, metavar=cli.metavar)
        elif kind is bool:
            if cli.off is None and not cli.flags:
                target.add_argument(*names, dest=name, action=argparse.BooleanOptionalAction, default=None,
                                    help=help_text)
            else:
                both = target.add_mutually_exclusive_group() if cli.off else target
                both.add_argument(*names, dest=name, action="store_const", const=True, default=None, help=help_text)
                if cli.off:
                    both.add_argument(cli.off, dest=name, action="store_const", const=False, default=None,
                                      help=f"the opposite of {names[-1]}")
        else:
            # A repeated flag of one value each (--fig f1 --fig f2) appends; one of several values extends.
            nargs = cli.nargs if cli.nargs is not None or cli.repeat else ("*" if many else None)
            action = ("extend" if nargs is not None else "append") if cli.repeat else "store"
            target.add_argument(*names, dest=name, type=kind, nargs=nargs, action=action, default=None,
                                choices=choices, metavar=cli.metavar, required=info.is_required(), help=help_text)
    return added


def _help(model: type[BaseModel], name: str, info: FieldInfo, defaults: BaseModel | None) -> str:
    text = info.description or name.replace("_", " ")
    if info.is_required():
        return f"{text} (required)"
    if not cli_of(info).show_default:
        return text
    value = getattr(defaults, name) if defaults is not None else _default(info)
    if value is None or value in ("", [], ()):
        # Nothing set: say so, unless the description already says what happens then.
        shown = [] if "default" in text else ["default: none"]
    else:
        shown = [f"default: {_show(value)}"]
    presets = getattr(model, "presets", None)
    if presets is not None and name in presets.fields():
        shown.append(presets.listing(model, name))
    return f"{text} ({'; '.join(shown)})" if shown else text


def _default(info: FieldInfo) -> Any:
    return info.default_factory() if info.default_factory is not None else info.default


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, list | tuple):
        return " ".join(str(v) for v in value)
    return str(value)


def given(args: argparse.Namespace, model: type[BaseModel]) -> dict[str, Any]:
    """The values of `model`'s fields that the command line gave (argparse leaves the others None)."""
    return {name: getattr(args, name) for name in model.model_fields if getattr(args, name, None) is not None}


def chosen(argv: Sequence[str] | None, model: type[BaseModel]) -> dict[str, Any]:
    """The flags of `argv` that choose `model`'s preset (a policy, a mode), read before the whole command line,
    so that the help of `--policy tiny --help` shows the tiny policy's defaults."""
    presets = getattr(model, "presets", None)
    by = presets.by if presets is not None else ()
    if not by:
        return {}
    early = _EarlyParser(add_help=False)
    add_flags(early, model, only=by)
    try:
        known, _ = early.parse_known_args(list(argv) if argv is not None else None)
    except ValueError:
        return {}  # the whole command line's parser reports the bad value
    return given(known, model)


class _EarlyParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ValueError(message)


def resolve_defaults(settings: type[ServiceSettings], argv: Sequence[str] | None = None,
                     environ: Mapping[str, str] | None = None) -> ServiceSettings:
    """The settings a run of `argv` starts from before its other flags: the environment and the preset the
    command line chooses. When those do not hold together (a mode that needs a flag not yet read), the declared
    defaults with the preset, unchecked, so that `--help` still shows."""
    values = chosen(argv, settings)
    try:
        return settings.from_env(environ, **values)
    except (ContractError, TypeError):
        return settings.model_construct(**{**settings.preset(values), **values})
