"""`$merge` spec: into, on, whenMatched, whenNotMatched, let, parallelism."""

from __future__ import annotations

import pytest

from pipeline_stages.merge import KEY, OPERATOR_NAME, MergeSpec

INTO = {"connectionName": "atlas", "db": "d", "coll": "c"}


def test_key_and_operator() -> None:
    assert (KEY, OPERATOR_NAME) == ("$merge", "MergeOperator")


def test_defaults(parse_body) -> None:
    spec = parse_body(KEY, {"into": INTO})
    assert isinstance(spec, MergeSpec)
    assert (spec.into.connection_name, spec.into.db, spec.into.coll) == ("atlas", "d", "c")
    assert (spec.on, spec.let, spec.when_matched, spec.when_not_matched, spec.parallelism) == (
        None,
        None,
        "merge",
        "insert",
        1,
    )
    assert spec.when_matched_pipeline is None


@pytest.mark.parametrize(
    "when_matched",
    ["replace", "keepExisting", "merge", "delete", {"$cond": ["$x", "replace", "merge"]}],
)
def test_when_matched_modes(parse_body, when_matched) -> None:
    assert parse_body(KEY, {"into": INTO, "whenMatched": when_matched}).when_matched == when_matched


def test_dynamic_target_pipeline_and_let(parse_body) -> None:
    body = {
        "into": {"connectionName": "atlas", "db": "$region", "coll": {"$concat": ["c_", "$k"]}},
        "on": ["a", "b"],
        "let": {"n": "$n"},
        "whenMatched": [{"$set": {"n": {"$add": ["$n", "$$n"]}}}],
        "whenNotMatched": "discard",
        "parallelism": 4,
    }
    spec = parse_body(KEY, body)
    assert spec.on == ("a", "b")
    assert spec.when_matched_pipeline == body["whenMatched"]
    assert (spec.into.db, spec.when_not_matched, spec.parallelism) == ("$region", "discard", 4)
    assert parse_body(KEY, {"into": INTO, "on": "k"}).on == ("k",)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({}, [("missing", "/into")]),
        ({"into": {"db": "d", "coll": "c"}}, [("missing", "/into/connectionName")]),
        ({"into": {**INTO, "coll": ""}}, [("invalid_value", "/into/coll")]),
        ({"into": {**INTO, "db": 5}}, [("invalid_value", "/into/db")]),
        ({"into": INTO, "whenMatched": "fail"}, [("unsupported_option", "/whenMatched")]),
        ({"into": INTO, "whenNotMatched": "fail"}, [("unsupported_option", "/whenNotMatched")]),
        ({"into": INTO, "whenMatched": "upsert"}, [("literal_error", "/whenMatched")]),
        ({"into": INTO, "whenNotMatched": "delete"}, [("literal_error", "/whenNotMatched")]),
        ({"into": INTO, "whenNotMatched": [{"$set": {}}]}, [("invalid_value", "/whenNotMatched")]),
        (
            {"into": INTO, "whenMatched": [{"$set": {}, "$unset": "a"}]},
            [("stage_shape", "/whenMatched/0")],
        ),
        ({"into": INTO, "on": []}, [("too_short", "/on")]),
        ({"into": INTO, "on": ["a", 1]}, [("string_type", "/on/1")]),
        ({"into": INTO, "let": {"x": 1}}, [("invalid_combination", "/let")]),
        (
            {"into": INTO, "let": {"x": 1}, "whenMatched": "replace"},
            [("invalid_combination", "/let")],
        ),
        ({"into": INTO, "parallelism": 0}, [("greater_than_equal", "/parallelism")]),
        ({"into": INTO, "when_matched": "merge"}, [("extra_forbidden", "/when_matched")]),
        (
            {"into": {}, "whenMatched": "fail", "let": {}},
            [
                ("invalid_combination", "/let"),
                ("missing", "/into/connectionName"),
                ("missing", "/into/db"),
                ("missing", "/into/coll"),
                ("unsupported_option", "/whenMatched"),
            ],
        ),
    ],
)
def test_invalid(body_problems, body, expected) -> None:
    assert body_problems(KEY, body) == expected


def test_fail_message(body_messages) -> None:
    assert body_messages(KEY, {"into": INTO, "whenMatched": "fail"}) == [
        'whenMatched: "fail" is not supported in a stream processor; use one of replace, keepExisting, merge, delete'
    ]
