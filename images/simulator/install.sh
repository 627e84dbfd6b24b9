#!/bin/sh
# Install ToolCanary's simulator and serve extras into the vLLM base image without changing any package
# the base ships: every one of them is a constraint at its shipped version, so pip fails rather than
# upgrade or downgrade what vLLM pinned. What the extras add beyond the base is held by LOCK.
#
# Usage: images/simulator/install.sh BASE_PACKAGES LOCK
#   BASE_PACKAGES  the base's `pip list --format=freeze` (name==version lines; `pip freeze` would print
#                  `vllm @ file://...` for the wheel the base was built from, which is no constraint)
#   LOCK           constraints for the packages the extras add, e.g. locks/image-simulator.txt
#   python3 -m pip list --format=freeze > base-packages.txt
#   images/simulator/install.sh base-packages.txt locks/image-simulator.txt   what the Dockerfile runs
#
# The same step runs outside the image through pip's resolver alone (PIP_DRY_RUN=1 PIP_IGNORE_INSTALLED=1
# PIP_REPORT=report.json): tests/stack/test_gpu_image_resolution.py feeds it the package list of a
# resolution of the base's vLLM release, and scripts/lock_images.py rewrites LOCK from it.
set -eu
base=${1:?usage: images/simulator/install.sh BASE_PACKAGES LOCK}
lock=${2:?usage: images/simulator/install.sh BASE_PACKAGES LOCK}
root=$(cd "$(dirname "$0")/../.." && pwd)
exec python3 -m pip install "$root[simulator,serve]" --constraint "$base" --constraint "$lock"
