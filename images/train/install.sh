#!/bin/sh
# Install the trainer's Python stack for the image's platform (the build argument PLATFORM):
#   cuda (default)  verl 0.9.1 with its vLLM rollout (verl[vllm] pins torch, vLLM and transformers for CUDA)
#                   and ToolCanary's train and simulator extras, every version held by LOCK
#   cpu             the train recipe of pyproject.toml under locks/train.txt, as `make setup` builds
#                   .venvs/train (CPU torch, verl without vLLM): the CPU stack's trainer
#
# Usage: images/train/install.sh LOCK
#   images/train/install.sh locks/image-train.txt      what images/train/Dockerfile runs
#
# The CUDA step runs outside the image through pip's resolver alone: pip reads every long option from
# PIP_<OPTION>, so PIP_DRY_RUN=1 PIP_IGNORE_INSTALLED=1 PIP_REPORT=report.json turn it into a dry run
# (tests/stack/test_gpu_image_resolution.py, and scripts/lock_images.py, which rewrites the lock from it).
# On CPU, CPU_TORCH_INDEX (a package index holding torch's CPU build) is added to pip's indexes when set.
# python3 is whichever interpreter PATH finds first: the image's /opt/venv, or the caller's venv.
set -eu
lock=${1:?usage: images/train/install.sh LOCK (constraints, e.g. locks/image-train.txt)}
root=$(cd "$(dirname "$0")/../.." && pwd)
case "${PLATFORM:-cuda}" in
  cuda) exec python3 -m pip install "verl[vllm]==0.9.1" "$root[train,simulator]" --constraint "$lock" ;;
  cpu)
    if [ -n "${CPU_TORCH_INDEX:-}" ]; then export PIP_EXTRA_INDEX_URL="$CPU_TORCH_INDEX"; fi
    if [ -n "${TOOLCANARY_FIND_LINKS:-}" ]; then export PIP_FIND_LINKS="$TOOLCANARY_FIND_LINKS"; fi
    exec python3 "$root/scripts/setup_venvs.py" --here train ;;
  *) echo "error: PLATFORM must be cuda or cpu, got '$PLATFORM'" >&2; exit 2 ;;
esac
