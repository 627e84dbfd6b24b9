#!/usr/bin/env bash
# `make eval [STEP=N] [PASS=P]`: serve one checkpoint on the GPU stack, wait until it is healthy, score one BFCL
# pass of it, stop serving.
#
# Usage: scripts/eval_step.sh [--step N] [--pass P]
# Examples:
#   scripts/eval_step.sh --step 200             # what `make eval STEP=200` runs
#   scripts/eval_step.sh --step 200 --pass 2    # the second repeat pass of step 200
#   STEP=150 RUN=r2 scripts/eval_step.sh        # exported values work as well
#   scripts/eval_step.sh                        # the STEP and RUN set in .env
#
# The step and the run id are taken from Docker Compose itself (`config --environment`, Compose v2.28 or newer),
# so the step served and the step scored are one value, with Compose's precedence: --step, then the exported
# environment, then .env. The eval container derives the served model name (<run>-stepNNNN) the way serve names
# it. COMPOSE names the compose command (default: docker compose).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,15s/^# \{0,1\}//p' "$0"; }
pass=1
while [ $# -gt 0 ]; do
  case "$1" in
    --step) [ $# -ge 2 ] || { echo "error: --step needs a checkpoint step, e.g. --step 200" >&2; exit 2; }
            export STEP="$2"; shift 2 ;;
    --pass) [ $# -ge 2 ] || { echo "error: --pass needs a repeat index, e.g. --pass 2" >&2; exit 2; }
            pass="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "error: unexpected argument '$1' (expected --step N and --pass P; see --help)" >&2; exit 2 ;;
  esac
done
[[ "$pass" =~ ^[1-9][0-9]*$ ]] || { echo "error: --pass must be a repeat index (1, 2, ...), got '$pass'" >&2; exit 2; }

read -r -a compose <<< "${COMPOSE:-docker compose}"
compose+=(--profile eval)
if ! resolved="$("${compose[@]}" config --environment)"; then
  echo "error: '${compose[*]} config --environment' failed (above); fix what it names in .env, or update Docker" \
       "Compose to v2.28 or newer if it does not know --environment" >&2
  exit 2
fi
value() { sed -n "s/^$1=//p" <<< "$resolved" | tail -n 1; }
step="$(value STEP)"
run="$(value RUN)"
if ! [[ "$step" =~ ^[0-9]+$ ]]; then
  echo "error: STEP must be a checkpoint step (0, 10, ..., 200), got '${step}': run make eval STEP=N or set STEP in .env" >&2
  exit 2
fi
# serve reads ${STEP} through Compose; the value exported here is the one just resolved.
export STEP="$step"

# Never on a GPU the running training profile holds (toolcanary/evaluate/gpu_share.py, standard library only).
PYTHONPATH=services python3 -m toolcanary.evaluate.gpu_share --compose "${COMPOSE:-docker compose}" || exit 2

echo "eval_step: run $run, step $step, pass $pass"
trap '"${compose[@]}" stop serve' EXIT
"${compose[@]}" up -d --wait serve
"${compose[@]}" run --rm --no-deps eval run --step "$step" --pass "$pass"
