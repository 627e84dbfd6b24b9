"""The TRUSTEE checkout's files are tied to their commit by hashing, before anything of it is imported.

A forged `.git` (a HEAD that names the commit, no objects), a forged object, a file changed after the commit:
each is refused with the file or object named, and a template that would leave a marker when imported never
runs. The object reader is checked against git's own answer on a packed repository with deltas.

Run: .venvs/dev/bin/python -m pytest tests/contract/test_git_files.py -q
"""

from __future__ import annotations

import subprocess
import zlib
from pathlib import Path

import pytest

from toolcanary.common.git_files import files_at_commit, head_commit
from toolcanary.common.trustee_checkout import LIBRARY, TEMPLATES, TOOL_PARSER, TrusteeCheckout
from toolcanary.contract import ContractError

NEEDED = [*TEMPLATES.values(), LIBRARY, TOOL_PARSER]


def _marking(path: Path, marker: Path) -> None:
    """Make a template leave `marker` behind if it is ever imported."""
    path.write_text(f"open({str(marker)!r}, 'w').close()\n" + path.read_text())


def test_a_stand_in_checkout_verifies_loose_and_packed(make_trustee_checkout, tmp_path, standin_commit):
    root = make_trustee_checkout(tmp_path / "TRUSTEE")
    assert files_at_commit(root, standin_commit, NEEDED) == []
    subprocess.run(["git", "-C", str(root), "gc", "-q", "--aggressive"], check=True)
    assert not list((root / ".git/objects").glob("??/*"))  # every object now in a pack
    assert files_at_commit(root, standin_commit, NEEDED) == []
    assert TrusteeCheckout.open(root, standin_commit).system_prompt(0).startswith("SYSTEM level=0")


def test_the_reader_agrees_with_git_on_a_packed_history_with_deltas(tmp_path):
    """Ten commits of one growing file, packed with deltas: for each commit, the files git calls unchanged
    against it pass and the ones it calls changed fail."""
    root = tmp_path / "repo"
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org"}

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True,
                              env=env).stdout.strip()

    root.mkdir()
    git("init", "-q", "-b", "main")
    (root / "sub").mkdir()
    commits = []
    for n in range(10):
        (root / "sub" / "grows.txt").write_text("".join(f"line {i} of a file that grows\n" for i in range(50 * n + 50)))
        (root / "steady.txt").write_text("the same in every commit\n")
        git("add", "-A")
        git("commit", "-q", "-m", f"commit {n}")
        commits.append(git("rev-parse", "HEAD"))
    git("gc", "-q", "--aggressive")
    assert "delta" in git("verify-pack", "-v", *[str(p) for p in (root / ".git/objects/pack").glob("*.idx")])
    for commit in commits:
        changed = set(git("diff", "--name-only", commit).splitlines())
        problems = files_at_commit(root, commit, ["sub/grows.txt", "steady.txt"])
        assert {p.split(" ")[0] for p in problems} == changed
    assert files_at_commit(root, commits[-1], ["sub/missing.txt"]) == [
        f"sub/missing.txt is not a file of commit {commits[-1]}"]


def test_a_forged_head_without_objects_is_refused_before_any_import(make_trustee_checkout, tmp_path,
                                                                    standin_commit):
    root = make_trustee_checkout(tmp_path / "TRUSTEE", commit=standin_commit)  # .git names it, holds nothing
    marker = tmp_path / "imported"
    _marking(root / TEMPLATES["system_prompt"], marker)
    with pytest.raises(ContractError, match=f"does not hold commit {standin_commit}"):
        TrusteeCheckout.open(root, standin_commit)
    assert not marker.exists()


def test_a_file_changed_after_the_commit_is_refused_by_name_before_any_import(make_trustee_checkout, tmp_path,
                                                                              standin_commit):
    root = make_trustee_checkout(tmp_path / "TRUSTEE")
    marker = tmp_path / "imported"
    _marking(root / TEMPLATES["tool_simulation"], marker)
    with pytest.raises(ContractError) as refused:
        TrusteeCheckout.open(root, standin_commit)
    assert f"{TEMPLATES['tool_simulation']} differs from commit {standin_commit}" in str(refused.value)
    assert "checkout" in refused.value.fix and not marker.exists()


def test_a_forged_object_under_the_commits_name_is_refused(make_trustee_checkout, tmp_path, standin_commit):
    root = make_trustee_checkout(tmp_path / "TRUSTEE")
    loose = root / ".git/objects" / standin_commit[:2] / standin_commit[2:]
    loose.chmod(0o644)
    fake_tree = "0" * 40
    loose.write_bytes(zlib.compress(b"commit 46\0" + f"tree {fake_tree}\nauthor x\n".encode()))
    with pytest.raises(ContractError, match=f"object {standin_commit} does not hash to its id"):
        TrusteeCheckout.open(root, standin_commit)


def test_head_commit_reads_what_git_rev_parse_answers_in_every_layout_of_refs(tmp_path):
    """A branch's loose ref, the same ref packed, a detached HEAD and a linked worktree (a `.git` file): the
    commit read from the files is git's own answer each time; a folder that is not a checkout has none."""
    root = tmp_path / "repo"
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org"}

    def git(*args: str, where: Path = root) -> str:
        return subprocess.run(["git", "-C", str(where), *args], check=True, capture_output=True, text=True,
                              env=env).stdout.strip()

    root.mkdir()
    git("init", "-q", "-b", "main")
    for text in ("one", "two"):
        (root / "f.txt").write_text(text)
        git("add", "f.txt")
        git("commit", "-q", "-m", text)
    assert head_commit(root) == git("rev-parse", "HEAD")  # refs/heads/main, loose
    git("pack-refs", "--all")
    assert not (root / ".git/refs/heads/main").exists()
    assert head_commit(root) == git("rev-parse", "HEAD")  # the same ref, in packed-refs
    git("worktree", "add", "-q", str(tmp_path / "linked"), "-b", "side", "HEAD~1")
    assert (tmp_path / "linked" / ".git").is_file()
    assert head_commit(tmp_path / "linked") == git("rev-parse", "HEAD", where=tmp_path / "linked")
    git("checkout", "-q", "--detach", "HEAD~1")
    assert head_commit(root) == git("rev-parse", "HEAD")
    assert head_commit(tmp_path / "not-a-checkout") is None
