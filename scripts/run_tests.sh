#!/usr/bin/env bash
# Run each suite under tests/ inside the environment of the image it belongs to, then print one total.
# Two lanes: the work that mostly waits on the network and the disk (Chromium's install for the report's
# browser tests, the container images' build, tests/containers/prepare.py, then the stack suite's dependency
# resolutions and environment builds) runs in the background from the start, its output shown when it ends;
# the suites run one after the other, except the demo suite, which starts in its turn and runs beside the
# containers suite. The containers suite runs last and builds its images from the layer cache the early build
# left.
# Usage: scripts/run_tests.sh [suite ...]   (default: every suite present; extra pytest args via PYTEST_ARGS)
set -uo pipefail
cd "$(dirname "$0")/.."
declare -A ENV_OF=([contract]=dev [stack]=dev [simulator]=simulator [train]=train [serve]=serve
                   [evaluate]=eval [audit]=eval [analysis]=analysis [demo]=dev [containers]=dev)
ORDER="contract stack analysis simulator evaluate audit train serve demo containers"
# Suites whose files run on two workers (pytest-xdist, each file on one worker so a module's fixtures run once):
# the train suite's tests mostly wait on subprocesses and servers, so on 2 cores it finishes in about three
# quarters of its time (LOG.md).
declare -A WORKERS_OF=([train]="-n 2 --dist loadfile")
# Suites that start in their turn and run beside the suites after them, their output shown when they end: the
# demo suite's two demos, like the containers suite's stack, mostly wait on their services (a third to a half
# of the machine idle in each), so the two share it (LOG.md).
BESIDE="demo"
suites="${*:-$ORDER}"
reports=.venvs/reports && rm -rf "$reports" && mkdir -p "$reports"
# Screenshots and other files a test leaves for people to look at (e.g. report-pages/*.png).
export TOOLCANARY_TEST_OUTPUT="$PWD/$reports"
# One starting-policy cache for the suites of this run: the serve suite's held-out check and the demo suite's
# demos and study warm-start the same recipes; the first builds each, the others copy it (as a second demo on
# one machine does), so each recipe's minutes are spent once.
export TOOLCANARY_TEST_STARTING_POLICY_CACHE="$PWD/$reports/starting_policies"
status=0
ran=()

wanted() { [[ " $suites " == *" $1 "* && -d "tests/$1" ]]; }

run_suite() {  # suite -> its pytest's exit status
  local env="${ENV_OF[$1]:?no environment mapped for tests/$1}"
  echo "=== tests/$1 in .venvs/$env"
  ".venvs/$env/bin/python" -m pytest "tests/$1" -q ${WORKERS_OF[$1]:-} ${PYTEST_ARGS:-} --junitxml="$reports/$1.xml"
}

background=
if wanted containers || wanted stack || wanted analysis || wanted demo; then
  (
    if wanted analysis || wanted demo; then  # the report page's browser tests: Debian's Chromium
      python3 tests/analysis/report_browser.py --install > "$reports/chromium-install.log" 2>&1
    fi
    if wanted containers; then
      .venvs/dev/bin/python tests/containers/prepare.py > "$reports/containers-prepare.log" 2>&1
    fi
    if wanted stack; then
      run_suite stack > "$reports/stack.log" 2>&1 && touch "$reports/stack.passed"
    fi
  ) &
  background=$!
fi
declare -A beside_pid=()
stop_lanes() {  # on any exit: what still runs in the background lane or beside the suites
  local pid
  for pid in $background "${beside_pid[@]}"; do
    pkill -TERM -P "$pid" 2>/dev/null; kill "$pid" 2>/dev/null
  done
}
trap stop_lanes EXIT
finish_background() {
  [ -n "$background" ] || return 0
  wait "$background"
  background=
  if wanted stack; then
    cat "$reports/stack.log"
    ran+=(stack)
    [ -e "$reports/stack.passed" ] || status=1
  fi
  if wanted containers; then
    echo "early image build: $(tail -n 1 "$reports/containers-prepare.log")"
  fi
}

for suite in $suites; do
  [ -d "tests/$suite" ] || continue
  [ "$suite" = stack ] && continue  # in the background lane
  [ "$suite" = containers ] && finish_background
  ran+=("$suite")
  if [[ " $BESIDE " == *" $suite "* ]]; then
    run_suite "$suite" > "$reports/$suite.log" 2>&1 &
    beside_pid[$suite]=$!
  else
    run_suite "$suite" || status=1
  fi
done
finish_background
for suite in $BESIDE; do
  [ -n "${beside_pid[$suite]:-}" ] || continue
  wait "${beside_pid[$suite]}" || status=1
  unset "beside_pid[$suite]"
  cat "$reports/$suite.log"
done
python3 scripts/sum_junit.py "$reports" "${ran[@]}" || status=1
exit $status
