"""The GPU runbook (docs/gpu.md) works as written, as far as a machine without GPUs can tell: every command of
its command list, in order, dry-run against a copy of the repository with the .env the list tells you to write.

- `make ...` lines run as `make -n` (what they would run, nothing run) and must not stop;
- `docker compose run ... <service> ...` lines: Compose resolves the project with that .env and the service
  exists in it (`config`);
- the variables the list tells you to set in .env are variables .env.example documents, and with them set the
  training profile resolves with the TRUSTEE checkout mounted and the token passed.

Run: .venvs/dev/bin/python -m pytest tests/stack/test_gpu_runbook.py -q
"""

import re
import shlex

from compose_env import ROOT, documented, run_compose, run_make, sandbox, with_ids

RUNBOOK = ROOT / "docs" / "gpu.md"
TOKEN = "a" * 64


def command_list() -> list[str]:
    """The first bash block of the runbook: one command per line, comments dropped."""
    block = re.search(r"```bash\n(.*?)```", RUNBOOK.read_text(), flags=re.S)
    assert block, "docs/gpu.md has no bash block"
    return [line.split("  #", 1)[0].strip() for line in block[1].splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def written_env(tmp_path):
    """The repository copy and its .env, as the runbook's steps leave them (make env, then the edits it names)."""
    root = sandbox(tmp_path)
    trustee = tmp_path / "TRUSTEE"
    trustee.mkdir()
    text = with_ids((ROOT / ".env.example").read_text())
    text = re.sub(r"^TRUSTEE_DIR=.*$", f"TRUSTEE_DIR={trustee}", text, flags=re.M)
    text = re.sub(r"^RUN=.*$", "RUN=gpu-run1", text, flags=re.M)
    text = re.sub(r"^# TOOLCANARY_SIMULATOR_TOKEN=.*$", f"TOOLCANARY_SIMULATOR_TOKEN={TOKEN}", text, flags=re.M)
    (root / ".env").write_text(text)
    return root, trustee


def test_the_command_list_goes_from_clone_to_report():
    commands = command_list()
    assert commands[0].startswith("git clone") and "TRUSTEE" in commands[1]
    assert [c.split()[1] for c in commands if c.startswith("make ")][:4] == ["env", "build", "up", "logs"]
    assert any(c.startswith("make report") for c in commands) and any("make_figures --table" in c for c in commands)


def test_the_edits_the_list_names_are_documented_variables():
    edit = next(line for line in RUNBOOK.read_text().split("```bash", 1)[1].splitlines() if "$EDITOR .env" in line)
    following = RUNBOOK.read_text().split(edit, 1)[1].splitlines()[1]  # the comment continued below
    named = set(re.findall(r"\b([A-Z][A-Z_]+)=", edit + following))
    assert named == {"TRUSTEE_DIR", "RUN", "TOOLCANARY_SIMULATOR_TOKEN"}
    assert named <= set(documented())


def test_every_command_of_the_list_dry_runs(tmp_path):
    root, trustee = written_env(tmp_path)
    for command in command_list():
        words = shlex.split(command)
        if words[0] == "make" and words[1] != "env":  # make env writes .env, which is already written here
            done = run_make(root, "-n", *words[1:])
            assert done.returncode == 0, f"{command}: {done.stderr}"
            if words[1] in ("eval-all", "report", "audit"):
                assert "gpu-run1" in done.stdout, f"{command} does not take .env's RUN: {done.stdout}"
        elif words[:3] == ["docker", "compose", "run"]:
            service = next(w for w in words[3:] if not w.startswith("-"))
            done = run_compose("--profile", service, "config", "--services", env_file=root / ".env", cwd=root)
            assert done.returncode == 0 and service in done.stdout.split(), f"{command}: {done.stderr}"
    resolved = run_compose("--profile", "train", "config", "--format", "json", env_file=root / ".env", cwd=root)
    assert resolved.returncode == 0, resolved.stderr
    assert str(trustee) in resolved.stdout and TOKEN in resolved.stdout
