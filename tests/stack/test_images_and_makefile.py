"""Dockerfiles pass hadolint with pinned bases, and every Makefile target expands.

Run: .venvs/dev/bin/python -m pytest tests/stack/test_images_and_makefile.py -q
"""

import re
import shutil
import subprocess
import sys
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


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_base_images_are_pinned(dockerfile):
    for base in re.findall(r"^FROM\s+(\S+)", dockerfile.read_text(), flags=re.M):
        assert ":" in base and not base.endswith(":latest"), base


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
