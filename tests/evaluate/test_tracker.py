"""Passes scored at once write their TensorBoard scalars into one fresh folder without losing any.

Run: .venvs/eval/bin/python -m pytest tests/evaluate/test_tracker.py -q
"""

import threading

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from toolcanary.contract.csv_schemas import BfclRow
from toolcanary.evaluate.tracker import write_pass_scalars


@pytest.mark.parametrize("round_", range(10))  # the race is narrow: several fresh folders give it its chances
def test_passes_finishing_together_each_write_their_scalars(tmp_path, round_):
    passes = 8
    start = threading.Barrier(passes)
    written = []

    def one(pass_index: int) -> None:
        rows = [BfclRow(10, pass_index, "irrelevance", pass_index, 8, 0)]
        start.wait()  # every writer meets the folder missing at the same moment
        written.append(write_pass_scalars(tmp_path / "tensorboard", rows))

    threads = [threading.Thread(target=one, args=(p,)) for p in range(1, passes + 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert written == [tmp_path / "tensorboard" / "bfcl"] * passes  # none logged a failure (None)
    reader = EventAccumulator(str(tmp_path / "tensorboard" / "bfcl"))
    reader.Reload()
    for p in range(1, passes + 1):
        [point] = reader.Scalars(f"bfcl_category/irrelevance/pass{p}")
        assert (point.step, point.value) == (10, 100 * p / 8)
