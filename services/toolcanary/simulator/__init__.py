"""The simulator service: one backend plays task author, tool, user and verifier behind FastAPI.

    python -m toolcanary.simulator serve --insecure --backend scripted --run demo --port 8300

`scripted` is the deterministic, model-free backend (CPU training and tests); `llm` prompts any
OpenAI-compatible upstream. Every role call is persisted under `<runs>/<run>/simulator/`.
"""
