"""Serving never shares a GPU with the running training profile by accident.

The rule (toolcanary.evaluate.gpu_share) reads the device ids from the configuration the real Compose binary
resolves; `make eval` runs it before serve starts, through the recording stand-in for `docker compose`, which
reports the services $RECORDER_RUNNING names as running.

Run: .venvs/dev/bin/python -m pytest tests/stack/test_gpu_share.py -q
"""

import re

import pytest
from compose_env import calls, recorder, resolve, run_make, sandbox, with_ids

from toolcanary.evaluate.gpu_share import reserved, shared_gpus


def env_file(tmp_path, example_env, **values) -> str:
    text = example_env.read_text()
    for name, value in values.items():
        text = re.sub(rf"^{name}=.*$", f"{name}={value}", text, flags=re.M)
    path = tmp_path / "chosen.env"
    path.write_text(text)
    return path


def test_the_example_wiring_serves_on_a_gpu_the_trainer_holds(example_env):
    config = resolve(example_env)
    assert reserved(config, "serve") == ["0"] and reserved(config, "trainer") == ["0", "1", "2", "3"]
    problem = shared_gpus(config, {"simulator", "trainer"})
    assert "GPU 0 (trainer)" in problem and "no GPU the stack names is free while training runs" in problem
    assert shared_gpus(config, {"simulator"}) is None  # the trainer is not running: its GPUs are free
    assert shared_gpus(config, set()) is None


def test_the_refusal_names_the_gpus_training_leaves_free(example_env, tmp_path):
    config = resolve(env_file(tmp_path, example_env, SERVE_GPU="5"))
    problem = shared_gpus(config, {"simulator"})
    assert "GPU 5 (simulator)" in problem and "serve on a free one (0, 1, 2, 3): SERVE_GPU for make eval" in problem
    assert shared_gpus(resolve(env_file(tmp_path, example_env, SERVE_GPU="8")), {"simulator", "trainer"}) is None


@pytest.fixture
def stack(tmp_path):
    root = sandbox(tmp_path)
    (root / ".env").write_text(with_ids((root / ".env.example").read_text()))
    compose, log = recorder(tmp_path)

    def make(*args: str, running: str = ""):
        result = run_make(root, "eval", *args, f"COMPOSE={compose}", env={"RECORDER_RUNNING": running})
        return result, calls(log)

    return make


def test_make_eval_refuses_a_gpu_the_running_trainer_holds_before_serving(stack):
    result, recorded = stack("STEP=0", running="simulator,trainer")
    assert result.returncode != 0
    assert "serve would run on GPU 0 (trainer), which the running training profile holds" in result.stderr
    assert not [c for c in recorded if c["command"] in ("up", "run")]  # nothing was started


def test_make_eval_serves_when_training_is_not_running(stack):
    result, recorded = stack("STEP=0")
    assert result.returncode == 0, result.stderr
    assert [c["command"] for c in recorded if c["command"] in ("up", "run")] == ["up", "run"]


def test_each_gpu_eval_all_is_given_is_checked(example_env):
    config = resolve(example_env)
    assert shared_gpus(config, {"simulator"}, ["0", "1"]) is None  # the trainer's GPUs, while it does not run
    assert "GPU 6 (simulator)" in shared_gpus(config, {"simulator"}, ["1", "6"])
