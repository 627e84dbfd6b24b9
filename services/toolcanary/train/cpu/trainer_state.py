"""The trainer's own resumable state: fp32 policy weights, optimizer, curriculum, RNGs, next step.

Saved beside every published checkpoint under `<runs>/<run>/trainer/state_NNNN.pt` (atomically: a
temporary file, fsync, rename), so a restarted run continues at the same curriculum level with the same
optimizer moments. The published folder holds only what a server needs; this file holds the rest. The file
holds only tensors and plain values (dicts, lists, tuples, numbers, strings), and is loaded with
`torch.load(weights_only=True)`, so a crafted state file cannot run code.

    save_state(folder, step=10, policy=model, optimizer=opt, curriculum=cur, rng=rng)
    state = latest_state(folder)
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

import torch

from toolcanary.contract.errors import ContractError
from toolcanary.train.curriculum import Curriculum

_STATE = re.compile(r"^state_(\d{4,})\.pt$")


MAX_STEP = 100_000  # far beyond any run here (a GPU run has 200 steps)


def save_state(folder: Path, *, step: int, policy, optimizer, curriculum: Curriculum, rng: random.Random,
               extra: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"state_{step:04d}.pt"
    tmp = folder / f".state_{step:04d}.pt.tmp-{os.getpid()}"
    torch.save({
        "step": step, "policy": policy.state_dict(), "optimizer": optimizer.state_dict(),
        "curriculum": curriculum.state_dict(), "python_rng": rng.getstate(), "torch_rng": torch.get_rng_state(),
        "extra": json.loads(json.dumps(extra or {})),  # plain values only: the file is loaded weights_only
    }, tmp)
    with tmp.open("rb") as handle:
        os.fsync(handle.fileno())
    os.rename(tmp, final)
    return final


def latest_state(folder: Path) -> Path | None:
    """The newest state file; a name that matches but is no regular file (a FIFO would hang the load) is refused.

    Raises:
        ContractError: the newest matching name is not a regular file.
    """
    if not folder.exists():
        return None
    found = sorted((int(m.group(1)), p) for p in folder.iterdir() if (m := _STATE.match(p.name)))
    if found and (found[-1][1].is_symlink() or not found[-1][1].is_file()):
        raise ContractError(str(found[-1][1]), "a regular file written by this trainer", "something else (a link, "
                            "a FIFO, a folder)", "Remove it; the trainer resumes from the newest regular state file")
    return found[-1][1] if found else None


def load_state(path: Path, *, policy, optimizer, curriculum: Curriculum, rng: random.Random) -> dict:
    """Restore everything in place and return the saved dict (its `step` is the last finished step)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many types for a torn, foreign or crafted file
        raise ContractError(str(path), "a trainer state written by this trainer (tensors and plain values only)",
                            f"{type(err).__name__}: {str(err)[:500]}",
                            "Delete it to resume from the previous state; never resume from a state file of "
                            "unknown origin") from None
    if not isinstance(state, dict) or not {"step", "policy", "optimizer", "curriculum", "python_rng",
                                           "torch_rng"} <= state.keys():
        raise ContractError(str(path), "a trainer state dict with step, policy, optimizer, curriculum and RNGs",
                            type(state).__name__ if not isinstance(state, dict) else f"keys {sorted(state)}",
                            "Delete it to resume from the previous state")
    # Checked before anything is restored: a resume deletes the rows and episodes after the state's step.
    step, named = state["step"], int(_STATE.match(path.name).group(1)) if _STATE.match(path.name) else None
    if type(step) is not int or not 0 < step <= MAX_STEP or (named is not None and step != named):
        raise ContractError(f"{path}: step", f"the step its name says ({named}), an integer from 1 to {MAX_STEP}",
                            repr(step)[:100], "Delete it to resume from the previous state")
    policy.load_state_dict(state["policy"])
    optimizer.load_state_dict(state["optimizer"])
    curriculum.load_state_dict(state["curriculum"])
    rng.setstate(state["python_rng"])
    torch.set_rng_state(state["torch_rng"])
    return state
