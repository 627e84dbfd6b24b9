"""The GPU recipe, checked as far as a CPU reaches: composed and validated by verl's own main_ppo up to
the start of Ray, run as an unprivileged user in a read-only working directory, and the choices it
depends on (sdpa with packed sequences, aborted episodes out of GPU-shaped group statistics, a
validation row through the agent loop) exercised for real.

Run: .venvs/train/bin/python -m pytest tests/train/test_recipe.py -q
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from conftest import RECIPE, GoldClient, fetch_task, recipe_args, run_episodes
from verl import DataProto
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories
from verl.utils.config import omega_conf_to_dataclass

from toolcanary.contract.errors import ContractError
from toolcanary.simulator.scripted import gold_trajectory
from toolcanary.train.episode import EpisodeSpec
from toolcanary.train.gpu.recipe_check import (
    ATTENTION_PACKAGES,
    _check_model,
    attention_implementation,
    check_recipe,
)
from toolcanary.train.gpu.seed_data import write_seed_data
from toolcanary.train.gpu.verl_hooks import validation_rows

VENV_BIN = Path(sys.executable).parent


def test_verl_composes_and_validates_the_recipe_and_every_check_passes(report):
    config = report.config
    assert config.actor_rollout_ref.rollout.agent.agent_loop_manager_class.endswith("CurriculumAgentLoopManager")
    assert config.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu == 1
    assert config.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu == 1
    assert config.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"
    assert config.data.apply_chat_template_kwargs.enable_thinking is True
    assert config.algorithm.adv_estimator == "toolcanary_grpo"
    assert (config.data.train_batch_size, config.actor_rollout_ref.rollout.n, config.trainer.total_training_steps,
            config.trainer.save_freq) == (16, 8, 200, 10)
    assert any(line.startswith("Ray workers get") for line in report.checks), report.checks


def run_in_read_only_workdir(command: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    """Run `command` in a working directory it cannot write, as the image's working directory is for
    the container's user: a non-root test runner gets a mode-555 folder; root, which ignores modes, gets
    the folder bind-mounted read-only in a mount namespace of its own."""
    if os.geteuid() == 0:
        command = ["unshare", "--mount", "sh", "-c", 'mount --bind -o ro "$0" "$0" && cd "$0" && exec "$@"',
                   str(cwd), *command]
    else:
        cwd.chmod(0o555)
    env = {**env, "PATH": f"{VENV_BIN}:{env['PATH']}"}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _train_sh_env(tmp_path, **extra) -> dict:
    volumes = tmp_path / "volumes"
    clean = {k: v for k, v in os.environ.items() if k not in ("TOOLCANARY_TRAIN_MODE", "TOOLCANARY_TRAIN_TRUSTEE_DIR")}
    return {**clean, "TOOLCANARY_RUNS_DIR": str(volumes / "runs"), "TOOLCANARY_RESULTS_DIR": str(volumes / "results"),
            "TOOLCANARY_CHECKPOINTS_DIR": str(volumes / "checkpoints"), "TOOLCANARY_TRAIN_RUN": "r2",
            "PYTHONDONTWRITEBYTECODE": "1", **extra}


def test_train_sh_checks_the_recipe_in_a_read_only_working_directory(tmp_path, trustee_checkout, tiny_dir):
    volumes = tmp_path / "volumes"
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    env = _train_sh_env(tmp_path, TRUSTEE_DIR=str(trustee_checkout), TOOLCANARY_POLICY_MODEL=str(tiny_dir))
    done = run_in_read_only_workdir(["bash", str(RECIPE / "train.sh"), "--check"], workdir, env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert_step_zero_is_the_base_model(volumes / "checkpoints" / "r2", tiny_dir)
    assert "ok  attention 'sdpa' is installed" in done.stdout
    assert f"ok  agent loop mode trustee: the TRUSTEE checkout at {trustee_checkout.resolve()}" in done.stdout
    assert list(workdir.iterdir()) == []  # no outputs/, tensorboard_log/ or anything else in the working dir
    assert (volumes / "runs" / "r2" / "data" / "val.parquet").is_file()  # seed rows, written by that user
    assert list((volumes / "runs" / "r2" / "trainer" / "hydra").iterdir())  # Hydra's run folder
    assert (volumes / "results" / "r2" / "tensorboard").is_dir()
    assert f"TENSORBOARD_DIR': '{volumes / 'results' / 'r2' / 'tensorboard'}'" in done.stdout  # handed to Ray


def assert_step_zero_is_the_base_model(run_dir: Path, base: Path) -> None:
    """step_0000 holds the base model's weights in bf16, a manifest serve accepts, and one announcement."""
    from safetensors.torch import load_file

    from toolcanary.contract.manifests import read_published, verify_checkpoint

    published = read_published(run_dir)
    assert [(p.step, p.path) for p in published] == [(0, "step_0000")]
    manifest = verify_checkpoint(run_dir / "step_0000", published[0].weights_sha256)  # serve's own check
    assert (manifest.step, manifest.dtype, manifest.base_model) == (0, "bfloat16", str(base))
    assert manifest.enable_thinking is True and manifest.curriculum_level == 1  # the recipe's mode, the first level
    mine = load_file(run_dir / "step_0000" / "model.safetensors")
    theirs = load_file(base / "model.safetensors")
    assert mine.keys() == theirs.keys()
    for name, tensor in theirs.items():
        assert mine[name].dtype == torch.bfloat16 and torch.equal(mine[name], tensor.to(torch.bfloat16)), name


def test_step_zero_is_published_once_and_announced_again_after_a_restart(volumes, tiny_dir, tmp_path, monkeypatch):
    from toolcanary.train.gpu.base_checkpoint import publish_base

    monkeypatch.setenv("TOOLCANARY_CHECKPOINTS_DIR", str(tmp_path))
    args = recipe_args(f"actor_rollout_ref.model.path={tiny_dir}")
    folder = publish_base(args)
    assert_step_zero_is_the_base_model(tmp_path / "r1", tiny_dir)
    written = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    # A trainer killed between the rename and the announcement: the restart announces, and rewrites nothing.
    (tmp_path / "r1" / "published.jsonl").unlink()
    assert publish_base(args) == folder
    assert_step_zero_is_the_base_model(tmp_path / "r1", tiny_dir)
    assert publish_base(args) == folder  # and a third start adds no second line
    assert_step_zero_is_the_base_model(tmp_path / "r1", tiny_dir)
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == written


@pytest.mark.parametrize(("override", "message"), [
    ("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=null", "log_prob_micro_batch_size"),
    ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=null", "log_prob_micro_batch_size"),
    ("actor_rollout_ref.model.override_config.attn_implementation=flash_attention_2", "flash_attn"),
    ("data.apply_chat_template_kwargs.enable_thinking=null", "enable_thinking"),
    ("actor_rollout_ref.rollout.agent.agent_loop_manager_class=toolcanary.train.nowhere.Manager",
     "agent_loop_manager_class"),
    ("algorithm.adv_estimator=no_such_estimator", "adv_estimator"),
    ("++ray_kwargs.ray_init.runtime_env.env_vars.TOOLCANARY_TRAIN_RUN='${oc.env:TOOLCANARY_TRAIN_RUN}'",
     "env_vars"),
], ids=["ref-micro-batch", "rollout-micro-batch", "flash-attn", "thinking", "manager", "estimator", "ray-env"])
def test_each_failure_a_gpu_run_would_meet_late_is_refused_before_ray(volumes, override, message, capsys):
    with pytest.raises(ContractError) as refused:
        check_recipe(recipe_args(override))
    assert message in str(refused.value) + capsys.readouterr().err


def test_the_train_image_installs_the_attention_implementation_the_recipe_asks_for(report):
    """locks/image-train.txt is every package the GPU train image installs (checked against pip's resolver in
    tests/stack/test_gpu_image_resolution.py)."""
    lock = RECIPE.parents[1] / "locks" / "image-train.txt"
    pinned = {line.split("==")[0].lower().replace("_", "-"): line.split("==")[1]
              for line in lock.read_text().splitlines() if "==" in line and not line.startswith("#")}
    implementation = attention_implementation(report.config)
    needed = (ATTENTION_PACKAGES[implementation] or (None, None))[1]
    assert needed is None or needed in pinned, f"{implementation} needs {needed}, which the train image lacks"
    assert int(pinned["torch"].split(".")[0]) >= 2  # sdpa is torch's own since 2.0


def test_verls_default_flash_attention_fails_to_build_the_model_here(report, tiny_dir):
    """What the workers would meet on an image without flash-attn, reproduced on the model itself."""
    config = report.config.copy()
    config.actor_rollout_ref.model.path = str(tiny_dir)
    config.actor_rollout_ref.model.override_config.attn_implementation = "flash_attention_2"
    with pytest.raises(ContractError, match="FlashAttention2"):
        _check_model(config, report)
    config.actor_rollout_ref.model.override_config.attn_implementation = "sdpa"
    _check_model(config, report)


def test_sdpa_attends_within_each_packed_sequence_as_verls_padding_free_forward_needs(tiny_dir):
    """verl's use_remove_padding calls the model on all sequences packed into one row, with
    position_ids restarting per sequence and no attention mask; with sdpa that must equal each
    sequence alone."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_dir, attn_implementation="sdpa", dtype=torch.float32).eval()
    first, second = torch.randint(0, 500, (1, 13)), torch.randint(0, 500, (1, 9))
    with torch.no_grad():
        alone = [model(input_ids=ids, use_cache=False).logits[0] for ids in (first, second)]
        packed = model(input_ids=torch.cat([first, second], dim=1), attention_mask=None, use_cache=False,
                       position_ids=torch.cat([torch.arange(13), torch.arange(9)])[None]).logits[0]
    torch.testing.assert_close(packed[:13], alone[0], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(packed[13:], alone[1], atol=1e-4, rtol=1e-4)


def test_aborted_rows_leave_a_gpu_shaped_batchs_group_statistics_unchanged(report):
    """The V1 trainer's own advantage path, with the recipe's estimator and algorithm section."""
    algorithm = omega_conf_to_dataclass(report.config.algorithm)
    uids = ["a"] * 4 + ["b"] * 4
    rewards = [1.0, -1.0, 0.0, 0.0, 1.0, 1.0, -1.0, 0.0]
    aborted = [False, False, True, True, False, False, False, True]

    def advantages(rows: list[int]) -> torch.Tensor:
        width = 5
        mask = torch.zeros(len(rows), width)
        scores = torch.zeros(len(rows), width)
        for out, row in enumerate(rows):
            if not aborted[row]:
                mask[out, :3] = 1
                scores[out, 2] = rewards[row]
        data = DataProto.from_dict(tensors={"token_level_rewards": scores, "response_mask": mask},
                                   non_tensors={"uid": np.array([uids[r] for r in rows], dtype=object)})
        keys = [f"{uids[r]}_{r}_0" for r in rows]
        out = compute_advantage_for_multi_trajectories(data, keys, adv_estimator=report.config.algorithm.adv_estimator,
                                                       config=algorithm)
        return out.batch["advantages"]

    everything = advantages(list(range(8)))
    kept = [r for r in range(8) if not aborted[r]]
    torch.testing.assert_close(everything[kept], advantages(kept))
    assert torch.all(everything[[r for r in range(8) if aborted[r]]] == 0)
    assert everything[0, 0] > 0 > everything[1, 0]  # the group's mean is over its two finished rows


def test_a_validation_row_plays_its_held_out_task_through_the_agent_loop(tmp_path, tokenizer, scripted_url):
    val = write_seed_data(tmp_path, 4, key_prefix="r1-0123456789abcdef", val_rows=3)[1]
    rows = pq.read_table(val).column("extra_info").to_pylist()
    specs = [EpisodeSpec.model_validate(row) for row in validation_rows(rows, step=50)]
    assert {s.split for s in specs} == {"val"} and len({s.task_key for s in specs}) == 3
    assert all(s.step == 50 and s.episode_id.endswith("-at0050") for s in specs)
    spec = specs[0]
    client = GoldClient(tokenizer, {spec.episode_id: gold_trajectory(fetch_task(scripted_url, spec))})
    episode = run_episodes(tokenizer, client, scripted_url, [spec])[0].extra_fields["episode"]
    assert episode.outcome == "ok" and episode.split == "val" and episode.verifier_reward == 1
    assert validation_rows(rows, step=100)[0]["task_key"] == spec.task_key  # the same task every time


def test_a_training_placeholder_is_refused_as_a_validation_row(tmp_path):
    train = write_seed_data(tmp_path, 2, key_prefix="r1-0123456789abcdef", val_rows=1)[0]
    with pytest.raises(ContractError, match="held-out"):
        validation_rows(pq.read_table(train).column("extra_info").to_pylist(), step=1)


def test_verls_dataset_keeps_every_seed_row_under_the_overlong_prompt_filter(report, tokenizer):
    """data.filter_overlong_prompts is on (TRUSTEE's value): verl's own dataset, built as the V1 trainer
    builds it, must keep every training placeholder and every validation task, and the filter must be live
    (a prompt budget of a few tokens drops them all)."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo.utils import create_rl_dataset

    data = report.config.data
    assert data.filter_overlong_prompts is True
    sizes = {key: pq.read_metadata(data[key]).num_rows for key in ("train_files", "val_files")}
    for key, rows in sizes.items():
        assert len(create_rl_dataset(data[key], data, tokenizer, None, is_train=key == "train_files")) == rows
    tight = OmegaConf.merge(data, {"max_prompt_length": 4})
    assert len(create_rl_dataset(data.val_files, tight, tokenizer, None, is_train=False)) == 0


def test_train_sh_refuses_a_missing_foreign_or_forged_trustee_checkout_before_ray(tmp_path, make_trustee_checkout,
                                                                                  standin_commit):
    """The GPU recipe runs in mode trustee by default: without the checkout it reads, it stops at the check; a
    `.git` that names the commit without holding it is refused before a template is imported."""
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    other = make_trustee_checkout(tmp_path / "other", commit="f" * 40)
    forged = make_trustee_checkout(tmp_path / "forged", commit=standin_commit)
    for trustee_dir, message in ((tmp_path / "absent", "no folder at"), (other, "commit " + "f" * 40),
                                 (forged, f"does not hold commit {standin_commit}")):
        env = _train_sh_env(tmp_path, TRUSTEE_DIR=str(trustee_dir))
        done = run_in_read_only_workdir(["bash", str(RECIPE / "train.sh"), "--check"], workdir, env)
        output = done.stdout + done.stderr
        assert done.returncode != 0 and message in output and "checkout" in output, output[-2000:]


def test_the_agent_loop_and_the_curriculum_must_play_the_same_mode(volumes, monkeypatch):
    monkeypatch.setenv("TOOLCANARY_TRAIN_MODE", "toolcanary")
    loops = _loops_in_mode(volumes, "trustee")
    with pytest.raises(ContractError, match="the curriculum's mode"):
        check_recipe(["--config-path", str(RECIPE), "--config-name", "trustee_qwen3_4b",
                      f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loops}"])


def _loops_in_mode(root, mode: str):
    """A copy of the recipe's agent-loop registry with its mode fixed (the curriculum reads the environment)."""
    text = (RECIPE / "agent_loops.yaml").read_text().replace("${oc.env:TOOLCANARY_TRAIN_MODE,trustee}", mode)
    path = root / f"agent_loops_{mode}.yaml"
    path.write_text(text)
    return path


def test_the_disk_plan_refuses_a_volume_one_byte_too_small_and_names_the_estimate(volumes, tiny_dir, tmp_path,
                                                                                    monkeypatch):
    """The plan counts the recipe's saves (16 bytes a parameter, max_actor_ckpt_to_keep of them) and its 21
    publishes (steps 0, 10, ..., 200 in bf16); nothing is published when the volume is too small."""
    from safetensors.torch import load_file

    from toolcanary.train.gpu.base_checkpoint import publish_base

    monkeypatch.setenv("TOOLCANARY_CHECKPOINTS_DIR", str(tmp_path / "checkpoints"))
    monkeypatch.setenv("TOOLCANARY_RUNS_DIR", str(tmp_path / "runs"))  # one filesystem for saves and publishes
    parameters = sum(t.numel() for t in load_file(tiny_dir / "model.safetensors").values())
    need = 2 * 16 * parameters + 21 * 2 * parameters
    args = recipe_args(f"actor_rollout_ref.model.path={tiny_dir}")
    with pytest.raises(ContractError) as refused:
        publish_base(args, free=lambda path: need - 1)
    message = str(refused.value)
    assert f"{need / 1e9:.1f} GB for the rest of the run" in message and "2 verl saves kept" in message
    assert "21 published checkpoints" in message and "max_actor_ckpt_to_keep" in message
    assert not (tmp_path / "checkpoints").exists()  # refused before anything was written
    folder = publish_base(args, free=lambda path: need)
    # On a restart, what the run already wrote counts as in place: step 0 is published, 20 publishes remain.
    assert publish_base(args, free=lambda path: need - 2 * parameters) == folder
    with pytest.raises(ContractError, match="GB free"):
        publish_base(args, free=lambda path: need - 2 * parameters - 1)


def test_the_disk_plan_of_the_default_recipe(report):
    """Qwen3-4B's 4,022,468,096 parameters (its config: 36 layers of 2560, tied embeddings of 151936 words)
    through the recipe as composed: about 129 GB of verl saves and 169 GB of publishes, 298 GB in all."""
    from toolcanary.train.gpu.disk_plan import SAVE_BYTES_PER_PARAMETER, DiskPlan

    trainer = report.config.trainer
    qwen3_4b = 4_022_468_096
    publishes = len(range(0, int(trainer.total_training_steps) + 1, int(trainer.save_freq)))
    plan = DiskPlan(parameters=qwen3_4b, saves_kept=int(trainer.max_actor_ckpt_to_keep), publishes=publishes,
                    save_bytes=qwen3_4b * SAVE_BYTES_PER_PARAMETER, publish_bytes=qwen3_4b * 2,
                    saves_dir=Path(str(trainer.default_local_dir)), checkpoints_dir=Path("/volumes/checkpoints/r1"))
    assert (plan.saves_kept, plan.publishes) == (2, 21)
    assert round(plan.total / 1e9, 1) == 297.7
    print(plan.describe())
