"""`$unwind` spec: string and object forms."""

from __future__ import annotations

import pytest

from pipeline_stages.unwind import KEY, OPERATOR_NAME, UnwindSpec


def test_key_and_operator() -> None:
    assert (KEY, OPERATOR_NAME) == ("$unwind", "UnwindOperator")


def test_string_form(parse_body) -> None:
    spec = parse_body(KEY, "$items")
    assert isinstance(spec, UnwindSpec)
    assert (spec.path, spec.field_path) == ("$items", "items")
    assert spec.include_array_index is None
    assert spec.preserve_null_and_empty_arrays is False


def test_object_form_aliases(parse_body) -> None:
    body = {"path": "$a.b", "includeArrayIndex": "i", "preserveNullAndEmptyArrays": True}
    spec = parse_body(KEY, body)
    assert (spec.path, spec.include_array_index, spec.preserve_null_and_empty_arrays) == (
        "$a.b",
        "i",
        True,
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("items", [("invalid_value", "")]),
        ("$$items", [("invalid_value", "")]),
        ("$", [("invalid_value", "")]),
        (5, [("dict_type", "")]),
        ({"path": "items"}, [("invalid_value", "/path")]),
        ({}, [("missing", "/path")]),
        ({"path": 5}, [("string_type", "/path")]),
        ({"path": "$a", "includeArrayIndex": "$i"}, [("invalid_value", "/includeArrayIndex")]),
        (
            {"path": "$a", "preserveNullAndEmptyArrays": 1},
            [("bool_type", "/preserveNullAndEmptyArrays")],
        ),
        ({"path": "$a", "includeArrayIndex": "i", "x": 1}, [("extra_forbidden", "/x")]),
    ],
)
def test_invalid(body_problems, body, expected) -> None:
    assert body_problems(KEY, body) == expected


def test_message(body_messages) -> None:
    assert body_messages(KEY, "items") == [
        "path option to $unwind stage should be prefixed with a '$', got \"items\""
    ]
