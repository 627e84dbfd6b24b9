"""Fake vLLM for tests of images/simulator/start-simulator.sh: put tests/simulator/fake_vllm first on PYTHONPATH
and `python -m vllm.entrypoints.openai.api_server` runs the stand-in server in entrypoints/openai/api_server.py."""
