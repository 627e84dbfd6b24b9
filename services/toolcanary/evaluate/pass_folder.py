"""One evaluation pass's folder, its frozen request, and guard 1 (never reuse a result folder).

Layout under `<results>/<run>/passes/step_NNNN_pass_P/`:
    request.json    what the pass scores (served model, ids, weights hash...); a resume must match it
    bfcl/           BFCL_PROJECT_ROOT for this pass only: test_case_ids_to_generate.json, result/, score/
    logs/           generate.log, evaluate.log
    outcomes.jsonl  one line per item: category, id, outcome ("correct" or the error type)
    counts.json     the rows, written before they are appended to bfcl_by_category.csv
    manifest.json   EvalPassManifest; `finished_at` is set only for a pass whose rows were written
    failure.json    why the pass was refused, when it was

    python -c "from toolcanary.evaluate.pass_folder import PassPaths; print(PassPaths.of('results', 'r', 200, 1).folder)"
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from filelock import FileLock

from toolcanary.contract.append_only import lock_path
from toolcanary.contract.csv_schemas import BFCL_BY_CATEGORY
from toolcanary.contract.errors import ContractError


@dataclass(frozen=True)
class PassPaths:
    run_dir: Path
    folder: Path

    @classmethod
    def of(cls, results_dir: str | Path, run: str, step: int, pass_index: int) -> PassPaths:
        run_dir = Path(results_dir) / run
        return cls(run_dir, run_dir / "passes" / f"step_{step:04d}_pass_{pass_index}")

    csv = property(lambda self: self.run_dir / BFCL_BY_CATEGORY)
    bfcl_root = property(lambda self: self.folder / "bfcl")
    result_dir = property(lambda self: self.folder / "bfcl" / "result")
    score_dir = property(lambda self: self.folder / "bfcl" / "score")
    ids_file = property(lambda self: self.folder / "bfcl" / "test_case_ids_to_generate.json")
    logs = property(lambda self: self.folder / "logs")
    request = property(lambda self: self.folder / "request.json")
    outcomes = property(lambda self: self.folder / "outcomes.jsonl")
    counts = property(lambda self: self.folder / "counts.json")
    manifest = property(lambda self: self.folder / "manifest.json")
    failure = property(lambda self: self.folder / "failure.json")


@dataclass(frozen=True)
class PassRequest:
    """Everything that decides a pass's numbers; a resumed pass must ask for exactly the same."""

    run: str
    step: int
    pass_index: int
    served_model: str
    registry_key: str
    weights_sha256: str | None
    categories: list[str]
    ids: dict[str, list[str]]
    temperature: float
    overlong_counted_wrong: bool

    def differences(self, other: PassRequest) -> list[str]:
        mine, theirs = asdict(self), asdict(other)
        return [f"{k}: folder has {theirs[k]!r:.120}, now {mine[k]!r:.120}" for k in mine if mine[k] != theirs[k]]


def write_json(path: Path, value: object) -> None:
    """Write through a temporary file so a kill never leaves half a file behind."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def csv_lock(csv_path: Path) -> FileLock:
    """The run CSV's exclusive lock (`.bfcl_by_category.csv.lock` beside it): every append of a pass's rows,
    and every read that decides what to append, holds it, since passes of different steps (eval-all, watch,
    make eval) can finish at the same moment and two first writers would each write a header."""
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(lock_path(csv_path))


def lock(paths: PassPaths) -> int:
    """An exclusive lock on the pass folder, released when this process ends however it ends."""
    paths.folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(paths.folder / ".lock", os.O_CREAT | os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ContractError(str(paths.folder), "a pass folder no other client is using", "it is locked",
                            "Another evaluation of this pass is running; wait for it or stop it") from None
    return fd


def claim(paths: PassPaths, request: PassRequest, resume: bool, scored: bool) -> bool:
    """Guard 1. Returns True when the folder already holds this pass's partial (or finished) work to resume.

    Raises:
        ContractError: the folder or the CSV already holds results and this is not an explicit resume of
            the same request (same checkpoint weights, ids and served model).
    """
    used = paths.folder.exists() and any(p.name != ".lock" for p in paths.folder.iterdir())
    if not resume:
        if scored:
            raise ContractError(
                str(paths.csv), f"no rows yet for step {request.step}, pass {request.pass_index}",
                "rows for that pass", f"Score a new repeat with --pass {request.pass_index + 1}",
            )
        if used:
            raise ContractError(
                str(paths.folder), "a fresh result folder", "one that already holds results",
                "bfcl-eval would mix old and new answers; rerun with --resume to finish that pass, or use another --pass",
            )
        return False
    if not used:
        if scored:
            raise ContractError(str(paths.csv), "rows with their pass folder", f"rows but no {paths.folder}",
                                "The pass folder was removed; score a new repeat with another --pass")
        return False
    if not paths.request.is_file():
        raise ContractError(str(paths.folder), "a pass folder with request.json", "none",
                            "This folder was not made by this client; move it away and start the pass again")
    old = PassRequest(**json.loads(paths.request.read_text()))
    if old.weights_sha256 != request.weights_sha256:
        raise ContractError(
            str(paths.folder), f"results of checkpoint weights {request.weights_sha256}",
            f"results of weights {old.weights_sha256}", "Never mix checkpoints in one pass; use another --pass",
        )
    diffs = request.differences(old)
    if diffs:
        raise ContractError(str(paths.request), "the same arguments as the interrupted pass", "; ".join(diffs),
                            "Resume with the original arguments, or score a new --pass")
    return True
