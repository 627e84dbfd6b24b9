"""A stand-in for `python -m vllm.entrypoints.openai.api_server`, for tests of start-simulator.sh.

It accepts vLLM's flags, listens on --host/--port and behaves as FAKE_VLLM_MODE says:
  healthy        GET /health answers 200, GET /v1/models lists --served-model-name (the default)
  never-healthy  GET /health answers 503, forever
  exit:N         exits with status N before it listens (vLLM failing during start-up)
It writes its pid to FAKE_VLLM_PIDFILE (so a test can kill it) and, when FAKE_VLLM_ARGV names a file, the
arguments and the VLLM_* environment it was started with, as JSON, before anything else (so a test can read
the command line the script built, whatever the mode). It stops cleanly on SIGTERM, as vLLM does.

    FAKE_VLLM_MODE=never-healthy PYTHONPATH=tests/simulator/fake_vllm \\
        python -m vllm.entrypoints.openai.api_server --host 127.0.0.1 --port 8200 --served-model-name simulator
"""

import argparse
import json
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> int:
    parser = argparse.ArgumentParser(prog="fake vllm api_server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--served-model-name", default="model")
    args, _ = parser.parse_known_args()  # every other vLLM flag is accepted and ignored
    if os.environ.get("FAKE_VLLM_ARGV"):
        with open(os.environ["FAKE_VLLM_ARGV"], "w") as handle:
            json.dump({"argv": sys.argv[1:], "env": {k: v for k, v in os.environ.items() if k.startswith("VLLM_")}},
                      handle)
    mode = os.environ.get("FAKE_VLLM_MODE", "healthy")
    if os.environ.get("FAKE_VLLM_PIDFILE"):
        with open(os.environ["FAKE_VLLM_PIDFILE"], "w") as handle:
            handle.write(str(os.getpid()))
    if mode.startswith("exit:"):
        print(f"fake vllm: failing at start-up with status {mode[5:]}", file=sys.stderr)
        return int(mode[5:])
    if mode not in ("healthy", "never-healthy"):
        print(f"fake vllm: FAKE_VLLM_MODE must be healthy, never-healthy or exit:N, got {mode!r}", file=sys.stderr)
        return 2

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path == "/health":
                self.reply(200 if mode == "healthy" else 503, b"")
            elif self.path == "/v1/models":
                self.reply(200, json.dumps({"object": "list", "data": [{"id": args.served_model_name}]}).encode())
            else:
                self.reply(404, b'{"detail": "Not Found"}')

        def reply(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"fake vllm: {mode} on {args.host}:{args.port}", file=sys.stderr, flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
