"""Checkpoint publishing: complete folders only, atomic under a kill, announced once, loadable.

Run: .venvs/train/bin/python -m pytest tests/train/test_publisher.py -q
"""

from __future__ import annotations

import hashlib
import json
import random
import signal
import subprocess
import sys
import time

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from toolcanary.contract.errors import ContractError
from toolcanary.contract.manifests import read_checkpoint_manifest
from toolcanary.train.cpu.tiny_policy import load_policy
from toolcanary.train.cpu.trainer_state import latest_state, load_state, save_state
from toolcanary.train.curriculum import Curriculum
from toolcanary.train.publisher import publish_checkpoint, read_published, remove_partial, verify_checkpoint


@pytest.fixture(scope="module")
def policy(tiny_dir):
    return load_policy(tiny_dir)


def test_publish_writes_a_complete_loadable_checkpoint_and_announces_it(policy, tmp_path):
    model, tokenizer = policy
    folder = publish_checkpoint(model, tokenizer, tmp_path, run="r", step=10, base_model="tiny", curriculum_level=31, enable_thinking=False)
    assert folder.name == "step_0010"
    manifest = read_checkpoint_manifest(folder)
    assert (manifest.run, manifest.step, manifest.curriculum_level, manifest.base_model) == ("r", 10, 31, "tiny")
    digest = hashlib.sha256(b"".join((folder / n).read_bytes() for n in sorted(manifest.weight_files))).hexdigest()
    assert manifest.weights_sha256 == digest
    assert {"chat_template.jinja", "tokenizer.json", "config.json", "model.safetensors"} <= {
        p.name for p in folder.iterdir()}
    assert [e.model_dump() for e in read_published(tmp_path)] == [{"step": 10, "path": "step_0010", "weights_sha256": digest}]
    assert AutoModelForCausalLM.from_pretrained(folder).config.model_type == "qwen3"
    assert AutoTokenizer.from_pretrained(folder).chat_template == tokenizer.chat_template
    assert oct((folder / "model.safetensors").stat().st_mode)[-3:] == "644"
    # Publishing the same step again keeps the first and does not announce twice.
    publish_checkpoint(model, tokenizer, tmp_path, run="r", step=10, base_model="tiny", curriculum_level=31, enable_thinking=False)
    assert len(read_published(tmp_path)) == 1


def test_a_publish_that_fails_midway_leaves_nothing_visible(policy, tmp_path, monkeypatch):
    model, tokenizer = policy

    def broken(*_args, **_kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(tokenizer, "save_pretrained", broken)
    with pytest.raises(OSError):
        publish_checkpoint(model, tokenizer, tmp_path, run="r", step=3, base_model="tiny", curriculum_level=1, enable_thinking=False)
    assert not (tmp_path / "step_0003").exists() and read_published(tmp_path) == []
    assert remove_partial(tmp_path) and not list(tmp_path.glob(".step_*"))


def test_a_publish_killed_midway_leaves_only_complete_checkpoints(tiny_dir, tmp_path):
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from toolcanary.train.publisher import publish_checkpoint\n"
        "from toolcanary.train.cpu.tiny_policy import load_policy\n"
        f"model, tok = load_policy({str(tiny_dir)!r})\n"
        "for step in range(1, 1000):\n"
        "    print('begin', step, flush=True)\n"
        f"    publish_checkpoint(model, tok, Path({str(tmp_path)!r}), run='k', step=step, base_model='t',"
        " curriculum_level=1, enable_thinking=False)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        begun = 0
        while begun < 3:
            line = child.stdout.readline()
            assert line, "the publishing child died before publishing"
            begun += line.startswith("begin")
        time.sleep(random.Random(0).uniform(0.0, 0.15))
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait(30)
    visible = sorted(p for p in tmp_path.iterdir() if p.name.startswith("step_"))
    assert len(visible) >= 2
    for folder in visible:
        verify_checkpoint(folder)
    for entry in read_published(tmp_path):
        verify_checkpoint(tmp_path / entry.path)
    remove_partial(tmp_path)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_readers_refuse_a_folder_without_a_manifest_or_with_changed_weights(policy, tmp_path):
    model, tokenizer = policy
    (tmp_path / "step_0001").mkdir()
    with pytest.raises(ContractError, match="no manifest"):
        read_checkpoint_manifest(tmp_path / "step_0001")
    with pytest.raises(ContractError):
        publish_checkpoint(model, tokenizer, tmp_path, run="r", step=1, base_model="t", curriculum_level=1, enable_thinking=False)
    folder = publish_checkpoint(model, tokenizer, tmp_path, run="r", step=2, base_model="t", curriculum_level=1, enable_thinking=False)
    with (folder / "model.safetensors").open("ab") as handle:
        handle.write(b"\0")
    with pytest.raises(ContractError, match="modified after publishing"):
        verify_checkpoint(folder)


def test_a_torn_last_ledger_line_is_skipped(tmp_path):
    (tmp_path / "published.jsonl").write_text(json.dumps({"step": 1, "path": "step_0001", "weights_sha256": "a"})
                                              + '\n{"step": 2, "pa')
    assert [e.step for e in read_published(tmp_path)] == [1]


def test_resume_restores_the_curriculum_level_weights_and_optimizer(policy, tmp_path):
    import torch

    model, _ = policy
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(input_ids=torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, 3]])).loss.backward()
    optimizer.step()
    curriculum, rng = Curriculum(level=1), random.Random(5)
    for _ in range(7):
        curriculum.update(0.8)
    save_state(tmp_path, step=7, policy=model, optimizer=optimizer, curriculum=curriculum, rng=rng)
    expected_next = rng.random()
    fresh_model, _ = load_policy(policy[1].name_or_path)
    fresh_opt = torch.optim.AdamW(fresh_model.parameters(), lr=1e-3)
    fresh_curriculum, fresh_rng = Curriculum(), random.Random(0)
    state = load_state(latest_state(tmp_path), policy=fresh_model, optimizer=fresh_opt, curriculum=fresh_curriculum,
                       rng=fresh_rng)
    assert state["step"] == 7 and fresh_curriculum.level == 22 and fresh_curriculum.step == 7
    assert fresh_rng.random() == expected_next
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), fresh_model.state_dict().values(),
                                                  strict=True))
    assert fresh_opt.state_dict()["state"].keys() == optimizer.state_dict()["state"].keys()


class _RunsCode:
    """Unpickling this runs a command: what a crafted state file would do under weights_only=False."""

    def __init__(self, marker) -> None:
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


def test_a_crafted_state_file_that_would_run_code_is_refused(policy, tmp_path):
    import torch

    marker = tmp_path / "ran"
    crafted = tmp_path / "state" / "state_0009.pt"
    crafted.parent.mkdir()
    torch.save({"step": 9, "policy": _RunsCode(marker)}, crafted)
    model, _ = policy
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with pytest.raises(ContractError, match="tensors and plain values only"):
        load_state(latest_state(crafted.parent), policy=model, optimizer=optimizer, curriculum=Curriculum(),
                   rng=random.Random(0))
    assert not marker.exists()


@pytest.mark.parametrize("step", [-1, 0, 6, "7", 10**9])
def test_a_state_with_an_impossible_step_is_refused_before_anything_is_restored(policy, tmp_path, step):
    import torch

    model, _ = policy
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    save_state(tmp_path, step=7, policy=model, optimizer=optimizer, curriculum=Curriculum(level=3),
               rng=random.Random(0))
    state = torch.load(tmp_path / "state_0007.pt", weights_only=True)
    torch.save({**state, "step": step}, tmp_path / "state_0007.pt")
    fresh = Curriculum(level=1)
    with pytest.raises(ContractError, match="an integer from 1 to 100000"):
        load_state(latest_state(tmp_path), policy=model, optimizer=optimizer, curriculum=fresh, rng=random.Random(0))
    assert fresh.level == 1  # nothing restored


def test_a_state_name_that_is_no_regular_file_is_refused_instead_of_hanging(tmp_path):
    import os

    os.mkfifo(tmp_path / "state_0006.pt")
    with pytest.raises(ContractError, match="a regular file"):
        latest_state(tmp_path)


@pytest.mark.parametrize("source_shards", [1, 3], ids=["one-file", "sharded-with-index"])
def test_weights_are_cast_into_bounded_shards_with_an_index_and_load_unchanged(tiny_dir, tmp_path, source_shards):
    """A publish holds about one output shard in memory: verl's fp32 file (one file, or shards with their
    index) comes out as bf16 shards of at most the bound (a larger tensor alone), which transformers loads."""
    import torch
    from safetensors.torch import load_file, save_file

    from toolcanary.train.publisher import cast_weights

    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
    state = {k: v.clone() for k, v in model.state_dict().items()}  # tied embeddings: two tensors on disk
    source, target = tmp_path / "source", tmp_path / "target"
    source.mkdir()
    target.mkdir()
    names = sorted(state)
    for number in range(source_shards):
        part = {n: state[n] for n in names[number::source_shards]}
        save_file(part, source / f"model-{number + 1:05d}-of-{source_shards:05d}.safetensors")
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (target / name).write_bytes((tiny_dir / name).read_bytes())
    sizes = sorted(t.numel() * 2 for t in state.values())
    bound = sizes[-1] // 2  # several shards, and the embeddings each over the bound
    cast_weights(source, target, torch.bfloat16, shard_bytes=bound)

    shards = sorted(target.glob("*.safetensors"))
    index = json.loads((target / "model.safetensors.index.json").read_text())
    assert len(shards) > 2 and set(index["weight_map"].values()) == {p.name for p in shards}
    assert index["metadata"]["total_size"] == sum(sizes)
    for shard in shards:
        tensors = load_file(shard)
        held = sum(t.numel() * t.element_size() for t in tensors.values())
        assert held <= bound or len(tensors) == 1, (shard.name, held, bound)
        assert {t.dtype for t in tensors.values() if t.is_floating_point()} == {torch.bfloat16}
        assert all(index["weight_map"][n] == shard.name for n in tensors)
    reloaded = AutoModelForCausalLM.from_pretrained(target, dtype=torch.bfloat16)
    for name, tensor in reloaded.state_dict().items():
        assert torch.equal(tensor, state[name].bfloat16()), name
    assert json.loads((target / "config.json").read_text())["dtype"] == "bfloat16"
