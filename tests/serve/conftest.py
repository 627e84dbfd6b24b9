"""Helpers of the serve suite's tests: a policy folder made a published checkpoint.

Run: .venvs/serve/bin/python -m pytest tests/serve -q
"""

import hashlib
import json
import sys
from pathlib import Path

from toolcanary.contract import CONTRACT_VERSION

sys.path.insert(0, str(Path(__file__).parent))
REPO = Path(__file__).resolve().parents[2]


def with_manifest(folder: Path, step: int, base_model: str, enable_thinking: bool | None = True) -> Path:
    """Give a policy folder the manifest a published checkpoint carries."""
    digest = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    manifest = dict(
        contract_version=CONTRACT_VERSION, run="served", step=step, base_model=base_model, weights_sha256=digest,
        weight_files=["model.safetensors"], commit="test", curriculum_level=1, created_at="2026-01-01T00:00:00Z",
        enable_thinking=enable_thinking,
    )
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder
