"""BFCL V4 evaluation client: scores one served checkpoint over HTTP and refuses bfcl-eval's silent failures.

Entry point: `python -m toolcanary.evaluate --help` (subcommands `run`, `eval-all`, `watch`, `ls`, `guards`).
"""
