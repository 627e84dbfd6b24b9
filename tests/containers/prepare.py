"""Build the container suite's images ahead of it, so that `make test` overlaps the builds with other suites.

Starts the engine (engine.py), gets the base image and the CPU torch wheelhouse, and builds every CPU image
in a fresh copy of the project with the same build arguments the suite's copies get (project.image_lines).
The suite's own builds then come from the layer cache. It asserts nothing: a failure here only means the
suite builds for itself, and reports what went wrong there. scripts/run_tests.sh starts it in the background
when the containers suite is among those it runs, and waits for it before that suite.

Run: .venvs/dev/bin/python tests/containers/prepare.py   (prints one line per step)
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from engine import Engine, python_base, serve_wheels  # noqa: E402
from project import BUILT, Project, build_images, checkout_copy, configure, image_lines  # noqa: E402


def main() -> int:
    started = time.monotonic()
    # run_tests.sh ends it with SIGTERM when it stops early: exit through `finally`, which stops the engine.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    def say(what: str) -> None:
        print(f"{time.monotonic() - started:7.1f} s  {what}", flush=True)

    engine = Engine.start()
    copy = Path(tempfile.mkdtemp(prefix="tc-prepare-"))
    try:
        say(f"engine ready {engine.timings}")
        base = python_base(engine)
        say(f"base image {base} {engine.timings}")
        with serve_wheels() as wheels:
            say(f"wheelhouse {wheels}")
            # The images do not depend on who runs them: the current user owns this throwaway copy.
            project = Project(checkout_copy(copy), engine, (os.getuid(), os.getgid()), "toolcanary-prepare")
            configure(project, image_lines(base, wheels))
            build_images(project)
        say(f"built {', '.join(BUILT)} {project.timings}")
        return 0
    except Exception as error:  # noqa: BLE001 - reported, and the suite builds for itself
        say(f"stopped: {type(error).__name__}: {str(error)[-3000:]}")
        return 1
    finally:
        shutil.rmtree(copy, ignore_errors=True)
        engine.stop()


if __name__ == "__main__":
    sys.exit(main())
