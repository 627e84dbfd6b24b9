"""Each GPU image's install step resolves on Python 3.12 without moving a version its engine pins, and its
committed lock is what that step resolves to.

The install step is the RUN line of images/<image>/Dockerfile that calls images/<image>/install.sh. It runs
here, with the files the Dockerfile copies before it, through pip's resolver alone (pip's --dry-run
--ignore-installed --report, given as PIP_* variables) in a throw-away virtual environment of a Python 3.12
interpreter with the pinned pip (scripts/lock_images.py does the work; it also rewrites the locks). The
simulator's base image, vllm/vllm-openai:vX, is emulated by the resolution of vllm==X alone, fed to the
script as the package list the Dockerfile writes with `pip list --format=freeze`.

Needs the package index and a Python 3.12 (PATH, or pyenv); the four resolutions, run side by side,
took about 50 s on the 2-core development machine; pip reads each wheel's metadata by range requests
(fast-deps), so nothing is downloaded whole.
Run: .venvs/dev/bin/python -m pytest tests/stack/test_gpu_image_resolution.py -q
"""

from __future__ import annotations

import importlib.util
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("lock_images", ROOT / "scripts" / "lock_images.py")
lock_images = importlib.util.module_from_spec(_spec)
sys.modules["lock_images"] = lock_images
_spec.loader.exec_module(lock_images)

IMAGES = sorted(lock_images.IMAGES)


def outcome(call):
    """(value, None) or (None, the failure's message): one image's failure must not hide the other's."""
    try:
        return call(), None
    except lock_images.LockError as exc:
        return None, str(exc)


@pytest.fixture(scope="module")
def resolutions(tmp_path_factory) -> dict:
    """Per image: the engine's resolution and the install step's, each as (value, error)."""
    scratch = tmp_path_factory.mktemp("gpu-images")
    try:
        python = lock_images.find_python()
        bin_dir = lock_images.make_resolver(python, scratch / "venv")
    except lock_images.LockError as exc:
        pytest.fail(str(exc), pytrace=False)
    images = {name: lock_images.IMAGES[name] for name in IMAGES}
    # pip spends most of a resolution waiting on the index, so the independent ones run side by side.
    with ThreadPoolExecutor(max_workers=3) as pool:
        # The train image's engine under its own lock (what the image installs it with); the simulator's base
        # as a fresh resolution of its vLLM release (what a freshly built base ships).
        engines = {
            name: pool.submit(
                outcome,
                lambda i=image: lock_images.resolve_engine(
                    i, bin_dir, scratch / i.name / "engine",
                    lock=ROOT / i.lock if i.base_list_arg is None and (ROOT / i.lock).is_file() else None),
            )
            for name, image in images.items()
        }
        installs = {
            name: pool.submit(
                outcome,
                lambda i=image: lock_images.run_install_step(i, bin_dir, scratch / i.name / "install"),
            )
            for name, image in images.items()
            if image.base_list_arg is None
        }
        for name, image in images.items():
            if image.base_list_arg is not None:
                base, error = engines[name].result()

                def with_base(i=image, base=base, error=error):
                    if error:
                        raise lock_images.LockError(
                            f"the emulated base did not resolve, so neither can the image:\n{error}"
                        )
                    return lock_images.run_install_step(i, bin_dir, scratch / i.name / "install", base=base)

                installs[name] = pool.submit(outcome, with_base)
        return {
            name: {"engine": engines[name].result(), "install": installs[name].result()} for name in images
        }


def checked(call, *args):
    try:
        return call(*args)
    except lock_images.LockError as exc:
        pytest.fail(str(exc), pytrace=False)


def resolved(resolutions: dict, name: str, which: str) -> dict:
    value, error = resolutions[name][which]
    if error:
        pytest.fail(error, pytrace=False)
    return value


def versions(pins: dict) -> dict:
    return {key: version for key, (_, version) in pins.items()}


@pytest.mark.slow
@pytest.mark.parametrize("name", IMAGES)
def test_the_install_step_resolves_without_a_conflict(resolutions, name):
    image = lock_images.IMAGES[name]
    resolved(resolutions, name, "engine")
    install = resolved(resolutions, name, "install")
    assert install, f"{image.script}: expected pip to report the packages it would install, got none"


@pytest.mark.slow
@pytest.mark.parametrize("name", IMAGES)
def test_no_package_of_the_engine_changes_version(resolutions, name):
    image = lock_images.IMAGES[name]
    engine = versions(resolved(resolutions, name, "engine"))
    install = versions(resolved(resolutions, name, "install"))
    moved = {
        key: f"{engine[key]} -> {install[key]}"
        for key in sorted(engine.keys() & install.keys())
        if engine[key] != install[key]
    }
    if moved:
        pytest.fail(
            f"{image.script} moves packages away from what `{lock_images.engine_requirement(image)}` resolves to "
            f"(expected every one of them to keep its version): {moved}. Widen the requirement in pyproject.toml "
            f"to a range that holds the engine's version; if the lock is just older than the engine's current "
            f"resolution, regenerate it: {image.regenerate_command()}",
            pytrace=False,
        )


@pytest.mark.slow
@pytest.mark.parametrize("name", IMAGES)
def test_the_committed_lock_is_what_the_install_step_resolves_to(resolutions, name):
    image = lock_images.IMAGES[name]
    step = checked(lock_images.install_step, image)
    if not lock_images.uses_lock(image, step):
        pytest.fail(
            f"{image.dockerfile.relative_to(ROOT)}: expected the install step to be `{image.script} ...` under the "
            f"committed lock {image.lock}, got `{step.command}`; install the image's packages with {image.script} "
            f"{image.lock} (and write the lock: {image.regenerate_command()})",
            pytrace=False,
        )
    if not (ROOT / image.lock).is_file():
        pytest.fail(
            f"expected the committed lock {image.lock}, found none; write it: {image.regenerate_command()}",
            pytrace=False,
        )
    base = resolved(resolutions, name, "engine") if image.base_list_arg is not None else None
    fresh = versions(lock_images.additions(resolved(resolutions, name, "install"), base))
    committed = versions(checked(lock_images.read_lock, ROOT / image.lock))
    missing = {k: v for k, v in sorted(fresh.items()) if k not in committed}
    extra = {k: v for k, v in sorted(committed.items()) if k not in fresh}
    differ = {
        k: f"lock {committed[k]}, resolved {fresh[k]}"
        for k in sorted(fresh.keys() & committed.keys())
        if fresh[k] != committed[k]
    }
    if missing or extra or differ:
        pytest.fail(
            f"{image.lock} is stale: expected it to list exactly the {len(fresh)} packages the install step "
            f"resolves to; resolved but not locked: {missing or 'none'}; locked but not resolved: {extra or 'none'}; "
            f"different versions: {differ or 'none'}. Regenerate it: {image.regenerate_command()}",
            pytrace=False,
        )


def test_the_train_install_script_installs_the_engine_the_check_resolves():
    image = lock_images.IMAGES["train"]
    if not (ROOT / image.script).is_file():
        pytest.fail(f"expected the train image's install script {image.script}, found none", pytrace=False)
    script = (ROOT / image.script).read_text()
    assert f'"{image.engine}"' in script, (
        f"{image.script}: expected it to install {image.engine} (scripts/lock_images.py resolves that engine "
        f"to check the image against), found no such requirement; keep the two in step"
    )


def test_the_simulator_base_is_emulated_by_its_vllm_release():
    image = lock_images.IMAGES["simulator"]
    base = checked(lock_images.base_image, image)
    assert checked(lock_images.engine_requirement, image) == "vllm==" + base.rsplit(":v", 1)[1]


def test_a_lock_line_that_is_not_an_exact_pin_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(lock_images, "ROOT", tmp_path)
    lock = tmp_path / "lock.txt"
    lock.write_text("# header\nfastapi==0.136.3\npydantic>=2.14\n")
    with pytest.raises(
        lock_images.LockError, match=r"lock.txt:3: expected name==version, got 'pydantic>=2.14'"
    ):
        lock_images.read_lock(lock)


def test_the_train_image_resolves_with_the_pip_its_lock_was_made_with():
    # Resolvers differ between pip releases: the image must not resolve its lock with another one.
    dockerfile = lock_images.IMAGES["train"].dockerfile
    if f"pip install {lock_images.PIP}" not in dockerfile.read_text():
        pytest.fail(
            f"{dockerfile.relative_to(ROOT)}: expected the virtual environment to get {lock_images.PIP} (the pip "
            "scripts/setup_venvs.py pins and scripts/lock_images.py resolves with) before the install step, "
            "found no such step; pin the same pip in both",
            pytrace=False,
        )
