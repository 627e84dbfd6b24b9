"""Each service of the training profile mounts only the folders it writes, and `make up` creates them first.

The simulator writes its records to <runs>/<run>/simulator/ and reads nothing else under the runs root; the
trainer writes <runs>/<run>/data, trainer and verl (train.sh, the recipe's hydra and verl folders). Each has a
model cache of its own under MODEL_CACHE, so neither can change the weights the other loads. Docker creates a
missing bind-mount source as root, which the containers, running as the invoking user, cannot write:
`make up` runs `scripts/write_env.py --check --make-dirs`, which creates them as that user before Compose runs.

Run: .venvs/dev/bin/python -m pytest tests/stack/test_mounts.py -q
"""

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from compose_env import (
    CPU_FILES,
    GPU_FILES,
    PROFILES,
    ROOT,
    calls,
    clean_environ,
    documented,
    recorder,
    resolve,
    run_compose,
    run_make,
    sandbox,
)

RUN = documented()["RUN"]
RUNS = ROOT / "volumes" / "runs" / RUN
STACKS = pytest.mark.parametrize("files", [GPU_FILES, CPU_FILES], ids=["gpu", "cpu"])


def mounts(service: dict, writable: bool) -> set[tuple[str, str]]:
    """(source, target) of the service's writable (or read-only) mounts."""
    return {(m["source"], m["target"]) for m in service.get("volumes", []) if bool(m.get("read_only")) != writable}


def inside(path: str, folder: str) -> bool:
    return Path(folder) in (Path(path), *Path(path).parents)


@STACKS
def test_the_simulator_mounts_only_its_records_and_its_own_cache(example_env, files):
    simulator = resolve(example_env, files=files)["services"]["simulator"]
    assert mounts(simulator, writable=True) == {
        (str(RUNS / "simulator"), f"/volumes/runs/{RUN}/simulator"),
        (str(ROOT / "volumes" / "cache" / "simulator"), "/volumes/cache"),
    }
    assert {target for _, target in mounts(simulator, writable=False)} == {"/trustee"}
    assert simulator["environment"]["TOOLCANARY_RUNS_DIR"] == "/volumes/runs"
    assert simulator["environment"]["HF_HOME"] == "/volumes/cache/huggingface"


@STACKS
def test_no_writable_mount_is_shared_by_the_simulator_and_the_trainer(example_env, files):
    services = resolve(example_env, files=files)["services"]
    trainer = mounts(services["trainer"], writable=True)
    assert {target for _, target in trainer if target.startswith("/volumes/runs")} == {
        f"/volumes/runs/{RUN}/{name}" for name in ("data", "trainer", "verl")}
    assert (str(ROOT / "volumes" / "cache" / "train"), "/volumes/cache") in trainer
    for source, _ in mounts(services["simulator"], writable=True):
        for other, _ in trainer:
            # Neither folder is the other nor holds it on the host.
            assert not inside(source, other) and not inside(other, source), (source, other)


def test_each_cache_is_a_folder_of_model_cache(example_env, tmp_path):
    chosen = tmp_path / "chosen.env"
    chosen.write_text(example_env.read_text() + f"\nMODEL_CACHE={tmp_path / 'models'}\n")
    services = resolve(chosen)["services"]
    for name, folder in (("simulator", "simulator"), ("trainer", "train")):
        caches = [s for s, target in mounts(services[name], writable=True) if target == "/volumes/cache"]
        assert caches == [str(tmp_path / "models" / folder)], name


def writable_sources(root: Path, env_file: Path) -> set[str]:
    """The writable bind sources of the simulator and the trainer, as Compose resolves them in `root`."""
    profiles = [arg for p in PROFILES for arg in ("--profile", p)]
    ids = {"TOOLCANARY_UID": str(os.getuid()), "TOOLCANARY_GID": str(os.getgid())}
    result = run_compose(*profiles, "config", "--format", "json", env_file=env_file, env=ids, cwd=root)
    assert result.returncode == 0, result.stderr
    services = json.loads(result.stdout)["services"]
    return {source for name in ("simulator", "trainer") for source, _ in mounts(services[name], writable=True)}


def test_make_up_creates_every_mounted_folder_as_the_invoking_user_before_compose_runs(tmp_path):
    root = sandbox(tmp_path)
    models = tmp_path / "models"  # a cache outside the checkout, as .env.example allows
    (root / ".env").write_text(f"RUN=r1\nMODEL_CACHE={models}\n")
    compose, log = recorder(tmp_path)
    result = run_make(root, "up", f"COMPOSE={compose}")
    assert result.returncode == 0, result.stderr
    assert [c["command"] for c in calls(log)] == ["up"]
    sources = writable_sources(root, root / ".env")
    assert {s for s in sources if s.startswith(str(root / "volumes" / "runs"))} == {
        str(root / "volumes" / "runs" / "r1" / name) for name in ("simulator", "data", "trainer", "verl")}
    assert {s for s in sources if s.startswith(str(models))} == {str(models / "simulator"), str(models / "train")}
    for source in sources:
        path = Path(source)
        assert path.is_dir(), source
        assert (path.stat().st_uid, path.stat().st_gid) == (os.getuid(), os.getgid()), source
    # Nothing else: the runs root holds the run's four folders and no other.
    made = {str(p) for p in (root / "volumes" / "runs").rglob("*")}
    assert made == {str(root / "volumes" / "runs" / "r1"), *(s for s in sources if "/runs/" in s)}


def test_a_run_typed_on_the_command_line_wins_over_env(tmp_path):
    root = sandbox(tmp_path)
    (root / ".env").write_text("RUN=r1\n")
    compose, log = recorder(tmp_path)
    result = run_make(root, "up", f"COMPOSE={compose}", "RUN=r2")
    assert result.returncode == 0, result.stderr
    assert (root / "volumes" / "runs" / "r2" / "simulator").is_dir()
    assert not (root / "volumes" / "runs" / "r1").exists()


def test_a_run_id_that_is_a_path_stops_make_up_before_compose(tmp_path):
    root = sandbox(tmp_path)
    (root / ".env").write_text("RUN=../outside\n")
    compose, log = recorder(tmp_path)
    result = run_make(root, "up", f"COMPOSE={compose}")
    assert result.returncode != 0
    assert "RUN='../outside' is not a run id" in result.stderr, result.stderr
    assert calls(log) == [] and not (root / "volumes" / "outside").exists()


# Root may write any folder, so as root the check runs as an unprivileged user (nobody) on a sandbox it owns.
NOBODY = 65534


def test_a_mounted_folder_the_user_cannot_write_is_reported_with_its_fix(tmp_path):
    base, user = tmp_path, []
    if os.geteuid() == 0:
        base = Path(tempfile.mkdtemp(prefix="mounts-"))  # not under pytest's root-only folder
        base.chmod(0o755)
        user = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    try:
        root = sandbox(base)
        (root / ".env").write_text("RUN=r1\n")
        records = root / "volumes" / "runs" / "r1" / "simulator"
        records.mkdir(parents=True)
        if user:
            for folder, _, files in os.walk(root):
                for path in [folder, *(os.path.join(folder, f) for f in files)]:
                    os.chown(path, NOBODY, NOBODY)
        records.chmod(0o555)  # as a folder Docker created as root looks to its user
        compose, log = recorder(tmp_path)
        result = subprocess.run([*user, "make", "--no-print-directory", "up", f"COMPOSE={compose}"], cwd=root,
                                capture_output=True, text=True, env=clean_environ(), timeout=120)
        assert result.returncode != 0
        assert f"{records} is not writable by you" in result.stderr and "sudo chown -R" in result.stderr, result.stderr
        assert calls(log) == []
    finally:
        if base != tmp_path:
            shutil.rmtree(base, ignore_errors=True)


def test_make_env_writes_the_env_file_for_its_owner_only(tmp_path):
    out = tmp_path / ".env"
    done = subprocess.run(["python3", str(ROOT / "scripts" / "write_env.py"), "--out", str(out)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert out.stat().st_mode & 0o777 == 0o600  # it holds the simulator's token
