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


@pytest.mark.parametrize(
    "pipeline",
    [
        [{"$match": {"$expr": {"$eq": ["$sku", "$$s"]}}}],
        [{"$match": {"a": 1}}, {"$match": {"b": 2}}, {"$sort": {"a": -1}}],
        [{"$sort": {"a": 1}}, {"$skip": 1}, {"$limit": 2}, {"$project": {"_id": 0, "a": 1}}],
        [{"$project": {"big": 0}}],
        [],
    ],
)
def test_inner_pipelines_the_stores_evaluate(parse_body, pipeline) -> None:
    spec = parse_body(KEY, {"from": FROM, "let": {"s": "$sku"}, "pipeline": pipeline, "as": "p"})
    assert spec.pipeline == pipeline


@pytest.mark.parametrize(
    ("pipeline", "expected"),
    [
        ([{"$group": {"_id": "$a"}}], [("unsupported_option", "/pipeline/0/$group")]),
        ([{"$limit": 1}, {"$sort": {"a": 1}}], [("unsupported_option", "/pipeline/1/$sort")]),
        ([{"$sort": {"a": 1}}, {"$match": {}}], [("unsupported_option", "/pipeline/1/$match")]),
        ([{"$limit": 1}, {"$limit": 2}], [("unsupported_option", "/pipeline/1/$limit")]),
        ([{"$limit": 0}], [("unsupported_option", "/pipeline/0/$limit")]),
        ([{"$skip": -1}], [("unsupported_option", "/pipeline/0/$skip")]),
        ([{"$sort": {"a": 2}}], [("unsupported_option", "/pipeline/0/$sort")]),
        ([{"$project": {"x": "$a"}}], [("unsupported_option", "/pipeline/0/$project")]),
        ([{"$match": 3}], [("unsupported_option", "/pipeline/0/$match")]),
        ([{"$match": {}, "$limit": 1}], [("stage_shape", "/pipeline/0")]),
        (
            [{"$addFields": {"a": 1}}, {"$lookup": {}}],
            [
                ("unsupported_option", "/pipeline/0/$addFields"),
                ("unsupported_option", "/pipeline/1/$lookup"),
            ],
        ),
    ],
)
def test_inner_pipeline_refusals(body_problems, pipeline, expected) -> None:
    assert body_problems(KEY, {"from": FROM, "pipeline": pipeline, "as": "p"}) == expected


@pytest.mark.parametrize(
    ("let", "expected"),
    [
        ({"S": "$a"}, [("invalid_value", "/let/S")]),
        ({"1a": "$a"}, [("invalid_value", "/let/1a")]),
        ({"a-b": "$a"}, [("invalid_value", "/let/a-b")]),
        ("$a", [("dict_type", "/let")]),
    ],
)
def test_let_variable_names(body_problems, let, expected) -> None:
    body = {"from": FROM, "let": let, "pipeline": [], "as": "p"}
    assert body_problems(KEY, body) == expected
