"""One rule for every append-only file: published.jsonl, episodes.jsonl, the simulator's JSONL records,
train_metrics.csv and bfcl_by_category.csv (and warm_start.csv). Writers and readers of all of them call this.

A process killed mid-write leaves a *torn* line: bytes without the final newline. The rule:

- **Writers** append whole lines, flushed and fsynced. A writer that finds a torn tail first notes where that
  line starts in the file's fence list (`.<name>.torn` beside it, one `offset length` line per torn line),
  then ends it with a newline, so its own line starts fresh. The torn line stays where it is: nothing is
  ever removed from an append-only file, and a fenced line can still be read by a person.
- **Readers** (`read_lines`) skip a torn *last* line with a warning: a writer may be in the middle of it right
  now, or was killed there. They skip a torn line a writer fenced, with a warning. Any other line that its
  parser cannot read is *in the middle* and no writer accounted for it (the file was cut, edited or written
  without this rule): the caller refuses it with `refused_line`, naming the file and the line.
- **Appends that can race** (two processes writing the same file) run under an exclusive lock on
  `lock_path(path)`; the caller passes it as `lock=` (the evaluation passes a `filelock.FileLock`, which this
  dependency-light module does not import). The torn-tail check and the header decision happen inside it.
  Only bfcl_by_category.csv has racing writers (evaluation passes of different steps finishing at once);
  every other file has one writing process (the trainer, one episode file per GPU worker, one simulator
  process per run) and is appended without one.
- **Rewrites** (a resumed trainer dropping the rows of steps it redoes) go through `rewrite_lines`: a
  temporary file renamed over the old one, so a reader sees the old file or the new one, never half of it;
  the fence list goes with the old file.

The fence list is what makes a torn line in the middle tell-tale: a CSV row cut inside its last number still
parses, so content alone cannot say whether a line is whole.

    append_text(path, '{"step": 3}\\n', lock=FileLock(lock_path(path)))
    for number, line in read_lines(path).lines: ...
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from toolcanary.contract.errors import ContractError

log = logging.getLogger(__name__)


def lock_path(path: str | Path) -> Path:
    """The lock file every writer of `path` that can race with another holds while it appends."""
    path = Path(path)
    return path.with_name(f".{path.name}.lock")


def fence_path(path: str | Path) -> Path:
    """The fence list of `path`: where each torn line a writer fenced starts, and how long it is."""
    path = Path(path)
    return path.with_name(f".{path.name}.torn")


@dataclass(frozen=True)
class TornLine:
    """A line without its newline: `line` is its 1-based number, `offset` its first byte."""

    path: Path
    line: int
    offset: int
    text: str

    def describe(self) -> str:
        return f"{self.path}: line {self.line} (byte {self.offset}) is torn: {self.text[:80]!r}"


@dataclass
class ReadLines:
    """What `read_lines` found: the whole lines, and the torn ones it skipped (each was logged)."""

    lines: list[tuple[int, str]] = field(default_factory=list)
    torn_tail: TornLine | None = None
    fenced: list[TornLine] = field(default_factory=list)

    @property
    def skipped(self) -> list[TornLine]:
        return [*self.fenced, *([self.torn_tail] if self.torn_tail else [])]


def _fenced_offsets(path: Path) -> set[int]:
    fences = fence_path(path)
    if not fences.exists():
        return set()
    offsets = set()
    for raw in fences.read_text(encoding="ascii", errors="replace").splitlines():
        parts = raw.split()
        # A fence line torn by a killed writer names nothing yet: that writer had not ended the torn line.
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            offsets.add(int(parts[0]))
    return offsets


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def iter_lines(path: str | Path, result: ReadLines | None = None) -> Iterator[tuple[int, str]]:
    """(line number, text without the newline) of every whole line that no writer fenced, streamed.

    Blank lines are left out. Torn lines are recorded in `result` (when given) and logged as warnings.
    """
    path = Path(path)
    result = result if result is not None else ReadLines()
    if not path.exists():
        return
    fenced = _fenced_offsets(path)
    offset = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            start, offset = offset, offset + len(raw)
            if not raw.endswith(b"\n"):
                result.torn_tail = TornLine(path, number, start, _decode(raw))
                log.warning("%s; skipped (a writer is in the middle of it or was killed there)",
                            result.torn_tail.describe())
                return
            if start in fenced:
                torn = TornLine(path, number, start, _decode(raw.rstrip(b"\r\n")))
                result.fenced.append(torn)
                log.warning("%s; skipped (fenced off by the writer that came after it)", torn.describe())
                continue
            text = _decode(raw.rstrip(b"\r\n"))
            if text.strip():
                yield number, text


def read_lines(path: str | Path) -> ReadLines:
    """Every whole, unfenced line of `path` with its number; see `iter_lines`. A missing file has none."""
    result = ReadLines()
    result.lines = list(iter_lines(path, result))
    return result


def refused_line(path: str | Path, number: int, expected: str, text: str) -> ContractError:
    """The error for a line in the middle of an append-only file that its reader cannot read."""
    return ContractError(
        f"{path}: line {number}", expected, f"{text[:120]!r}, a broken line that no writer fenced off",
        "The file was cut, edited or written without the append-only rule; restore it from a copy, or delete "
        "that line if losing it is acceptable (the lines after it are intact)",
    )


def fence_torn_tail(path: str | Path) -> TornLine | None:
    """If `path` ends inside a line, add that line to the fence list and end it with a newline.

    Call it holding the file's lock (or as its only writer). Returns the torn line it fenced, if any.
    """
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return None
    with path.open("rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return None
        # Walk back to the newline before the torn line (lines are short; read in blocks anyway).
        end, start = size, 0
        while end > 0:
            begin = max(0, end - 65536)
            handle.seek(begin)
            block = handle.read(end - begin)
            cut = block.rfind(b"\n")
            if cut >= 0:
                start = begin + cut + 1
                break
            end = begin
        handle.seek(0)
        number = sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b"")) + 1
        handle.seek(start)
        text = _decode(handle.read(min(size - start, 200)))
    torn = TornLine(path, number, start, text)
    fences = fence_path(path)
    with fences.open("ab") as handle:
        # A fence line torn by a kill right here is ignored by readers, and the next writer fences again.
        if handle.tell() > 0 and not _ends_with_newline(fences):
            handle.write(b"\n")
        handle.write(f"{start} {size - start}\n".encode("ascii"))
        handle.flush()
        os.fsync(handle.fileno())
    with path.open("ab") as handle:
        handle.write(b"\n")
        handle.flush()
        os.fsync(handle.fileno())
    log.warning("%s; fenced off, the next line starts fresh", torn.describe())
    return torn


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


def first_line(path: str | Path) -> str | None:
    """The first whole, unfenced line of `path` (a CSV's header), or None when there is none yet."""
    for _, text in iter_lines(path):
        return text
    return None


# Line separators other than "\n" that some readers split at (str.splitlines, editors): inside a JSON string they
# are written as escapes, so that a JSON line is one line to every reader.
_LINE_SEPARATORS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\u0085": "\\u0085"})


def json_line(model) -> str:
    """A pydantic model as one JSON line, newline included, with U+2028, U+2029 and U+0085 escaped."""
    return model.model_dump_json().translate(_LINE_SEPARATORS) + "\n"


def append_text(path: str | Path, text: str, *, header: str | None = None,
                lock: AbstractContextManager | None = None) -> TornLine | None:
    """Append `text` (whole lines, each ending in a newline) under `lock`, fsynced before returning.

    `header`: the first line the file must have (a CSV's columns); written first when the file has no whole
    line yet, and an existing different one is refused. `lock`: held around the whole append, including the
    torn-tail check and the header decision; pass the lock on `lock_path(path)` wherever another process can
    append to the same file (None: the caller is its only writer). Returns the torn line it fenced, if any.

    Raises:
        ContractError: the file's first line is not `header`.
    """
    if not text.endswith("\n"):
        raise ValueError(f"append_text({path}): expected whole lines ending in a newline, got {text[-40:]!r}")
    path = Path(path)
    with lock if lock is not None else contextlib.nullcontext():
        path.parent.mkdir(parents=True, exist_ok=True)
        torn = fence_torn_tail(path)
        if header is not None:
            existing = first_line(path)
            if existing is None:
                text = header.rstrip("\n") + "\n" + text
            elif existing != header.rstrip("\n"):
                missing = [c for c in header.rstrip("\n").split(",") if c not in existing.split(",")]
                raise ContractError(
                    f"{path}: header", repr(header.rstrip("\n")), f"{existing!r}" + (f" (missing {missing})" if missing else ""),
                    "The file was written by another version of its writer; move it away (or finish the run "
                    "with that version) instead of mixing two layouts in one file",
                )
        with path.open("ab") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
    return torn


def rewrite_lines(path: str | Path, lines: list[str], *, lock: AbstractContextManager | None = None) -> None:
    """Replace `path` by `lines` (each without its newline) atomically, and drop its fence list."""
    path = Path(path)
    with lock if lock is not None else contextlib.nullcontext():
        tmp = path.with_name(f".{path.name}.rewrite-{os.getpid()}")
        with tmp.open("wb") as handle:
            handle.write("".join(line + "\n" for line in lines).encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        # The fence list describes byte offsets of the file just replaced; the new one has no torn line.
        fence_path(path).unlink(missing_ok=True)
        fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    """Make a folder's entries (a file just renamed into it) durable, as fsync does a file's bytes."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
