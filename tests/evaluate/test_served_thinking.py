"""The thinking mode the server applied, observed over HTTP for the pass manifest (`served_enable_thinking`):
vLLM's /tokenize renders the prompt with thinking on and off, and a chat request's prompt token count says
which of the two the server fed the model; a template without a thinking switch, or a server without
/tokenize, gives None and a log line saying why, never a guess.

    .venvs/eval/bin/python -m pytest tests/evaluate/test_served_thinking.py -q
"""

from __future__ import annotations

import logging

import pytest

from toolcanary.evaluate.preflight import probe


@pytest.mark.parametrize(("template", "expected", "logged"), [
    ("thinking-off", False, "served thinking mode: off"),
    ("thinking-on", True, "served thinking mode: on"),
    ("no-switch", None, "renders the same prompt with enable_thinking true and false"),
    (None, None, "/tokenize did not render a chat prompt (HTTPStatusError"),
])
def test_the_served_thinking_mode_is_observed_or_left_unknown_with_the_reason(make_stub, caplog, template, expected,
                                                                              logged):
    server = make_stub("oracle", template=template)
    with caplog.at_level(logging.INFO, logger="toolcanary.evaluate.preflight"):
        report = probe(server.base_url, server.model)
    assert report.enable_thinking is expected
    assert any(logged in record.getMessage() for record in caplog.records), [r.getMessage() for r in caplog.records]
    if expected is None:
        assert any("records served_enable_thinking null" in r.getMessage() and r.levelno == logging.WARNING
                   for r in caplog.records)
