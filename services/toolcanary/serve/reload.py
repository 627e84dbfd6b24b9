"""Loading another checkpoint of the same run into a running vLLM server, in place: the worker side.

`python -m toolcanary.serve --reloadable` starts vLLM with this class as its worker extension
(`--worker-extension-cls`) and with vLLM's development endpoints on (`VLLM_SERVER_DEV_MODE=1`: `/collective_rpc`,
`/reset_prefix_cache`). The evaluation then calls `load_run_checkpoint` through `/collective_rpc`
(`toolcanary.evaluate.serving.ReloadingServing`) instead of starting a server per checkpoint.

The worker only loads a folder beside the one it was started with (another step of the same run, whatever the
checkpoints root is called inside a container), and only once its manifest and weights hash as published, as
`python -m toolcanary.serve` checks before it serves. It answers with what it loaded, so that the client can
check the step and the weights' hash against the run's ledger. The weights are read by vLLM's own
`Worker.reload_weights`, in place, with the model's shapes, parallel layout and tokenizer kept: only a checkpoint
of the same policy can be loaded this way, as every step of a run is.
"""

from __future__ import annotations

from pathlib import Path

from toolcanary.contract.manifests import verify_as_published

LOAD_METHOD = "load_run_checkpoint"
"""The worker method's name, as `/collective_rpc` is told it."""


class CheckpointReload:
    """Mixed into vLLM's worker class; `self` is the worker (its `vllm_config` and `reload_weights`)."""

    def load_run_checkpoint(self, name: str) -> dict:
        started_with = Path(self.vllm_config.model_config.model)
        if Path(name).name != name or name in ("", ".", ".."):
            raise ValueError(f"expected the name of a checkpoint folder beside {started_with}, got {name!r}")
        folder = started_with.parent / name
        manifest = verify_as_published(folder)  # the score must belong to the model the manifest describes
        self.reload_weights(weights_path=str(folder))
        return {"path": str(self.vllm_config.model_config.model), "step": manifest.step, "run": manifest.run,
                "weights_sha256": manifest.weights_sha256}
