"""Manifests written beside every published checkpoint and every evaluation pass, and the publication ledger.

A checkpoint folder is complete only when its `manifest.json` parses into `CheckpointManifest`; readers
call `read_checkpoint_manifest`, which refuses anything less.

`<checkpoints>/<run>/published.jsonl` holds one `PublishedCheckpoint` per line, appended by the trainer once
a checkpoint folder is whole (`append_published`) and read by the trainer and the evaluation's eval-all and
watch (`read_published`), both under the append-only rule of `toolcanary.contract.append_only`.

Before a checkpoint is served, `verify_checkpoint` hashes its weight files again and compares them with the
manifest; weight files must be plain files directly inside the checkpoint folder (no links, no `../`, no
absolute paths).

    for entry in read_published(checkpoints_dir / run): print(entry.step, entry.path)
    manifest = verify_checkpoint(checkpoints_dir / run / "step_0010")
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolcanary.contract.append_only import append_text, iter_lines, refused_line
from toolcanary.contract.errors import ContractError
from toolcanary.contract.run_id import RunId

CHECKPOINT_MANIFEST = "manifest.json"
# An evaluation pass's manifest, in its folder `passes/step_NNNN_pass_P/` (EvalPassManifest).
PASS_MANIFEST = "manifest.json"
PUBLISHED = "published.jsonl"


class CheckpointFile(BaseModel):
    """One file of a published checkpoint folder, as the publisher wrote it."""

    size: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class CheckpointManifest(BaseModel):
    """`volumes/checkpoints/<run>/step_NNNN/manifest.json`."""

    contract_version: str
    run: RunId  # a manifest names the run vLLM serves it as: never a flag-looking or path-like name
    step: int = Field(ge=0)
    base_model: str
    weights_sha256: str = Field(
        pattern=r"^[0-9a-f]{64}$", description="sha256 over the weight files, in name order"
    )
    weight_files: list[str] = Field(min_length=1)
    commit: str
    curriculum_level: int = Field(ge=1, le=100)
    created_at: str
    dtype: str | None = Field(None, description="floating dtype of the weight files (None: not recorded)")
    enable_thinking: bool | None = Field(None, description=(
        "the chat-template thinking mode the policy trained in, which serving uses by default "
        "(None: not recorded; serving then needs --enable-thinking or --no-enable-thinking)"))
    files: dict[str, CheckpointFile] | None = Field(None, description=(
        "every file of the folder but this manifest, by path inside it: the config and tokenizer decide what is "
        "served as much as the weights (None: not recorded, a checkpoint from before contract 1.6)"))


class EvalPassManifest(BaseModel):
    """`volumes/results/<run>/passes/step_NNNN_pass_P/manifest.json`: everything that produced the rows."""

    model_config = ConfigDict(allow_inf_nan=False)

    contract_version: str
    run: str
    step: int = Field(ge=0)
    pass_index: int = Field(ge=1)
    checkpoint: CheckpointManifest | None = Field(
        None, description="absent only for a base model not trained here"
    )
    weights_sha256: str | None = None
    served_model: str
    base_url: str
    base_model: str | None = Field(None, description="what was served when `checkpoint` is absent (an untrained base model)")
    registry_key: str | None = Field(None, description="the key bfcl-eval filed results under")
    served_max_model_len: int | None = Field(None, description="the server's context window, when it reports one")
    served_enable_thinking: bool | None = Field(None, description=(
        "the chat-template thinking mode the server applied, observed from its rendering of a prompt (None: "
        "not observed; `checkpoint.enable_thinking` is what the policy trained in)"))
    probe_forced_call: str | None = Field(None, description="how the preflight's forced call was made and came back")
    bfcl_eval_version: str
    handler: str = Field(description="how BFCL talks to the server, e.g. OpenAICompletionsHandler (chat, FC)")
    categories: list[str]
    sample_size: int | None = None
    sample_seed: int | None = None
    sample_ids: dict[str, list[str]] = Field(default_factory=dict)
    threads: int = Field(ge=1)
    max_tokens: int | None = Field(None, description="output cap of every request (absent: none was sent)")
    sizing: str | None = Field(None, description="where the derived sizes came from (toolcanary.evaluate.sizing)")
    temperature: float
    overlong_counted_wrong: bool
    overlong_items: dict[str, list[str]] = Field(default_factory=dict)
    truncated_items: dict[str, list[str]] = Field(
        default_factory=dict, description="items with a response cut at max_tokens: counted wrong")
    truncated_bfcl_correct: dict[str, list[str]] = Field(
        default_factory=dict, description="of those, the ones BFCL's own scoring would have counted correct")
    answer_kinds: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="per category, how many items got each kind of answer (calls, "
                                          "unparsed_call, text, empty; toolcanary.evaluate.answers); items not "
                                          "classified (results of an older client) are left out")
    unparsed_credit_items: dict[str, list[str]] = Field(
        default_factory=dict, description="per category, the items BFCL counted correct whose answer held call "
                                          "markup the server did not parse: kept in `correct`, counted in "
                                          "`correct_unparsed`")
    error_counts: dict[str, int] = Field(default_factory=dict)
    timings_s: dict[str, float] = Field(default_factory=dict)
    started_at: str
    finished_at: str | None = None


# A manifest lists a checkpoint's files with their sizes and hashes: a few KiB, under 1 MiB for thousands of
# shards. Anything larger is not a manifest, and parsing it would stall the reader.
CHECKPOINT_MANIFEST_MAX_BYTES = 1 << 20


def read_checkpoint_manifest(folder: str | Path) -> CheckpointManifest:
    """Load and check a checkpoint's manifest, including that its weight files are there.

    Raises:
        ContractError: no manifest, an incomplete one, or weight files missing.
    """
    folder = Path(folder)
    path = folder / CHECKPOINT_MANIFEST
    if not path.is_file():
        raise ContractError(
            str(folder),
            f"a published checkpoint with {CHECKPOINT_MANIFEST}",
            "no manifest",
            "The checkpoint is still being written or was never published; wait for published.jsonl to list it",
        )
    size = path.stat().st_size
    if size > CHECKPOINT_MANIFEST_MAX_BYTES:
        raise ContractError(str(path), f"a checkpoint manifest of at most {CHECKPOINT_MANIFEST_MAX_BYTES} bytes",
                            f"{size} bytes", "Republish the checkpoint; this file is not one the trainer wrote")
    try:
        manifest = CheckpointManifest.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, ValidationError, UnicodeDecodeError, RecursionError) as err:
        raise ContractError(str(path), "a complete checkpoint manifest (UTF-8 JSON)",
                            f"an invalid one ({type(err).__name__}: {str(err)[:500]})",
                            "Republish the checkpoint") from None
    for name in manifest.weight_files:
        _check_weight_file(folder, name)
    missing = [name for name in manifest.weight_files if not (folder / name).is_file()]
    if missing:
        raise ContractError(str(folder), f"weight files {manifest.weight_files}", f"{missing} missing")
    return manifest


def _check_weight_file(folder: Path, name: str) -> None:
    """A weight file is a plain name inside the checkpoint folder: not absolute, no `..`, no link."""
    parts = PurePosixPath(name).parts
    outside = (not name or "\\" in name or "\x00" in name or PurePosixPath(name).is_absolute()
               or any(part in ("..", ".") for part in parts))
    if outside:
        raise ContractError(f"{folder / CHECKPOINT_MANIFEST}: weight_files", "file names inside the checkpoint "
                            "folder (no absolute path, no '..')", repr(name), "Republish the checkpoint")
    current = folder
    for part in parts:
        current = current / part
        if current.is_symlink():
            raise ContractError(f"{folder / CHECKPOINT_MANIFEST}: weight_files", "plain files, not links",
                                f"{name!r} is a link to {current.readlink()}",
                                "Republish the checkpoint with its weights copied in")


def weights_sha256(folder: str | Path, files: list[str]) -> str:
    """sha256 over the weight files' bytes, in name order (what `CheckpointManifest.weights_sha256` holds)."""
    digest = hashlib.sha256()
    for name in sorted(files):
        with (Path(folder) / name).open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def checkpoint_files(folder: str | Path) -> dict[str, CheckpointFile]:
    """Size and sha256 of every file under `folder` but its manifest, by path inside it (what the publisher
    records in `CheckpointManifest.files`).

    Raises:
        ContractError: something under it that is no regular file (a link, a FIFO): it is never served.
    """
    folder, found = Path(folder), {}
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if path.is_dir() and not path.is_symlink():
            continue
        if path.is_symlink() or not path.is_file():
            raise ContractError(str(path), "regular files only in a checkpoint folder", "a link or a special file",
                                "Republish the checkpoint with its files copied in")
        if name == CHECKPOINT_MANIFEST:
            continue
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        found[name] = CheckpointFile(size=path.stat().st_size, sha256=digest.hexdigest())
    return found


def verify_checkpoint(folder: str | Path, published_sha256: str | None = None) -> CheckpointManifest:
    """The manifest, after hashing the folder on disk again: the weights must match the manifest and, when given,
    the `weights_sha256` that published.jsonl announced; every file the manifest lists must be there with its
    size and sha256, and no other.

    Raises:
        ContractError: a bad manifest or weight file name, or a file changed, added or removed after publication
            (named).
    """
    folder = Path(folder)
    manifest = read_checkpoint_manifest(folder)
    if published_sha256 is not None and manifest.weights_sha256 != published_sha256:
        raise ContractError(str(folder / CHECKPOINT_MANIFEST), f"weights_sha256 {published_sha256} as published",
                            manifest.weights_sha256, "The checkpoint was modified after publishing; republish it")
    # File by file first, so that a changed file is named; then the weights digest (all a manifest from
    # before contract 1.6 has).
    if manifest.files is not None:
        found = checkpoint_files(folder)
        changed = sorted(set(found) ^ set(manifest.files)) or sorted(
            name for name in found if found[name] != manifest.files[name])
        if changed:
            name = changed[0]
            state = ("not listed in the manifest" if name not in manifest.files else "missing" if name not in found
                     else f"{found[name].size} bytes, sha256 {found[name].sha256[:12]}... where the manifest says "
                          f"{manifest.files[name].size} bytes, sha256 {manifest.files[name].sha256[:12]}...")
            raise ContractError(str(folder / name), "the file as published", state,
                                "The checkpoint was modified after publishing; republish it")
    actual = weights_sha256(folder, manifest.weight_files)
    if actual != manifest.weights_sha256:
        raise ContractError(str(folder), f"weights with sha256 {manifest.weights_sha256}", actual,
                            "The checkpoint was modified after publishing; republish it")
    return manifest


class PublishedCheckpoint(BaseModel):
    """One line of `<checkpoints>/<run>/published.jsonl`: a checkpoint folder that is whole."""

    model_config = ConfigDict(frozen=True)

    step: int = Field(ge=0)
    path: str = Field(description="the checkpoint folder, relative to the folder holding published.jsonl")
    weights_sha256: str = Field(min_length=1, description="the checkpoint manifest's weights_sha256")


def read_published(folder: str | Path) -> list[PublishedCheckpoint]:
    """Every checkpoint `folder/published.jsonl` announces, in file order (none when there is no ledger).

    The append-only rule, the same for every reader: a torn last line (the trainer is writing it, or was killed
    there) and torn lines a later append fenced off are skipped with a warning; any other line that is not a
    whole `PublishedCheckpoint` was cut or edited, and is refused with its number.

    Raises:
        ContractError: a broken line that no writer fenced off.
    """
    ledger = Path(folder) / PUBLISHED
    entries = []
    for number, line in iter_lines(ledger):
        try:
            entries.append(PublishedCheckpoint.model_validate_json(line))
        except ValidationError:
            raise refused_line(ledger, number, 'a JSON object {"step": N, "path": "...", "weights_sha256": "..."}',
                               line) from None
    return entries


def append_published(folder: str | Path, entry: PublishedCheckpoint) -> None:
    """Append one line to `folder/published.jsonl`; the run's one trainer process is its only writer."""
    # json.dumps keeps the spaced layout the ledger has always had, so older ledgers and new lines look alike.
    append_text(Path(folder) / PUBLISHED, json.dumps(entry.model_dump()) + "\n")


def verify_as_published(folder: str | Path) -> CheckpointManifest:
    """`verify_checkpoint` against what the run's ledger (`published.jsonl` beside the folder) announced for it,
    when it announced it (a folder copied elsewhere has no ledger: its own manifest is the reference)."""
    folder = Path(folder)
    announced = [e.weights_sha256 for e in read_published(folder.parent)
                 if (folder.parent / e.path).resolve() == folder.resolve()]
    return verify_checkpoint(folder, announced[-1] if announced else None)
