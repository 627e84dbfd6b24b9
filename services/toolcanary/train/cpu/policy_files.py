"""What every CPU policy builder writes the same way: the packaged chat template and small JSON edits.

Both `tiny_policy` and `smollm2_policy` import these from here, so neither imports the other.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path


def chat_template_text() -> str:
    return resources.files("toolcanary.train.cpu").joinpath("chat_template.jinja").read_text()


def patch_json(path: Path, **updates) -> None:
    data = json.loads(path.read_text())
    data.update(updates)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
