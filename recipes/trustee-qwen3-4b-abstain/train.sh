#!/usr/bin/env bash
# The abstention ablation of the GPU recipe: recipes/trustee-qwen3-4b/train.sh with a share of abstention
# tasks (TOOLCANARY_TRAIN_NO_CALL_FRACTION, default 0.2) and a run id of its own; nothing else differs
# (README.md in this folder).
# Usage: recipes/trustee-qwen3-4b-abstain/train.sh [--check] [extra Hydra overrides ...]
#   every argument goes to the base recipe's train.sh unchanged
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"

# The one knob of the comparison: the trainer's curriculum asks for this share of abstention tasks, and
# records it in its state. 0 would be the baseline recipe under another run id, so it is refused here.
export TOOLCANARY_TRAIN_NO_CALL_FRACTION="${TOOLCANARY_TRAIN_NO_CALL_FRACTION:-0.2}"
if ! python3 -c 'import sys; v = float(sys.argv[1]); sys.exit(0 if 0 < v <= 1 else 1)' \
    "$TOOLCANARY_TRAIN_NO_CALL_FRACTION" 2>/dev/null; then
  echo "trustee-qwen3-4b-abstain: expected TOOLCANARY_TRAIN_NO_CALL_FRACTION in (0, 1], got" \
       "'$TOOLCANARY_TRAIN_NO_CALL_FRACTION'. Unset it for the default 0.2, or run" \
       "recipes/trustee-qwen3-4b/train.sh for the baseline (no abstention tasks)." >&2
  exit 2
fi
export TOOLCANARY_TRAIN_RUN="${TOOLCANARY_TRAIN_RUN:-trustee-qwen3-4b-abstain}"
exec bash "$HERE/../trustee-qwen3-4b/train.sh" "$@"
