"""Every image is built with the commit it comes from: build argument TOOLCANARY_COMMIT, set by make from git.

The Dockerfiles turn the argument into a label and an environment variable (checkpoint manifests read it); this
file checks the Compose and Makefile side: each built service passes the argument, the Makefile computes it
(HEAD, "-dirty" when the working tree has changes, untracked files included) for every target that builds or
starts images, `make build` builds every profile, and a value typed by the user wins.

Run: .venvs/dev/bin/python -m pytest tests/stack/test_provenance.py -q
"""

import subprocess

import pytest
from compose_env import resolve, run_make, sandbox

# Targets that build images or start containers (up and run build missing images).
IMAGE_TARGETS = ("build", "up", "ray-worker", "eval", "eval-all", "watch")


def built(config: dict) -> dict[str, dict]:
    return {name: service["build"] for name, service in config["services"].items() if "build" in service}


def test_every_built_service_passes_the_commit_as_a_build_argument(example_env):
    config = resolve(example_env, env={"TOOLCANARY_COMMIT": "cafe1234-dirty"})
    builds = built(config)
    assert set(builds) == {"simulator", "trainer", "serve", "eval", "analysis"}
    for name, build in builds.items():
        assert build.get("args", {}).get("TOOLCANARY_COMMIT") == "cafe1234-dirty", name


def test_without_a_commit_the_argument_says_unknown_rather_than_nothing(resolved):
    for name, build in built(resolved).items():
        assert build["args"]["TOOLCANARY_COMMIT"] == "unknown", name


def test_the_commit_is_never_a_runtime_variable(example_env):
    # A container must report the commit its image was built from, not whatever the host checks out today.
    config = resolve(example_env, env={"TOOLCANARY_COMMIT": "cafe1234"})
    for name, service in config["services"].items():
        assert "TOOLCANARY_COMMIT" not in service.get("environment", {}), name


def git(root, *args: str) -> str:
    command = ["git", "-c", "user.name=ToolCanary test", "-c", "user.email=test@example.invalid", *args]
    return subprocess.run(command, cwd=root, capture_output=True, text=True, check=True, timeout=60).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    """A git repository holding the Makefile, compose.yaml, .env.example and scripts/, one commit, clean."""
    root = sandbox(tmp_path)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "wiring")
    return root


def commit_in(stdout: str) -> str:
    words = [w for w in stdout.split() if w.startswith("TOOLCANARY_COMMIT=")]
    assert words, f"no TOOLCANARY_COMMIT in {stdout!r}"
    return words[0].split("=", 1)[1]


def test_make_build_builds_every_profile_with_the_head_commit(repo):
    result = run_make(repo, "-n", "build")
    assert result.returncode == 0, result.stderr
    head = git(repo, "rev-parse", "HEAD")
    assert commit_in(result.stdout) == head
    assert "--profile train --profile eval --profile analysis build" in result.stdout


def test_a_changed_or_untracked_file_marks_the_commit_dirty(repo):
    head = git(repo, "rev-parse", "HEAD")
    (repo / "compose.yaml").write_text((repo / "compose.yaml").read_text() + "\n# local change\n")
    assert commit_in(run_make(repo, "-n", "build").stdout) == f"{head}-dirty"
    git(repo, "checkout", "--", "compose.yaml")
    assert commit_in(run_make(repo, "-n", "build").stdout) == head
    (repo / "scripts" / "new_helper.sh").write_text("#!/bin/sh\n")
    assert commit_in(run_make(repo, "-n", "build").stdout) == f"{head}-dirty"


@pytest.mark.parametrize("target", IMAGE_TARGETS)
def test_every_target_that_builds_or_starts_images_passes_the_commit(repo, target):
    result = run_make(repo, "-n", target, "RUN=r1", "STEP=200")
    assert result.returncode == 0, result.stderr
    assert commit_in(result.stdout) == git(repo, "rev-parse", "HEAD"), result.stdout


def test_a_commit_typed_by_the_user_wins(repo):
    assert commit_in(run_make(repo, "-n", "build", "TOOLCANARY_COMMIT=v1.2.3").stdout) == "v1.2.3"


def test_outside_git_the_makefile_leaves_the_commit_to_env_or_compose(tmp_path):
    root = sandbox(tmp_path)  # a copy without .git, like a source archive
    result = run_make(root, "-n", "build")
    assert result.returncode == 0, result.stderr
    assert "TOOLCANARY_COMMIT=" not in result.stdout

