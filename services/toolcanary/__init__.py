"""ToolCanary: what multi-turn tool-use RL in a fully simulated environment does to a policy.

Each service is a subpackage with its own image and environment; `toolcanary.contract` holds every shape
that crosses a process or file boundary and is the only module they all import.
"""
