"""The one error type the contract raises: bad data at a process or file boundary.

Every message says what was expected, what came, and what to do, so the caller can show it unchanged.
"""

from __future__ import annotations


class ContractError(ValueError):
    """Data that crosses a boundary does not match the contract.

    Args:
        where: the file (and row) or the request field that is wrong.
        expected: what the contract requires there.
        got: what was found instead.
        fix: what the reader can do about it.
    """

    def __init__(self, where: str, expected: str, got: str, fix: str = "") -> None:
        self.where, self.expected, self.got, self.fix = where, expected, got, fix
        message = f"{where}: expected {expected}, got {got}"
        if fix:
            message += f". {fix}"
        super().__init__(message)
