#!/bin/sh
# Install the trainer's Python stack: verl 0.9.1 with its vLLM rollout (verl[vllm] pins torch, vLLM and
# transformers for CUDA) and ToolCanary's train and simulator extras, every version held by LOCK.
#
# Usage: images/train/install.sh LOCK
#   images/train/install.sh locks/image-train.txt      what images/train/Dockerfile runs
#
# The same step runs outside the image through pip's resolver alone: pip reads every long option from
# PIP_<OPTION>, so PIP_DRY_RUN=1 PIP_IGNORE_INSTALLED=1 PIP_REPORT=report.json turn it into a dry run
# (tests/stack/test_gpu_image_resolution.py, and scripts/lock_images.py, which rewrites the lock from it).
# python3 is whichever interpreter PATH finds first: the image's /opt/venv, or the caller's venv.
set -eu
lock=${1:?usage: images/train/install.sh LOCK (constraints, e.g. locks/image-train.txt)}
root=$(cd "$(dirname "$0")/../.." && pwd)
exec python3 -m pip install "verl[vllm]==0.9.1" "$root[train,simulator]" --constraint "$lock"
