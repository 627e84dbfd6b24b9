"""A Docker engine for the container tests, a base image when the public registry is out of reach, and the
CPU torch wheel the CPU images need.

- `Engine.start()` uses the engine the environment points at when one answers; otherwise it installs Debian's
  docker.io when dockerd is missing (root only) and starts dockerd for the run: a data root of its own under
  build/containers/ (kept between runs, so a second run reuses the layers), overlay2, and
  --bridge=none --iptables=false --ip-masq=false, so the host's network and firewall stay untouched. `stop()`
  ends a dockerd it started. The Compose plugin is the pinned Compose v2 binary of the dev environment.
- `python_base(engine)` is python:3.11.11-slim-bookworm when the engine has it or can pull it; otherwise a
  stand-in built here and tagged toolcanary/base-python:3.11 (never the official name): Debian bookworm from
  debootstrap, plus the CPython 3.11 that runs the tests (its installation, at the same path, with an empty
  site-packages and ensurepip's pip) and this machine's CA bundle, which package downloads need where
  HTTPS is re-signed.
- `cpu_torch_wheelhouse()` is a folder with torch's CPU build when pip can find it here (it is not on PyPI).

    engine = Engine.start(); base = python_base(engine); ...; engine.stop()
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import compose

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "build" / "containers"
COMPOSE_BINARY = Path(compose.__file__).parent / "docker-compose"
OFFICIAL_BASE = "python:3.11.11-slim-bookworm"
STAND_IN_BASE = "toolcanary/base-python:3.11"
# What bookworm's python3.11 links beyond debootstrap's minimal base (the official image ships them too).
STAND_IN_PACKAGES = ("ca-certificates", "libsqlite3-0", "libreadline8", "libncursesw6", "libnsl2", "libtirpc3",
                     "libffi8", "libbz2-1.0", "liblzma5", "zlib1g", "libssl3", "libuuid1", "netbase")
CPU_TORCH = "torch==2.13.0+cpu"


class EngineError(RuntimeError):
    """The engine or an image could not be had; the message says what to do."""


def run(command: list[str], *, env: dict | None = None, timeout: float = 600, check: bool = True,
        **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, **kwargs)
    if check and done.returncode != 0:
        raise EngineError(f"`{' '.join(command)}` exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done


def apt_install(*packages: str) -> None:
    """Debian's packages, reading the package lists first when a fresh machine has none (or stale ones)."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    command = ["apt-get", "install", "-y", "-q", *packages]
    if run(command, env=env, timeout=900, check=False).returncode != 0:
        run(["apt-get", "update", "-q"], env=env, timeout=600)
        run(command, env=env, timeout=900)


@dataclass
class Engine:
    """The Docker engine the tests talk to, and the environment every docker / compose call gets."""

    env: dict
    process: subprocess.Popen | None = None
    runtime: Path | None = None  # the socket and exec root of a dockerd this run started
    log: Path | None = None
    timings: dict = field(default_factory=dict)

    @classmethod
    def start(cls) -> Engine:
        WORK.mkdir(parents=True, exist_ok=True)
        config = Path(tempfile.mkdtemp(prefix="tc-docker-config-"))
        (config / "cli-plugins").mkdir()
        (config / "cli-plugins" / "docker-compose").symlink_to(COMPOSE_BINARY)
        env = {**os.environ, "DOCKER_CONFIG": str(config), "DOCKER_BUILDKIT": "0"}
        if shutil.which("docker") and run(["docker", "info"], env=env, check=False, timeout=30).returncode == 0:
            return cls(env=env)
        started = time.monotonic()
        if not shutil.which("dockerd"):
            if os.geteuid() != 0:
                raise EngineError("no Docker engine answers and dockerd is not installed; install Docker (Debian: "
                                  "apt-get install docker.io) or point DOCKER_HOST at an engine, then rerun")
            apt_install("docker.io")
        # The socket and the exec root live in a short temporary path (a unix socket path has ~108 bytes).
        runtime = Path(tempfile.mkdtemp(prefix="tc-dockerd-"))
        log = WORK / "dockerd.log"
        command = ["dockerd", "--storage-driver=overlay2", f"--data-root={WORK / 'docker'}",
                   f"--exec-root={runtime / 'exec'}", f"--pidfile={runtime / 'dockerd.pid'}",
                   f"--host=unix://{runtime / 'docker.sock'}", "--bridge=none", "--iptables=false",
                   "--ip-masq=false"]
        with log.open("ab") as handle:
            process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
        env["DOCKER_HOST"] = f"unix://{runtime / 'docker.sock'}"
        engine = cls(env=env, process=process, log=log, runtime=runtime)
        deadline = time.monotonic() + 60
        while run(["docker", "info"], env=env, check=False, timeout=30).returncode != 0:
            if process.poll() is not None or time.monotonic() > deadline:
                engine.stop()
                raise EngineError(f"dockerd did not start (see {log}); the test needs root and overlay2")
            time.sleep(0.5)
        engine.timings["engine_start_s"] = round(time.monotonic() - started, 1)
        return engine

    def docker(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
        return run(["docker", *args], env=self.env, timeout=timeout, check=check)

    def stop(self) -> None:
        """End the dockerd this run started (and with it its containerd); leave anyone else's engine alone.

        Before that, the images a rebuild left without a tag go: each is gigabytes, and the data root is kept
        between runs for its layer cache, so they would pile up run after run."""
        shutil.rmtree(self.env["DOCKER_CONFIG"], ignore_errors=True)  # the CLI's config, made by start()
        if self.process is None or self.process.poll() is not None:
            return
        self.docker("image", "prune", "--force", timeout=300, check=False)
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        # dockerd leaves its default network namespace mounted in the exec root when it exits.
        run(["umount", "--lazy", str(self.runtime / "exec" / "netns" / "default")], check=False, timeout=60)
        shutil.rmtree(self.runtime, ignore_errors=True)


def python_base(engine: Engine) -> str:
    """The Python base image to build on: the official one if it can be had, else the local stand-in."""
    if engine.docker("image", "inspect", OFFICIAL_BASE, check=False, timeout=60).returncode == 0:
        return OFFICIAL_BASE
    label = engine.docker("image", "inspect", "-f", '{{index .Config.Labels "org.toolcanary.stand-in"}}',
                          STAND_IN_BASE, check=False, timeout=60).stdout.strip()
    if label == stand_in_recipe():
        return STAND_IN_BASE
    if engine.docker("pull", OFFICIAL_BASE, check=False, timeout=300).returncode == 0:
        return OFFICIAL_BASE
    started = time.monotonic()
    build_stand_in(engine)
    engine.timings["stand_in_base_s"] = round(time.monotonic() - started, 1)
    return STAND_IN_BASE


def debian_mirror() -> str:
    """The Debian mirror this machine's apt uses (deb822 or one-line sources), else Debian's own."""
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        text = path.read_text() if path.is_file() else ""
        found = re.search(r"^URIs:\s*(\S+)", text, flags=re.M) or re.search(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)", text,
                                                                           flags=re.M)
        if found and "security" not in found.group(1):
            return found.group(1)
    return "http://deb.debian.org/debian"


def build_stand_in(engine: Engine) -> None:
    if os.geteuid() != 0:
        raise EngineError(f"{OFFICIAL_BASE} cannot be pulled and building a stand-in needs root (debootstrap); "
                          "load the official image into the engine (docker load) and rerun")
    if not shutil.which("debootstrap"):
        apt_install("debootstrap")
    rootfs = WORK / "stand-in-rootfs"
    shutil.rmtree(rootfs, ignore_errors=True)
    run(["debootstrap", "--variant=minbase", f"--include={','.join(STAND_IN_PACKAGES)}", "bookworm", str(rootfs),
         debian_mirror()], timeout=900)
    # The interpreter that runs these tests, at the same path (its prefix is compiled in), without its packages.
    prefix = Path(sys.base_prefix)
    site = Path(sysconfig.get_paths(vars={"base": str(prefix), "platbase": str(prefix)})["purelib"])
    tar = subprocess.run(["tar", "-C", "/", "-cf", "-", f"--exclude={str(site).lstrip('/')}/*",
                          "--exclude=*/__pycache__", f"--exclude={str(prefix / 'lib' / 'python3.11' / 'test').lstrip('/')}",
                          str(prefix).lstrip("/")], capture_output=True, check=True)
    subprocess.run(["tar", "-C", str(rootfs), "-xf", "-"], input=tar.stdout, check=True)
    for parent in (prefix, *prefix.parents):  # every user the stack runs as must reach the interpreter
        target = rootfs / parent.relative_to("/")
        if target.is_dir():
            target.chmod(target.stat().st_mode | 0o755)
    for name in ("python3", "python", "pip3", "pip"):
        link = rootfs / "usr" / "local" / "bin" / name
        link.unlink(missing_ok=True)
        link.symlink_to(prefix / "bin" / ("python3" if name.startswith("python") else "pip3"))
    run(["chroot", str(rootfs), str(prefix / "bin" / "python3"), "-m", "ensurepip", "--default-pip"], timeout=300)
    bundle = Path(ssl.get_default_verify_paths().cafile or "/etc/ssl/certs/ca-certificates.crt")
    shutil.copy(bundle, rootfs / "etc" / "ssl" / "certs" / "ca-certificates.crt")
    changes = [*stand_in_config(), f"LABEL org.toolcanary.stand-in={stand_in_recipe()}"]
    archive = subprocess.run(["tar", "-C", str(rootfs), "-cf", "-", "."], capture_output=True, check=True).stdout
    command = ["docker", "import", *[a for c in changes for a in ("--change", c)], "-", STAND_IN_BASE]
    subprocess.run(command, input=archive, env=engine.env, capture_output=True, check=True, timeout=600)
    shutil.rmtree(rootfs, ignore_errors=True)


def stand_in_config() -> list[str]:
    """The image configuration of the stand-in: like the official image, pip's installs (console scripts
    included) land on PATH, here in the interpreter's own bin folder."""
    prefix = Path(sys.base_prefix)
    return [f"ENV PATH={prefix / 'bin'}:/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin",
            "ENV LANG=C.UTF-8", "ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
            "ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt",
            "ENV REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt", 'CMD ["python3"]']


def stand_in_recipe() -> str:
    """What the stand-in is built from, as a digest: a stand-in built another way is rebuilt."""
    recipe = [*STAND_IN_PACKAGES, *stand_in_config(), sys.version, str(Path(sys.base_prefix))]
    return hashlib.sha256("\n".join(recipe).encode()).hexdigest()[:16]


def cpu_torch_wheelhouse() -> Path | None:
    """A folder holding torch's CPU build, when pip finds one from here (this machine's pip configuration
    may point at a local copy); None when it cannot, and the images then use the CPU index instead."""
    folder = WORK / "wheels"
    if list(folder.glob("torch-2.13.0+cpu-*.whl")):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    done = run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(folder), CPU_TORCH],
               check=False, timeout=600)
    return folder if done.returncode == 0 and list(folder.glob("torch-*.whl")) else None


WHEELS_PORT = 18765


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # one line per pip request would bury the test's own output
        pass


@contextlib.contextmanager
def serve_wheels():
    """The URL of `cpu_torch_wheelhouse()` served on 127.0.0.1 (the image builds use the host network), or
    None when there is no wheelhouse."""
    folder = cpu_torch_wheelhouse()
    if folder is None:
        yield None
        return
    handler = functools.partial(QuietHandler, directory=str(folder))
    # The URL is a build argument of the install layers: a fixed port keeps their cache between runs.
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", WHEELS_PORT), handler)
    except OSError:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
