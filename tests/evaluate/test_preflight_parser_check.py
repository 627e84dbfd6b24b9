"""The probe's parser checks: a well-formed call left in `content` means no tool parser; a malformed one
is the model's own mistake (a parser leaves it as text too) and must not fail the pass.

Run: .venvs/eval/bin/python -m pytest tests/evaluate/test_preflight_parser_check.py -q
"""

import pytest

from toolcanary.contract.errors import ContractError
from toolcanary.evaluate.preflight import _check_no_raw_calls

WELL_FORMED = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


def test_a_well_formed_call_in_content_fails_the_probe():
    with pytest.raises(ContractError, match="raw <tool_call> text"):
        _check_no_raw_calls("http://x/v1", {"content": "Sure.\n" + WELL_FORMED}, 'tool_choice="auto"')


@pytest.mark.parametrize("content", ['<tool_call>\n{"name": 11".', '<tool_call>{"name": "f"}</tool_call>', "plain text", None])
def test_malformed_calls_and_plain_answers_pass(content):
    _check_no_raw_calls("http://x/v1", {"content": content}, 'tool_choice="auto"')


def test_a_forced_call_the_model_malformed_passes_and_is_recorded(make_stub):
    # The malformed mode answers every tools request with a truncated call, as a weak policy on a server
    # that does not enforce forced calls with a grammar would.
    from toolcanary.evaluate.preflight import probe

    server = make_stub("malformed")
    report = probe(server.base_url, server.model)
    assert report.forced_with == "required, malformed by the model"
