"""Helpers several services share that are not contracts: no shape here crosses a process or file boundary.

- `loopback`: a free port and waiting until a local URL answers (every launcher of a child server);
- `git_files`: a git checkout's HEAD and its files checked against a commit, with the standard library alone
  (the images carry no git binary);
- `trustee_checkout`: TRUSTEE's prompts, parsers and library read from a checkout verified at its pinned commit.

Standard library and pydantic only, like `toolcanary.contract`, so every image can import it; it imports the
contract and no service (tests/contract/test_layering.py).
"""
