"""Rewrite the GPU images' locks from pip's resolver, running each image's own install step.

locks/image-train.txt lists every package the train image installs; locks/image-simulator.txt lists
what the simulator image adds to the packages its vLLM base ships (nothing, while the base ships them
all). Both hold for the images' platform: Python 3.12 on linux x86_64.

How: the install step of an image is the RUN line of its Dockerfile that calls images/<image>/install.sh.
The files the Dockerfile copies before that step are staged in a scratch folder, the lock among them is
emptied, and the same command line runs there through pip's resolver alone (PIP_DRY_RUN=1,
PIP_IGNORE_INSTALLED=1, PIP_REPORT=<file>) in a throw-away virtual environment of a Python 3.12
interpreter with the pip every environment uses (scripts/setup_venvs.py's PIP). The base image of the
simulator is emulated by the resolution of its vLLM release alone (vllm/vllm-openai:vX -> vllm==X),
written in the `pip list --format=freeze` form the Dockerfile feeds the script.
tests/stack/test_gpu_image_resolution.py runs the same steps with the committed locks and fails when
a lock is stale.

Run (in an environment with `packaging`, e.g. .venvs/dev; each image takes about a minute of resolving):
    .venvs/dev/bin/python scripts/lock_images.py                     # both images
    .venvs/dev/bin/python scripts/lock_images.py train               # only locks/image-train.txt
    .venvs/dev/bin/python scripts/lock_images.py --python /usr/bin/python3.12 simulator
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "toolcanary"
IMAGE_PYTHON = "3.12"
PIP_TIMEOUT_S = 900


def _setup_venvs_pip() -> str:
    # The pin lives in setup_venvs.py; loaded by path because scripts/ is not a package.
    spec = importlib.util.spec_from_file_location("setup_venvs", ROOT / "scripts" / "setup_venvs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PIP


PIP = _setup_venvs_pip()


class LockError(Exception):
    """A step failed; the message says what was expected, what came and what to do."""


@dataclass(frozen=True)
class Image:
    name: str
    # The engine requirement whose resolution the image must not move. None: read from the base image.
    engine: str | None
    # Index of the install script's argument that names the base's package list (None: no base list).
    base_list_arg: int | None

    @property
    def dockerfile(self) -> Path:
        return ROOT / "images" / self.name / "Dockerfile"

    @property
    def script(self) -> str:
        return f"images/{self.name}/install.sh"

    @property
    def lock(self) -> str:
        return f"locks/image-{self.name}.txt"

    def regenerate_command(self) -> str:
        return f".venvs/dev/bin/python scripts/lock_images.py {self.name}"


IMAGES = {
    "train": Image("train", engine="verl[vllm]==0.9.1", base_list_arg=None),
    "simulator": Image("simulator", engine=None, base_list_arg=0),
}

# name (canonical) -> (name as its metadata spells it, version)
Resolution = dict[str, tuple[str, str]]


# --- the Dockerfile's install step ---------------------------------------------------------------


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined and comments dropped."""
    joined, pending = [], ""
    for line in dockerfile.read_text().splitlines():
        if line.lstrip().startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    out = []
    for text in joined:
        if text.strip():
            keyword, _, rest = text.strip().partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def base_image(image: Image) -> str:
    """The image the Dockerfile's last FROM names, build arguments replaced by their defaults."""
    defaults, base = {}, None
    for keyword, rest in instructions(image.dockerfile):
        if keyword == "ARG" and "=" in rest:
            name, default = rest.split("=", 1)
            defaults[name.strip()] = default.strip("\"'")
        elif keyword == "FROM":
            base = re.sub(r"\$\{?(\w+)\}?", lambda m: defaults.get(m[1], m[0]), rest.split()[0])
    if base is None or "$" in base:
        raise LockError(
            f"{image.dockerfile.relative_to(ROOT)}: expected a FROM naming a pinned image (directly or through an "
            f"ARG with a default), got {base!r}; give the base image's build argument a default"
        )
    return base


def engine_requirement(image: Image) -> str:
    """What the image's engine resolves from: a pip requirement."""
    if image.engine is not None:
        return image.engine
    base = base_image(image)
    match = re.fullmatch(r"vllm/vllm-openai:v(\d[\w.]*)", base)
    if not match:
        raise LockError(
            f"{image.dockerfile.relative_to(ROOT)}: expected the default base vllm/vllm-openai:v<version> (its "
            f"packages are emulated by resolving vllm==<version>), got {base!r}; teach "
            "scripts/lock_images.py how to emulate the new base"
        )
    return f"vllm=={match[1]}"


@dataclass(frozen=True)
class InstallStep:
    workdir: str
    copies: list[tuple[list[str], str]]
    command: str

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.command)


def install_step(image: Image) -> InstallStep:
    """The image's install step: the command that calls its install script (or, in a Dockerfile that has
    none, the `pip install` of the project's extras), with the COPY instructions before it."""
    workdir, copies, fallback = "/", [], None
    for keyword, rest in instructions(image.dockerfile):
        if keyword == "WORKDIR":
            workdir = rest
        elif keyword == "COPY":
            parts = [p for p in shlex.split(rest) if not p.startswith("--")]
            copies.append((parts[:-1], parts[-1]))
        elif keyword == "RUN":
            for command in (c.strip() for c in rest.split("&&")):
                argv = shlex.split(command)
                if argv and argv[0] == image.script:
                    return InstallStep(workdir, list(copies), command)
                if fallback is None and "pip install" in command and ".[" in command:
                    fallback = InstallStep(workdir, list(copies), command)
    if fallback is not None:
        return fallback
    raise LockError(
        f"{image.dockerfile.relative_to(ROOT)}: expected a RUN instruction that calls {image.script} (the image's "
        f"install step, which this check runs through pip's resolver), found none; install the image's Python "
        f"packages with {image.script}"
    )


def uses_lock(image: Image, step: InstallStep) -> bool:
    return step.argv[:1] == [image.script] and image.lock in step.argv


def stage(image: Image, step: InstallStep, into: Path) -> Path:
    """Copy what the Dockerfile copies before the install step into `into`; returns the WORKDIR there."""
    workdir = into / step.workdir.lstrip("/")
    workdir.mkdir(parents=True, exist_ok=True)
    for sources, dest in step.copies:
        target = into / dest.lstrip("/") if dest.startswith("/") else workdir / dest
        for source in sources:
            origin = ROOT / source
            if not origin.exists():
                raise LockError(
                    f"{image.dockerfile.relative_to(ROOT)}: COPY {source} names a file the repository does not "
                    f"have; expected it at {origin.relative_to(ROOT)}; add it or fix the COPY line"
                )
            path = target / origin.name if dest.endswith("/") or len(sources) > 1 else target
            path.parent.mkdir(parents=True, exist_ok=True)
            if origin.is_dir():
                shutil.copytree(origin, path, dirs_exist_ok=True)
            else:
                shutil.copy2(origin, path)
    return workdir


# --- pip ------------------------------------------------------------------------------------------


def find_python() -> str:
    """A Python 3.12 interpreter: on PATH, else under `pyenv root`/versions/3.12*."""
    candidates = [shutil.which(f"python{IMAGE_PYTHON}"), shutil.which("python3")]
    pyenv = shutil.which("pyenv")
    if pyenv:
        found = subprocess.run([pyenv, "root"], capture_output=True, text=True)
        if found.returncode == 0:
            versions = Path(found.stdout.strip()) / "versions"
            installed = [p for p in versions.glob(f"{IMAGE_PYTHON}*") if re.fullmatch(r"[\d.]+", p.name)]
            for path in sorted(installed, key=lambda p: Version(p.name), reverse=True):
                candidates.append(str(path / "bin" / "python3"))
    for candidate in filter(None, candidates):
        probe = subprocess.run(
            [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
        )
        if probe.returncode == 0 and probe.stdout.strip() == IMAGE_PYTHON:
            return candidate
    raise LockError(
        f"expected a Python {IMAGE_PYTHON} interpreter (the GPU images' Python, on which pip must resolve their "
        f"installs), found none on PATH (python{IMAGE_PYTHON}, python3) or under `pyenv root`/versions/"
        f"{IMAGE_PYTHON}*; install CPython {IMAGE_PYTHON} (e.g. `pyenv install {IMAGE_PYTHON}`) and rerun"
    )


def make_resolver(python: str, into: Path) -> Path:
    """A virtual environment of `python` with the pinned pip; returns its bin folder."""
    for command in (
        [python, "-m", "venv", str(into)],
        [str(into / "bin" / "python"), "-m", "pip", "install", "-q", PIP],
    ):
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise LockError(
                f"expected `{' '.join(command)}` to succeed, it exited {result.returncode}:\n{tail(result)}\n"
                f"fix the interpreter {python} (it needs venv and ensurepip) or pass another with --python"
            )
    return into / "bin"


def tail(result: subprocess.CompletedProcess, lines: int = 40) -> str:
    """pip's explanation of a failure: from "The conflict is caused by" on when there is one."""
    # Progress bars, per-package download lines and, with this machine's pip configuration, one
    # "Location ... is ignored" warning per package would bury the resolver's own explanation.
    text = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if line.strip()
        and not re.match(
            r"\s*(WARNING: Location '.*' is ignored|Collecting |Downloading |Processing |Using cached |━)",
            line,
        )
    ]
    for number, line in enumerate(text):
        if "The conflict is caused by" in line:
            text = text[number:]
            break
    return "\n".join("    " + line for line in text[-lines:])


def dry_run_env(bin_dir: Path, report: Path) -> dict:
    """The environment that turns an install command into a resolution: pip reads PIP_<OPTION>."""
    env = dict(os.environ)
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        VIRTUAL_ENV=str(bin_dir.parent),
        PIP_DRY_RUN="1",
        PIP_IGNORE_INSTALLED="1",
        PIP_REPORT=str(report),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PYTHONNOUSERSITE="1",
        # fast-deps: an index without PEP 658 metadata files (a mirror, a proxy) otherwise makes pip
        # download every wheel whole to read its metadata, several GB for a CUDA stack; with it pip reads
        # the metadata through HTTP range requests and downloads nothing whole.
        # inprocess-build-deps: building the project's own metadata needs setuptools in an isolated build
        # environment, which pip fills with a pip subprocess that would inherit PIP_DRY_RUN (installing
        # nothing) and PIP_REPORT (overwriting the report); pip's in-process installer takes neither.
        PIP_USE_FEATURE="fast-deps inprocess-build-deps",
    )
    return env


def read_report(report: Path) -> Resolution:
    installs = json.loads(report.read_text())["install"]
    return {
        canonicalize_name(item["metadata"]["name"]): (item["metadata"]["name"], item["metadata"]["version"])
        for item in installs
        if canonicalize_name(item["metadata"]["name"]) != PROJECT
    }


def run_pip(command: list[str], cwd: Path, env: dict, what: str, fix: str) -> None:
    try:
        result = subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=PIP_TIMEOUT_S
        )
    except subprocess.TimeoutExpired as exc:
        raise LockError(
            f"expected {what} to finish within {PIP_TIMEOUT_S} s, it did not; check the index"
        ) from exc
    if result.returncode != 0:
        raise LockError(f"expected {what} to resolve; pip exited {result.returncode}:\n{tail(result)}\n{fix}")


def resolve_engine(image: Image, bin_dir: Path, scratch: Path, lock: Path | None = None) -> Resolution:
    """What pip installs for the image's engine alone (for the simulator: the base image's packages).

    lock: constraints for the engine's own dependencies. The train image installs its engine under its
    lock, so that is the baseline its extras must not move; a fresh resolution would move with every new
    release on the index and call the lock stale for no change of ours.
    """
    requirement = engine_requirement(image)
    scratch.mkdir(parents=True, exist_ok=True)
    report = scratch / "engine-report.json"
    constraints = ["--constraint", str(lock)] if lock else []
    run_pip(
        [str(bin_dir / "python"), "-m", "pip", "install", requirement, *constraints],
        cwd=scratch,
        env=dry_run_env(bin_dir, report),
        what=f"the engine `{requirement}` alone (Python {IMAGE_PYTHON})",
        fix="the engine release itself no longer resolves: check the index, or move the image to a release that does",
    )
    return read_report(report)


def run_install_step(
    image: Image, bin_dir: Path, scratch: Path, *, base: Resolution | None = None, lock: str | None = None
) -> Resolution:
    """Run the Dockerfile's install step through pip's resolver; returns what it would install.

    base: the packages the base image ships (written where the Dockerfile writes its package list).
    lock: replaces the committed lock's text (None: the committed lock, exactly as the image uses it).
    """
    step = install_step(image)
    if lock is not None and not uses_lock(image, step):
        raise LockError(
            f"{image.dockerfile.relative_to(ROOT)}: expected the install step to be `{image.script} ...` using "
            f"{image.lock}, got `{step.command}`; install the image's packages with {image.script} {image.lock}"
        )
    workdir = stage(image, step, scratch / "context")
    if lock is not None:
        (workdir / image.lock).write_text(lock)
    if image.base_list_arg is not None and step.argv[0] == image.script:
        if base is None:
            raise LockError(f"{image.name}: the install step needs the base's package list; none was given")
        # The form of `pip list --format=freeze`, which the Dockerfile writes to this argument's path.
        listing = "".join(f"{name}=={version}\n" for name, version in sorted(base.values()))
        (workdir / step.argv[1 + image.base_list_arg]).write_text(listing)
    report = scratch / "install-report.json"
    run_pip(
        # Docker runs a RUN line with `/bin/sh -c`; so does this.
        ["sh", "-c", step.command],
        cwd=workdir,
        env=dry_run_env(bin_dir, report),
        what=f"{image.name}'s install step `{step.command}` (from {image.dockerfile.relative_to(ROOT)})",
        fix="a requirement in pyproject.toml's extras disagrees with the engine's pins: widen it to a range "
        "that holds the engine's version (or, for a stale lock, run " + image.regenerate_command() + ")",
    )
    return read_report(report)


# --- locks ----------------------------------------------------------------------------------------


def read_lock(path: Path) -> Resolution:
    """name==version lines (comments and blank lines aside)."""
    pins: Resolution = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            requirement = Requirement(text)
        except InvalidRequirement as exc:
            raise LockError(
                f"{path.relative_to(ROOT)}:{number}: expected name==version, got {text!r} ({exc})"
            ) from exc
        specs = list(requirement.specifier)
        if len(specs) != 1 or specs[0].operator != "==" or requirement.extras or requirement.marker:
            raise LockError(f"{path.relative_to(ROOT)}:{number}: expected name==version, got {text!r}")
        pins[canonicalize_name(requirement.name)] = (requirement.name, specs[0].version)
    return pins


def lock_text(image: Image, pins: Resolution) -> str:
    if image.base_list_arg is None:
        what = f"# Every package {image.script} installs"
    else:
        what = (
            f"# What {image.script} adds to the packages of {base_image(image)} (emulated by resolving "
            f"{engine_requirement(image)})"
        )
    header = (
        f"{what}, on Python {IMAGE_PYTHON} / linux x86_64.\n"
        f"# Written by scripts/lock_images.py from pip's resolver; regenerate: {image.regenerate_command()}\n"
    )
    if not pins:
        header += "# (none: the base ships every package the extras need)\n"
    return header + "".join(f"{name}=={version}\n" for _, (name, version) in sorted(pins.items()))


def additions(resolution: Resolution, base: Resolution | None) -> Resolution:
    """The part of an install step's resolution that the base does not ship (all of it without a base)."""
    return {k: v for k, v in resolution.items() if base is None or k not in base}


def fresh_lock(image: Image, bin_dir: Path, scratch: Path) -> str:
    base = resolve_engine(image, bin_dir, scratch / "engine") if image.base_list_arg is not None else None
    resolution = run_install_step(image, bin_dir, scratch / "install", base=base, lock="")
    return lock_text(image, additions(resolution, base))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Rewrite locks/image-<image>.txt from pip's resolver running the image's install step.",
        epilog="examples:\n  .venvs/dev/bin/python scripts/lock_images.py\n"
        "  .venvs/dev/bin/python scripts/lock_images.py train\n"
        "  .venvs/dev/bin/python scripts/lock_images.py --python /usr/bin/python3.12 simulator",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("images", nargs="*", help=f"images to lock, of {sorted(IMAGES)} (default: all)")
    parser.add_argument(
        "--python", help=f"a Python {IMAGE_PYTHON} interpreter (default: found on PATH or by pyenv)"
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.images) - set(IMAGES))
    if unknown:
        parser.error(f"unknown image(s) {unknown}; expected some of {sorted(IMAGES)}")
    try:
        python = args.python or find_python()
        with tempfile.TemporaryDirectory(prefix="lock-images-") as scratch:
            bin_dir = make_resolver(python, Path(scratch) / "venv")
            for name in args.images or sorted(IMAGES):
                image = IMAGES[name]
                print(f"lock_images: resolving {image.script} on {python} ...", flush=True)
                text = fresh_lock(image, bin_dir, Path(scratch) / name)
                (ROOT / image.lock).write_text(text)
                count = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
                print(f"lock_images: wrote {image.lock} ({count} packages)", flush=True)
    except LockError as exc:
        print(f"lock_images: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
