"""The errors ToolCanary raises when it refuses something, in one message form, by kind.

Every message says where, what was expected, what came, and what to do, so the caller can show it unchanged:

- `ContractError`: data that crosses a process or file boundary does not match the contract (a row, a
  manifest, a request body). It is also the base of the other kinds, so a command that stops on any refusal
  catches it alone.
- `UsageError`: a flag, environment variable or setting that cannot work (exit status 2 in every CLI).
- `BusyError`: another process holds what this one needs (a pass folder another client is scoring): nothing is
  wrong, try again when it is done.
"""

from __future__ import annotations


class ContractError(ValueError):
    """Data that crosses a boundary does not match the contract; the base of every refusal.

    Args:
        where: the file (and row), the request field or the setting that is wrong.
        expected: what is required there.
        got: what was found instead.
        fix: what the reader can do about it.
    """

    def __init__(self, where: str, expected: str, got: str, fix: str = "") -> None:
        self.where, self.expected, self.got, self.fix = where, expected, got, fix
        message = f"{where}: expected {expected}, got {got}"
        if fix:
            message += f". {fix}"
        super().__init__(message)


class UsageError(ContractError):
    """A flag, environment variable or setting that cannot work, named as the user gave it."""


class BusyError(ContractError):
    """Another process holds what this one needs; the same call succeeds once it is done."""
