"""The audit's building blocks against independent computations: name normalisation, BFCL item parsing,
and the chunked sparse top-k against a brute-force dense ranking.

    .venvs/eval/bin/python -m pytest tests/audit/test_measures.py -q
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from toolcanary.audit.bfcl_items import load_category
from toolcanary.audit.neighbours import verbatim
from toolcanary.audit.sparse_top_k import jaccard, row_sizes, top_k
from toolcanary.audit.text_features import name_core, normalised_name, query_terms, schema_text


@pytest.mark.parametrize(
    "a, b",
    [
        ("math.factorial", "Math_Factorial"),
        ("mathFactorial", "MATH-factorial"),
        ("getHTTPStatus", "get_http_status"),
        ("uber.ride", "Uber Ride"),
    ],
)
def test_names_that_differ_only_in_case_and_separators_normalise_alike(a, b):
    assert normalised_name(a) == normalised_name(b)


def test_a_namespace_or_a_verb_still_makes_names_different_but_not_their_core():
    assert normalised_name("factorial") != normalised_name("math.factorial")
    assert normalised_name("get_weather") != normalised_name("fetch_weather")
    assert name_core("get_weather") == name_core("fetchWeather") == {"weather"}
    assert name_core("get_list") == {"get", "list"}, "a name of verbs only keeps its verbs"


def test_schema_text_holds_nested_parameter_names_split_like_names():
    text = schema_text(
        "book.Flight",
        "Book it.",
        {
            "type": "dict",
            "properties": {
                "travelDate": {"type": "string"},
                "passenger": {"type": "dict", "properties": {"firstName": {}}},
            },
        },
    )
    assert text.split() == ["book", "flight", "Book", "it.", "travel", "date", "passenger", "first", "name"]


def test_query_terms_drop_stopwords_before_pairing_words():
    assert query_terms("Could you find the weather in Tel Aviv?") == [
        "find",
        "weather",
        "tel",
        "aviv",
        "find weather",
        "weather tel",
        "tel aviv",
    ]


def test_verbatim_share_counts_content_ngrams_of_the_turn():
    # turn 3-grams holding a content word: "find the weather", "the weather in", "weather in paris"
    assert verbatim("find the weather in Paris", "I want to find the weather in Rome", 3) == pytest.approx(
        2 / 3
    )


def test_a_multi_turn_item_offers_every_function_of_its_classes_without_the_banner():
    item = next(i for i in load_category("multi_turn_miss_func") if i.id == "multi_turn_miss_func_0")
    names = {f.name for f in item.functions}
    assert {"mv", "grep", "sort", "diff", "cp", "post_tweet"} <= names
    assert not any(f.description.startswith("This tool belongs to") for f in item.functions)
    assert len(item.turns) == 4, "the empty turn where a function is withheld is not a question"


def _random_binary(rng, rows, cols, density):
    return sp.random(rows, cols, density=density, format="csr", random_state=rng, data_rvs=np.ones)


@pytest.mark.parametrize("chunk_rows", [1, 7, 1000])
def test_chunked_top_k_equals_a_dense_ranking_whatever_the_block_size(chunk_rows):
    rng = np.random.default_rng(0)
    left = sp.random(40, 60, density=0.2, format="csr", random_state=rng)
    right = sp.random(90, 60, density=0.2, format="csr", random_state=rng)
    indices, scores = top_k(left, right, 5, chunk_rows, progress=False)
    dense = (left @ right.T).toarray()
    for row in range(40):
        expected = sorted(range(90), key=lambda j: (-dense[row, j], j))[:5]
        assert np.allclose(scores[row], dense[row, expected], atol=1e-5)
        # Same neighbours up to float32 rounding of near-equal scores.
        assert set(indices[row]) == set(expected) or np.allclose(
            dense[row, indices[row]], dense[row, expected]
        )


def test_jaccard_transform_equals_set_arithmetic():
    rng = np.random.default_rng(1)
    left, right = _random_binary(rng, 30, 25, 0.3), _random_binary(rng, 50, 25, 0.3)
    indices, scores = top_k(
        left, right, 1, 8, transform=jaccard(row_sizes(left), row_sizes(right)), progress=False
    )
    sets_l = [set(left[i].indices) for i in range(30)]
    sets_r = [set(right[j].indices) for j in range(50)]
    for i in range(30):
        best = max(len(sets_l[i] & s) / len(sets_l[i] | s) if sets_l[i] | s else 0.0 for s in sets_r)
        assert scores[i, 0] == pytest.approx(best, abs=1e-6)


def test_fewer_right_rows_than_k_pads_with_minus_one():
    left, right = sp.csr_matrix(np.ones((2, 3))), sp.csr_matrix(np.ones((1, 3)))
    indices, scores = top_k(left, right, 3, 10, progress=False)
    assert indices.tolist() == [[0, -1, -1], [0, -1, -1]] and scores[:, 0].tolist() == [3.0, 3.0]


def test_the_cli_help_shows_copy_pasteable_examples():
    done = subprocess.run(
        [sys.executable, "-m", "toolcanary.audit", "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0
    assert "examples:\n  python -m toolcanary.audit --run demo" in done.stdout
    assert "--schema-threshold" in done.stdout and "--library" in done.stdout


def test_each_audit_setting_has_a_flag_whose_help_is_its_description():
    from cli_checks import flag_problems

    from toolcanary.audit.__main__ import build_parser
    from toolcanary.audit.settings import AuditSettings

    assert flag_problems(build_parser(AuditSettings()), AuditSettings) == []
