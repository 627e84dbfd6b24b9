"""A copy of the project that the container tests run the stack in, and the CPU images they build there.

`Project` runs make, docker and docker compose in the copy with the engine's environment, times each command
(also into build/containers/last-run.log, readable while pytest holds stdout) and, on a failure, raises with
the command's output and the services' last log lines. `configure` writes the copy's .env the way `make env`
does and then sets the lines a test needs; `image_lines` are the ones the images' build arguments come from,
so that every copy with the same base image and wheelhouse builds the same layers (prepare.py relies on it).

    project = Project(checkout_copy(tmp), engine, user, "toolcanary-ctest")
    configure(project, {**image_lines(base, wheels), "RUN": "ctest"}); build_images(project, BUILT)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from engine import ROOT, WORK, EngineError

# The images the CPU stack builds; serve shares the simulator's image.
BUILT = ("simulator", "trainer", "eval", "analysis")


class Project:
    """The project copy, and make / docker / docker compose run there with the engine's environment."""

    def __init__(self, root: Path, engine, user: tuple[int, int], name: str) -> None:
        self.root, self.engine, self.user, self.name = root, engine, user, name
        self.timings: dict[str, float] = {}
        self.outputs: dict[str, subprocess.CompletedProcess] = {}

    def run(self, label: str, command: list[str], timeout: float, check: bool = True,
            env: dict | None = None) -> subprocess.CompletedProcess:
        started = time.monotonic()
        done = subprocess.run(command, cwd=self.root, env={**self.engine.env, **(env or {})}, capture_output=True,
                              text=True, timeout=timeout)
        self.timings[label] = round(time.monotonic() - started, 1)
        self.outputs[label] = done
        with (WORK / "last-run.log").open("a") as log:
            log.write(f"{time.strftime('%H:%M:%S')} {label}: exit {done.returncode} after {self.timings[label]} s\n")
        if check and done.returncode != 0:
            logs = subprocess.run(["docker", "compose", "--profile", "train", "--profile", "eval", "logs", "--tail",
                                   "40"], cwd=self.root, env=self.engine.env, capture_output=True, text=True,
                                  timeout=120)
            raise EngineError(f"`{' '.join(command)}` exited {done.returncode} after {self.timings[label]} s:\n"
                              f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}\nthe services' last lines:\n"
                              f"{logs.stdout[-6000:]}")
        return done

    def make(self, label: str, *args: str, timeout: float = 1800, check: bool = True):
        uid, gid = self.user
        return self.run(label, ["make", "--no-print-directory", *args, f"TOOLCANARY_UID={uid}",
                                f"TOOLCANARY_GID={gid}"], timeout, check)

    def compose(self, label: str, *args: str, timeout: float = 1800, check: bool = True):
        # The files make hands Compose for this .env (NNODES above 1 adds compose.multinode.yaml).
        files = subprocess.run(["python3", "scripts/write_env.py", "--compose-file"], cwd=self.root, check=True,
                               capture_output=True, text=True, timeout=60).stdout.strip()
        uid, gid = self.user
        return self.run(label, ["docker", "compose", *args], timeout, check,
                        env={"TOOLCANARY_UID": str(uid), "TOOLCANARY_GID": str(gid),
                             **dict([files.split("=", 1)] if files else [])})

    def container(self, service: str) -> dict:
        ids = self.engine.docker("ps", "-aq", "--filter", f"label=com.docker.compose.project={self.name}",
                                 "--filter", f"label=com.docker.compose.service={service}").stdout.split()
        assert ids, f"no {service} container"
        return json.loads(self.engine.docker("inspect", ids[0]).stdout)[0]

    def logs(self, container: str) -> str:
        done = self.engine.docker("logs", container, check=False, timeout=60)
        return done.stdout + done.stderr


def checkout_copy(target: Path) -> Path:
    """The files of the repository as git sees them (tracked, and untracked but not ignored), copied."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name, follow_symlinks=False)
    return target


def image_lines(base_image: str, wheels_url: str | None) -> dict:
    """The .env lines the images' build arguments come from."""
    # The copy is a tree without git: the images get the commit of the tree it was copied from, as .env allows.
    commit = subprocess.run(["scripts/git_commit.sh"], cwd=ROOT, capture_output=True, text=True, check=True)
    lines = {"COMPOSE_FILE": "compose.yaml:compose.cpu.yaml", "PYTHON_BASE_IMAGE": base_image,
             "TOOLCANARY_COMMIT": commit.stdout.strip()}
    if wheels_url:  # torch's CPU build from the local wheelhouse, and no index this machine cannot reach
        lines |= {"TOOLCANARY_FIND_LINKS": wheels_url, "CPU_TORCH_INDEX": ""}
    return lines


def configure(project: Project, lines: dict) -> None:
    """.env as `make env` writes it with `lines` set, and the volumes' folders made and owned by the stack's
    user (as root, `make up` would otherwise create them as root)."""
    uid, gid = project.user
    root = project.root
    subprocess.run(["python3", "scripts/write_env.py", "--uid", str(uid), "--gid", str(gid)], cwd=root, check=True,
                   capture_output=True)
    env_file = root / ".env"
    text = env_file.read_text()
    for name, value in {"COMPOSE_PROJECT_NAME": project.name, **lines}.items():
        text, count = re.subn(rf"^#?\s*{name}=.*$", f"{name}={value}", text, count=1, flags=re.M)
        if not count:
            text += f"{name}={value}\n"
    env_file.write_text(text)
    subprocess.run(["python3", "scripts/write_env.py", "--check", "--make-dirs"], cwd=root, check=True,
                   capture_output=True, env={k: v for k, v in os.environ.items() if k not in ("RUN", "MODEL_CACHE")})
    for path in [root / "volumes", *(root / "volumes").rglob("*")]:
        os.chown(path, uid, gid)


def build_images(project: Project, services=BUILT) -> None:
    for service in services:
        project.compose(f"build {service}", "build", service, timeout=1800)


def wait_for(what: str, condition, timeout: float, every: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise EngineError(f"{what}: not within {timeout:.0f} s")
