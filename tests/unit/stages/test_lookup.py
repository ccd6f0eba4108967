"""`$lookup` spec: every documented field parsed (execution is refused later by the compiler)."""

from __future__ import annotations

import pytest

from pipeline_stages.lookup import KEY, OPERATOR_NAME, LookupSpec

FROM = {"connectionName": "atlas", "db": "shop", "coll": "products"}


def test_key_and_operator() -> None:
    assert KEY == "$lookup"
    assert OPERATOR_NAME == "LookUpOperator"


def test_equality_form_defaults(parse_body) -> None:
    spec = parse_body(KEY, {"from": FROM, "localField": "sku", "foreignField": "_id", "as": "p"})
    assert isinstance(spec, LookupSpec)
    assert (spec.from_.connection_name, spec.from_.db, spec.from_.coll) == (
        "atlas",
        "shop",
        "products",
    )
    assert (spec.local_field, spec.foreign_field, spec.as_) == ("sku", "_id", "p")
    assert (spec.parallelism, spec.let, spec.pipeline, spec.partition_by) == (1, None, None, None)


def test_pipeline_form(parse_body) -> None:
    body = {
        "from": FROM,
        "let": {"s": "$sku"},
        "pipeline": [{"$match": {"$expr": {"$eq": ["$_id", "$$s"]}}}],
        "as": "p",
        "parallelism": 4.0,
        "partitionBy": "$region",
    }
    spec = parse_body(KEY, body)
    assert spec.pipeline == body["pipeline"]
    assert (spec.parallelism, spec.partition_by) == (4, "$region")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"from": FROM, "localField": "a", "foreignField": "b"}, [("missing", "/as")]),
        (
            {"from": "products", "localField": "a", "foreignField": "b", "as": "p"},
            [("invalid_value", "/from")],
        ),
        (
            {"from": {"db": "d", "coll": "c"}, "pipeline": [], "as": "p"},
            [("missing", "/from/connectionName")],
        ),
        ({"from": FROM, "localField": "a", "as": "p"}, [("invalid_combination", "/localField")]),
        (
            {"from": FROM, "foreignField": "a", "as": "p"},
            [("invalid_combination", "/foreignField")],
        ),
        ({"from": FROM, "as": "p"}, [("invalid_combination", "")]),
        ({"from": FROM, "pipeline": [], "as": "$p"}, [("invalid_value", "/as")]),
        (
            {"from": FROM, "pipeline": [], "as": "p", "parallelism": 17},
            [("less_than_equal", "/parallelism")],
        ),
        (
            {"from": FROM, "pipeline": [], "as": "p", "parallelism": 0},
            [("greater_than_equal", "/parallelism")],
        ),
        (
            {"from": FROM, "localField": "a", "as": 5},
            [("invalid_combination", "/localField"), ("string_type", "/as")],
        ),
    ],
)
def test_invalid(body_problems, body, expected) -> None:
    assert body_problems(KEY, body) == expected
