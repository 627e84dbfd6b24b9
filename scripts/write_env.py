"""Write .env from .env.example with the invoking user's ids filled in (`make env`); never overwrite a .env.

The stack runs every container as TOOLCANARY_UID:TOOLCANARY_GID so that what the containers write under
volumes/ belongs to the user who runs it. This script fills those two in with `id -u` / `id -g`. When the
.env already exists it is left untouched and checked instead: a missing id, or a variable the stack no longer
reads (e.g. TRAINER_GPUS, replaced by one variable per GPU), is reported with the exact line to write, and
the exit status is 1. `--check` only checks (exit 0 when there is no .env yet: Compose reports what it needs).

`--make-dirs` (what `make up` adds) then creates the host folders the train profile mounts writable, as the
invoking user: Docker would create a missing bind-mount source as root, and the containers, which run as that
user, could not write it. RUN and MODEL_CACHE are read as Compose reads them: the environment first, then the
env file. A folder that exists but that the user cannot write is reported with the command that fixes it.

A multi-node run: NNODES and GPUS_PER_NODE (read the same way) are checked with every check, `--ray-worker` (what
`make ray-worker` adds) also needs RAY_HEAD_ADDRESS, and `--compose-file` prints the COMPOSE_FILE=... assignment
the Makefile hands to Compose when NNODES > 1 (the files Compose would read, plus compose.multinode.yaml, which
puts the trainer on the host network as the Ray head), nothing on one node.

Run: python3 scripts/write_env.py [--out .env] [--example .env.example] [--uid N] [--gid N] [--check] [--make-dirs]
     python3 scripts/write_env.py --get NAME
                                  [--ray-worker] [--compose-file]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = """examples:
  python3 scripts/write_env.py                   # what `make env` runs: .env from .env.example, your ids
  python3 scripts/write_env.py --check           # report problems of an existing .env, change nothing
  python3 scripts/write_env.py --get RUN         # RUN as Compose reads it (the make targets' default run)
  python3 scripts/write_env.py --check --make-dirs   # what `make up` runs: check, then create the mounted folders
  python3 scripts/write_env.py --out ci.env --uid 1000 --gid 1000
  RAY_HEAD_ADDRESS=10.0.0.1 python3 scripts/write_env.py --check --make-dirs --ray-worker   # `make ray-worker HEAD=10.0.0.1`
  NNODES=2 python3 scripts/write_env.py --compose-file   # COMPOSE_FILE=compose.yaml:compose.multinode.yaml
"""
# Variables the stack once read and no longer does: setting them changes nothing, which must not pass silently.
RETIRED = {
    "TRAINER_GPUS": "one id per variable: TRAINER_GPU_0=0 ... TRAINER_GPU_3=3",
    "SIMULATOR_GPUS": "one id per variable: SIMULATOR_GPU_0=4 ... SIMULATOR_GPU_3=7",
}
# The host folders the train profile (compose.yaml, and compose.cpu.yaml on top of it) bind-mounts writable,
# relative to the project folder: {run} is RUN, {cache} is MODEL_CACHE. tests/stack/test_mounts.py checks that
# this is exactly what Compose resolves for the simulator and the trainer.
STACK_FOLDERS = (
    "volumes/checkpoints", "volumes/results",
    "volumes/runs/{run}/simulator",                                                 # the simulator's records
    "volumes/runs/{run}/data", "volumes/runs/{run}/trainer", "volumes/runs/{run}/verl",  # the trainer's
    "{cache}/simulator", "{cache}/train",                                          # one model cache each
)
DEFAULT_CACHE = "./volumes/cache"
# The trainer's GPU reservation in compose.yaml (TRAINER_GPU_0..3, the ray-worker's too): Ray may hand out no more.
RESERVED_TRAINER_GPUS = 4
# Added to the Compose files when NNODES > 1: the trainer on the host network, as the Ray head.
MULTINODE_FILE = "compose.multinode.yaml"
# A host name or IP address alone: Ray's port is RAY_PORT, and a URL scheme is not part of Ray's address.
HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*$")
# toolcanary.contract.run_id's rule (this script runs on the host, without the services' packages).
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
ASSIGNMENT = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)$")


def assignments(text: str) -> dict[str, str]:
    """NAME -> value of each uncommented `NAME=value` line (quotes and trailing comments removed)."""
    values = {}
    for line in text.splitlines():
        match = ASSIGNMENT.match(line)
        if match:
            raw = match.group(2).strip()
            if raw[:1] in "\"'" and raw[-1:] == raw[:1] and len(raw) > 1:
                raw = raw[1:-1]
            else:
                raw = raw.split(" #", 1)[0].strip()
            values[match.group(1)] = raw
    return values


def fill_ids(example: str, uid: int, gid: int) -> str:
    """The example's text with its TOOLCANARY_UID= and TOOLCANARY_GID= lines set to the given ids."""
    text = example
    for name, value in (("TOOLCANARY_UID", uid), ("TOOLCANARY_GID", gid)):
        text, count = re.subn(rf"^{name}=.*$", f"{name}={value}", text, flags=re.M)
        if count != 1:
            raise SystemExit(f"error: the example env file should have exactly one '{name}=' line, found {count}; "
                             "restore it from git")
    return text


def problems(env_text: str, uid: int, gid: int) -> list[str]:
    """What an existing .env lacks or still sets, each with the line that fixes it."""
    values = assignments(env_text)
    found = []
    for name, value in (("TOOLCANARY_UID", uid), ("TOOLCANARY_GID", gid)):
        if not values.get(name):
            found.append(f"{name} is not set: add the line {name}={value} (the containers run as this "
                         "user, so what they write under volumes/ is yours)")
    for name, instead in RETIRED.items():
        if name in values:
            found.append(f"{name} is no longer read (the stack would silently use its defaults): remove it and set "
                         f"{instead}")
    return found


def node_problems(env_text: str | None, ray_worker: bool = False) -> list[str]:
    """What stops a multi-node run (or a node of one): counts that are no counts, more GPUs than the trainer's
    reservation lets a container see, and, for a worker node, no head to join. Each with its fix."""
    found = []
    nodes = compose_value("NNODES", env_text)
    if nodes and not (nodes.isdigit() and int(nodes) >= 1):
        found.append(f"NNODES={nodes!r} is not a number of nodes: set NNODES=1 for one node, or the number of nodes "
                     "(this one included) of a multi-node run")
    gpus = compose_value("GPUS_PER_NODE", env_text)
    if gpus and not (gpus.isdigit() and 1 <= int(gpus) <= RESERVED_TRAINER_GPUS):
        found.append(f"GPUS_PER_NODE={gpus!r} is not 1-{RESERVED_TRAINER_GPUS}: compose.yaml lets the trainer (and "
                     f"each ray-worker) see the {RESERVED_TRAINER_GPUS} GPUs TRAINER_GPU_0..3 name, and Ray may hand "
                     "out only GPUs its container sees")
    if ray_worker:
        head = compose_value("RAY_HEAD_ADDRESS", env_text)
        if not head:
            found.append("RAY_HEAD_ADDRESS is not set: run make ray-worker HEAD=<the head node's address> (or add "
                         "RAY_HEAD_ADDRESS=<address> to this node's .env)")
        elif not HOST.match(head):
            found.append(f"RAY_HEAD_ADDRESS={head!r} is not a host address: give the head node's IP address or host "
                         "name alone (its port is RAY_PORT, 6379 unless set)")
    return found


def compose_file(env_text: str | None, root: Path = ROOT) -> str | None:
    """COMPOSE_FILE for a multi-node run (NNODES > 1): the files Compose would read, then MULTINODE_FILE;
    None on one node (or when NNODES is no count: the check reports it)."""
    nodes = compose_value("NNODES", env_text)
    if not nodes.isdigit() or int(nodes) <= 1:
        return None
    separator = compose_value("COMPOSE_PATH_SEPARATOR", env_text) or os.pathsep
    configured = compose_value("COMPOSE_FILE", env_text)
    # Compose's own default when COMPOSE_FILE is unset: compose.yaml, and compose.override.yaml when present.
    files = configured.split(separator) if configured else [
        "compose.yaml", *(["compose.override.yaml"] if (root / "compose.override.yaml").is_file() else [])]
    return separator.join(files if MULTINODE_FILE in files else [*files, MULTINODE_FILE])


def compose_value(name: str, env_text: str | None) -> str:
    """NAME as Compose interpolates it: the environment wins over the env file; "" when set in neither."""
    if name in os.environ:
        return os.environ[name]
    return assignments(env_text).get(name, "") if env_text is not None else ""


def stack_folders(env_text: str | None, root: Path = ROOT) -> list[Path]:
    """The folders of STACK_FOLDERS for this RUN and MODEL_CACHE (the run's own ones only when RUN is set)."""
    run = compose_value("RUN", env_text)
    cache = os.path.expanduser(os.path.expandvars(compose_value("MODEL_CACHE", env_text) or DEFAULT_CACHE))
    if run and not RUN_ID.fullmatch(run):
        raise ValueError(f"RUN={run!r} is not a run id: 1-100 letters, digits, '.', '_' or '-', starting with a "
                         "letter or digit")
    # Without RUN, Compose stops and says so; the other folders are made all the same.
    chosen = [f for f in STACK_FOLDERS if run or "{run}" not in f]
    return [root / f.format(run=run, cache=cache) for f in chosen]


def make_dirs(env_text: str | None, root: Path = ROOT) -> list[str]:
    """Create the stack's folders that are missing; what is still wrong, each with its fix."""
    try:
        folders = stack_folders(env_text, root)
    except ValueError as err:
        return [str(err)]
    found = []
    for folder in folders:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            found.append(f"cannot create {folder} ({err.strerror}); create it as the user who runs the stack")
            continue
        if not os.access(folder, os.W_OK | os.X_OK):
            found.append(f"{folder} is not writable by you, so neither by the containers, which run as you: "
                         f"sudo chown -R {os.getuid()}:{os.getgid()} {folder}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 scripts/write_env.py", description=__doc__.splitlines()[0],
                                     epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / ".env", help="the env file to write (default: .env)")
    parser.add_argument("--example", type=Path, default=ROOT / ".env.example",
                        help="the documented template (default: .env.example)")
    parser.add_argument("--uid", type=int, default=os.getuid(), help="user id (default: yours, %(default)s)")
    parser.add_argument("--gid", type=int, default=os.getgid(), help="group id (default: yours, %(default)s)")
    parser.add_argument("--check", action="store_true", help="only check an existing env file; write nothing")
    parser.add_argument("--make-dirs", action="store_true",
                        help="then create the host folders the train profile mounts (volumes/runs/<RUN>/..., "
                             "MODEL_CACHE/simulator and /train), as you, so that Docker does not create them as root")
    parser.add_argument("--ray-worker", action="store_true",
                        help="also require what a further node of a multi-node run needs: RAY_HEAD_ADDRESS")
    parser.add_argument("--compose-file", action="store_true",
                        help="only print COMPOSE_FILE=<files> for a multi-node run (NNODES > 1): the files Compose "
                             f"would read plus {MULTINODE_FILE}; nothing on one node")
    parser.add_argument("--get", metavar="NAME",
                        help="only print NAME as Compose reads it (the environment, else the env file; empty when "
                             "neither sets it): how the host-side make targets find .env's RUN")
    args = parser.parse_args(argv)
    if args.get:
        print(compose_value(args.get, args.out.read_text() if args.out.exists() else None))
        return 0
    if args.compose_file:
        files = compose_file(args.out.read_text() if args.out.exists() else None)
        if files:
            print(f"COMPOSE_FILE={files}")
        return 0
    status = write_or_check(args)
    if status == 0:
        found = node_problems(args.out.read_text() if args.out.exists() else None, ray_worker=args.ray_worker)
        for problem in found:
            print(f"nodes: {problem}", file=sys.stderr)
        status = 1 if found else 0
    if status == 0 and args.make_dirs:
        found = make_dirs(args.out.read_text() if args.out.exists() else None)
        for problem in found:
            print(f"make-dirs: {problem}", file=sys.stderr)
        status = 1 if found else 0
    return status


def write_or_check(args: argparse.Namespace) -> int:
    """Write the env file, or check the existing one; the exit status."""
    if args.out.exists():
        found = problems(args.out.read_text(), args.uid, args.gid)
        if args.check:
            # make targets pass the ids themselves: only what they cannot fix is an error here.
            found = [p for p in found if not p.startswith(("TOOLCANARY_UID", "TOOLCANARY_GID"))]
        for problem in found:
            print(f"{args.out}: {problem}", file=sys.stderr)
        if found:
            print(f"{args.out} was left unchanged: edit it as above (or move it away and run `make env` again)",
                  file=sys.stderr)
            return 1
        if not args.check:
            print(f"{args.out} exists and was left unchanged")
        return 0
    if args.check:
        return 0
    text = fill_ids(args.example.read_text(), args.uid, args.gid)
    try:
        # "x": never overwrite, even a .env created a moment ago; 0600: it holds the simulator's token.
        with os.fdopen(os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
            handle.write(text)
    except FileExistsError:
        print(f"{args.out} appeared while writing it and was left unchanged", file=sys.stderr)
        return 1
    print(f"wrote {args.out} from {args.example} with TOOLCANARY_UID={args.uid} TOOLCANARY_GID={args.gid}; "
          "set RUN, the GPU ids, models and ports in it next")
    return 0


if __name__ == "__main__":
    sys.exit(main())
