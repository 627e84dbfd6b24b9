"""Build the SmolLM2 starting policy the serve suite's held-out check reads, or wait for a build started earlier.

The check (test_starting_policy_calls.py) needs a fresh `starting-policy --held-out` run with the smollm2 preset:
several minutes on 2 cores. scripts/run_tests.sh starts this script at the beginning of `make test`, into the
folder it names in TOOLCANARY_STARTING_POLICY_BUILD, so that the build overlaps the suites before serve; the
check then waits for that folder's result. Without the variable the check builds for itself, with the same
command (`build`). This script asserts nothing: the check reads what the build left, exit status included.

Run: .venvs/train/bin/python tests/serve/starting_policy_build.py DIR   (writes DIR/result.json when done)
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from toolcanary.contract.training_files import TASK_KEY_TAG_FILE

REPO = Path(__file__).resolve().parents[2]
HELD_OUT_TASKS = 12
RESULT = "result.json"
WAIT_S = 1800


def build(root: Path) -> dict:
    """Build into `root` and write its result there: {"returncode", "stdout", "stderr", "seconds"}.

    The run's task-key tag is given, so its warm start imitates the same gold conversations every time (a run
    makes a random tag otherwise) and the check is of one fixed recipe, not of whichever tasks a tag drew.
    """
    tag = root / "runs" / "held-out" / "trainer" / TASK_KEY_TAG_FILE
    tag.parent.mkdir(parents=True, exist_ok=True)
    tag.write_text("5eed0000c0ffee00\n")
    started = time.monotonic()
    try:
        done = subprocess.run(
            [str(REPO / ".venvs" / "train" / "bin" / "python"), "-m", "toolcanary.train", "starting-policy",
             "--quiet", "--run", "held-out", "--policy", "smollm2", "--held-out", str(HELD_OUT_TASKS),
             "--checkpoints-dir", str(root / "checkpoints"), "--results-dir", str(root / "results"),
             "--runs-dir", str(root / "runs")],
            capture_output=True, text=True, timeout=WAIT_S)
        result = {"returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr}
    except subprocess.TimeoutExpired as expired:
        result = {"returncode": None, "stdout": "", "stderr": f"the build ran past {WAIT_S} s: {expired}"}
    result["seconds"] = round(time.monotonic() - started, 1)
    (root / f"{RESULT}.partial").write_text(json.dumps(result))
    (root / f"{RESULT}.partial").rename(root / RESULT)  # whole or absent for a reader polling for it
    return result


def wait_for(root: Path) -> dict:
    """The result of the build started into `root` earlier, once it is there."""
    deadline = time.monotonic() + WAIT_S + 120
    while not (root / RESULT).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {RESULT} in {root} after {WAIT_S + 120} s: did the early build start? "
                               f"Unset TOOLCANARY_STARTING_POLICY_BUILD to build within the test.")
        time.sleep(2)
    return json.loads((root / RESULT).read_text())


if __name__ == "__main__":
    folder = Path(sys.argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    print(f"starting-policy build into {folder}", flush=True)
    outcome = build(folder)
    print(f"starting-policy build: exit {outcome['returncode']} after {outcome['seconds']} s", flush=True)
