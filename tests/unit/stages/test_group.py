"""`$group` spec: `_id` plus accumulators, with argument shapes."""

from __future__ import annotations

import pytest

from pipeline_stages.group import (
    KEY,
    OPERATOR_NAME,
    GroupSpec,
    MedianArgs,
    NArgs,
    PercentileArgs,
    TopNArgs,
)


def test_key_and_operator() -> None:
    assert (KEY, OPERATOR_NAME) == ("$group", "GroupOperator")


def test_unary_accumulators_keep_order_and_raw_arguments(parse_body) -> None:
    body = {"_id": "$device", "n": {"$count": {}}, "total": {"$sum": 1.0}, "avg": {"$avg": "$w"}}
    spec = parse_body(KEY, body)
    assert isinstance(spec, GroupSpec)
    assert spec.id == "$device"
    assert list(spec.accumulators) == ["n", "total", "avg"]
    total = spec.accumulators["total"]
    assert (total.operator, total.argument, total.arguments) == ("$sum", 1.0, None)
    assert type(total.argument) is float


def test_null_id_is_one_group(parse_body) -> None:
    assert parse_body(KEY, {"_id": None}).id is None


@pytest.mark.parametrize(
    ("accumulator", "model"),
    [
        ({"$topN": {"n": 3, "sortBy": {"w": -1}, "output": "$w"}}, TopNArgs),
        ({"$bottomN": {"n": "$k", "sortBy": {"w": 1, "t": -1}, "output": ["$w", "$t"]}}, TopNArgs),
        ({"$firstN": {"input": "$w", "n": 2.0}}, NArgs),
        ({"$maxN": {"input": "$w", "n": {"$cond": [True, 1, 2]}}}, NArgs),
        (
            {"$percentile": {"input": "$w", "p": [0.5, 0.95, 1], "method": "approximate"}},
            PercentileArgs,
        ),
        ({"$median": {"input": "$w", "method": "approximate"}}, MedianArgs),
    ],
)
def test_accumulators_with_named_arguments(parse_body, accumulator, model) -> None:
    spec = parse_body(KEY, {"_id": None, "out": accumulator})
    parsed = spec.accumulators["out"].arguments
    assert type(parsed) is model
    assert spec.accumulators["out"].argument == next(iter(accumulator.values()))


def test_top_n_fields(parse_body) -> None:
    spec = parse_body(
        KEY,
        {"_id": None, "t": {"$topN": {"n": 3.0, "sortBy": {"w": -1.0, "a": 1}, "output": "$w"}}},
    )
    args = spec.accumulators["t"].arguments
    assert (args.n, args.sort_by, args.output) == (3, {"w": -1, "a": 1}, "$w")
    assert list(args.sort_by) == ["w", "a"]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"n": {"$sum": 1}}, [("missing", "/_id")]),
        ([], [("dict_type", "")]),
        ({"_id": None, "t": {"$summ": 1}}, [("unknown_operator", "/t/$summ")]),
        ({"_id": None, "t": {"$accumulator": {}}}, [("unsupported_option", "/t/$accumulator")]),
        ({"_id": None, "t": 5}, [("invalid_value", "/t")]),
        ({"_id": None, "t": {"$sum": 1, "$avg": 1}}, [("invalid_value", "/t")]),
        ({"_id": None, "$t": {"$sum": 1}}, [("invalid_value", "/$t")]),
        ({"_id": None, "a.b": {"$sum": 1}}, [("invalid_value", "/a.b")]),
        ({"_id": None, "t": {"$sum": [1, 2]}}, [("invalid_arguments", "/t/$sum")]),
        ({"_id": None, "t": {"$count": 1}}, [("invalid_arguments", "/t/$count")]),
        ({"_id": None, "t": {"$topN": "$w"}}, [("invalid_arguments", "/t/$topN")]),
        (
            {"_id": None, "t": {"$topN": {"n": 0, "sortBy": {"w": 1}, "output": 1}}},
            [("invalid_value", "/t/$topN/n")],
        ),
        (
            {"_id": None, "t": {"$topN": {"n": 1.5, "sortBy": {"w": 1}, "output": 1}}},
            [("invalid_value", "/t/$topN/n")],
        ),
        (
            {"_id": None, "t": {"$topN": {"n": "3", "sortBy": {"w": 1}, "output": 1}}},
            [("invalid_value", "/t/$topN/n")],
        ),
        (
            {"_id": None, "t": {"$top": {"n": 1, "sortBy": {"w": 1}, "output": 1}}},
            [("extra_forbidden", "/t/$top/n")],
        ),
        (
            {"_id": None, "t": {"$top": {"sortBy": {"w": 2}}}},
            [("invalid_value", "/t/$top/sortBy/w"), ("missing", "/t/$top/output")],
        ),
        (
            {"_id": None, "t": {"$top": {"sortBy": {}, "output": 1}}},
            [("too_short", "/t/$top/sortBy")],
        ),
        ({"_id": None, "t": {"$firstN": {"input": "$w"}}}, [("missing", "/t/$firstN/n")]),
        ({"_id": None, "t": {"$median": {"input": "$w"}}}, [("missing", "/t/$median/method")]),
        (
            {"_id": None, "t": {"$median": {"input": "$w", "method": "exact"}}},
            [("literal_error", "/t/$median/method")],
        ),
        (
            {
                "_id": None,
                "t": {"$percentile": {"input": "$w", "p": [0.5, 2], "method": "approximate"}},
            },
            [("invalid_value", "/t/$percentile/p/1")],
        ),
        (
            {"_id": None, "t": {"$percentile": {"input": "$w", "p": [], "method": "approximate"}}},
            [("too_short", "/t/$percentile/p")],
        ),
        (
            {"_id": None, "t": {"$percentile": {"input": "$w", "p": 0.5, "method": "approximate"}}},
            [("invalid_value", "/t/$percentile/p")],
        ),
        (
            {"_id": None, "a": {"$summ": 1}, "b": {"$avg": [1]}, "c": {"$sum": 1}},
            [("unknown_operator", "/a/$summ"), ("invalid_arguments", "/b/$avg")],
        ),
    ],
)
def test_invalid(body_problems, body, expected) -> None:
    assert body_problems(KEY, body) == expected


def test_unknown_accumulator_hint(body_messages) -> None:
    assert body_messages(KEY, {"_id": None, "t": {"$summ": "$a"}}) == [
        "Unknown group accumulator '$summ'; did you mean '$sum'?"
    ]
    assert body_messages(KEY, {"_id": None, "t": {"$zzz": "$a"}}) == [
        "Unknown group accumulator '$zzz'"
    ]


def test_field_named_accumulators_is_an_output_field(parse_body) -> None:
    spec = parse_body(KEY, {"_id": None, "accumulators": {"$sum": 1}, "id": {"$max": "$x"}})
    assert list(spec.accumulators) == ["accumulators", "id"]
