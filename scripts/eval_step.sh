#!/usr/bin/env bash
# `make eval STEP=N [PASS=P]`: serve checkpoint N on the GPU stack, wait until healthy, score it, stop serve.
# Usage: scripts/eval_step.sh STEP [PASS]   (RUN and the rest of the wiring come from .env)
set -euo pipefail
cd "$(dirname "$0")/.."
STEP="${1:?usage: make eval STEP=N [PASS=P]}"; PASS="${2:-1}"
[ -f .env ] && { set -a; . ./.env; set +a; }
: "${RUN:?RUN is not set: copy .env.example to .env and set RUN}"
export STEP
compose="${COMPOSE:-docker compose} --profile eval"
trap '$compose stop serve' EXIT
$compose up -d --wait serve
$compose run --rm --no-deps eval run --run "$RUN" --step "$STEP" --pass "$PASS" --model "$(printf '%s-step%04d' "$RUN" "$STEP")"
