"""The one rule for run ids, which name folders under every data root and so cross file boundaries.

A run id is 1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit (so it is never a
hidden folder, an option or a path).

    from toolcanary.contract.run_id import RunId, check_run_id
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import StringConstraints

from toolcanary.contract.errors import ContractError

RUN_ID_MAX = 100
RUN_ID_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{RUN_ID_MAX - 1}}}$"
RUN_ID = re.compile(RUN_ID_PATTERN)
RUN_ID_RULE = f"a run id: 1-{RUN_ID_MAX} letters, digits, '.', '_' or '-', starting with a letter or digit"
RunId = Annotated[str, StringConstraints(pattern=RUN_ID_PATTERN)]


def check_run_id(run: str, where: str = "--run") -> str:
    """`run` itself when it is a valid run id.

    Raises:
        ContractError: it is not, naming `where`.
    """
    if not isinstance(run, str) or not RUN_ID.fullmatch(run):  # `$` alone would let "demo\n" through
        raise ContractError(where, RUN_ID_RULE, repr(run), "Pick another run id")
    return run
