"""Each scored pass as TensorBoard scalars, at its checkpoint's training step, beside verl's training curves.

verl's `tensorboard` logger writes the run's training curves to `<results>/<run>/tensorboard/` (the recipe's
`TENSORBOARD_DIR`). After a pass appends its rows, the evaluation writes the same pass's scores into that
folder's `bfcl/` sub-folder, so `tensorboard --logdir <results>/<run>/tensorboard` (`make tensorboard RUN=...`)
shows them as run `bfcl` next to verl's own run, on the same step axis:

    bfcl/<aggregate>/pass<P>             the five aggregates, percent (toolcanary.contract.bfcl), and
                                         "abstention_required_no_unparsed_credit" when the rows measure it
    bfcl_category/<category>/pass<P>     100 * correct / total of every scored category

Each pass writes one event file of its own (named by time, host, step and pass), so passes scored at once
never share a file. A write that fails is logged as an error and does not undo the pass: its rows are in
`bfcl_by_category.csv` already, which stays the record every number is computed from.

    write_pass_scalars(Path("volumes/results/demo/tensorboard"), rows)
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from toolcanary.contract.bfcl import ABSTENTION, compute_aggregates
from toolcanary.contract.csv_schemas import BfclRow

log = logging.getLogger(__name__)

TENSORBOARD_SUBDIR = "bfcl"  # the run name TensorBoard shows the scores under
NO_CREDIT_TAG = "abstention_required_no_unparsed_credit"


def tag_name(name: str) -> str:
    """'Tool call required' -> 'tool_call_required': TensorBoard tags without spaces."""
    return re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_")


def pass_scalars(rows: list[BfclRow]) -> dict[str, float]:
    """Tag -> value of one pass's rows (one step, one pass); aggregates whose categories were not all scored
    are left out, never counted as 0."""
    if not rows:
        return {}
    (pass_index,) = {r.pass_index for r in rows}
    counts = {r.category: (r.correct, r.total) for r in rows}
    scalars = {f"bfcl/{tag_name(name)}/pass{pass_index}": value
               for name, value in compute_aggregates(counts, skip_incomplete=True).items()}
    by_category = {r.category: r for r in rows}
    if all(c in by_category and by_category[c].correct_unparsed is not None for c in ABSTENTION):
        total = sum(by_category[c].total for c in ABSTENTION)
        if total:
            kept = sum(by_category[c].correct - by_category[c].correct_unparsed for c in ABSTENTION)
            scalars[f"bfcl/{NO_CREDIT_TAG}/pass{pass_index}"] = 100.0 * kept / total
    for r in rows:
        if r.total:
            scalars[f"bfcl_category/{r.category}/pass{pass_index}"] = 100.0 * r.correct / r.total
    return scalars


def write_pass_scalars(tensorboard_dir: Path, rows: list[BfclRow]) -> Path | None:
    """Write one pass's scalars at its step under `tensorboard_dir/bfcl/`; return that folder (None: nothing
    written, the error logged)."""
    if not rows:
        return None
    folder = tensorboard_dir / TENSORBOARD_SUBDIR
    step = rows[0].step
    try:
        from tensorboardX import SummaryWriter

        # tensorboardX creates the folder without exist_ok: two passes finishing together would race on it.
        folder.mkdir(parents=True, exist_ok=True)
        # The suffix keeps two passes that finish in the same second (scored at once) out of one file name.
        with SummaryWriter(logdir=str(folder), flush_secs=1,
                           filename_suffix=f".step{step:04d}.pass{rows[0].pass_index}") as writer:
            for tag, value in pass_scalars(rows).items():
                writer.add_scalar(tag, value, global_step=step)
    except (OSError, ImportError) as error:
        log.error("step %d pass %d: the scores are in the CSV, but their TensorBoard scalars were not written to "
                  "%s: %s. Make the folder writable (or set TOOLCANARY_EVALUATE_TENSORBOARD_DIR) and rerun the "
                  "pass with --resume to write them", step, rows[0].pass_index, folder, error)
        return None
    return folder
