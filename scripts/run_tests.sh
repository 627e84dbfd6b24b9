#!/usr/bin/env bash
# Run each suite under tests/ inside the environment of the image it belongs to, then print one total.
# Usage: scripts/run_tests.sh [suite ...]   (default: every suite present; extra pytest args via PYTEST_ARGS)
set -uo pipefail
cd "$(dirname "$0")/.."
declare -A ENV_OF=([contract]=dev [stack]=dev [simulator]=simulator [train]=train [serve]=serve
                   [evaluate]=eval [audit]=eval [analysis]=analysis [demo]=dev [containers]=dev)
ORDER="contract stack analysis simulator evaluate audit train serve demo containers"
suites="${*:-$ORDER}"
reports=.venvs/reports && rm -rf "$reports" && mkdir -p "$reports"
status=0
ran=()
for suite in $suites; do
  [ -d "tests/$suite" ] || continue
  ran+=("$suite")
  env="${ENV_OF[$suite]:?no environment mapped for tests/$suite}"
  echo "=== tests/$suite in .venvs/$env"
  ".venvs/$env/bin/python" -m pytest "tests/$suite" -q ${PYTEST_ARGS:-} --junitxml="$reports/$suite.xml" || status=1
done
python3 scripts/sum_junit.py "$reports" "${ran[@]}" || status=1
exit $status
