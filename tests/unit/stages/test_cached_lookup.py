"""`$cachedLookup` spec: Atlas's fields, `let`/`pipeline` refused."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline_stages.cached_lookup import KEY, OPERATOR_NAME, CachedLookupSpec

FROM = {"connectionName": "local", "db": "shop", "coll": "products"}


def body(**fields: Any) -> dict[str, Any]:
    base = {
        "ttl": {"size": 5, "unit": "minute"},
        "maxMemUsageBytes": 1_000_000,
        "from": FROM,
        "localField": "sku",
        "foreignField": "_id",
        "as": "product",
    }
    return {k: v for k, v in {**base, **fields}.items() if v is not ...}


def test_key_and_operator() -> None:
    assert (KEY, OPERATOR_NAME) == ("$cachedLookup", "CachedLookUpOperator")


def test_fields(parse_body) -> None:
    spec = parse_body(KEY, body(maxMemUsageBytes=2048.0))
    assert isinstance(spec, CachedLookupSpec)
    assert (spec.ttl.ms, spec.max_mem_usage_bytes) == (300_000, 2048)
    assert (spec.from_.db, spec.from_.coll, spec.local_field, spec.foreign_field) == (
        "shop",
        "products",
        "sku",
        "_id",
    )
    assert spec.as_ == "product"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"ttl": ...}, [("missing", "/ttl")]),
        ({"ttl": {"size": 0, "unit": "second"}}, [("greater_than", "/ttl/size")]),
        ({"ttl": {"size": 1, "unit": "week"}}, [("literal_error", "/ttl/unit")]),
        ({"ttl": {"size": 1.5, "unit": "second"}}, [("value_error", "/ttl/size")]),
        ({"maxMemUsageBytes": ...}, [("missing", "/maxMemUsageBytes")]),
        ({"maxMemUsageBytes": 0}, [("greater_than", "/maxMemUsageBytes")]),
        ({"maxMemUsageBytes": "1"}, [("int_type", "/maxMemUsageBytes")]),
        ({"from": ...}, [("missing", "/from")]),
        ({"from": "products"}, [("invalid_value", "/from")]),
        ({"from": {"connectionName": "local", "db": "d"}}, [("missing", "/from/coll")]),
        ({"localField": ...}, [("missing", "/localField")]),
        ({"localField": ""}, [("string_too_short", "/localField")]),
        ({"foreignField": ...}, [("missing", "/foreignField")]),
        ({"as": ...}, [("missing", "/as")]),
        ({"as": "$p"}, [("invalid_value", "/as")]),
        ({"let": {"a": "$a"}}, [("unsupported_option", "/let")]),
        ({"pipeline": []}, [("unsupported_option", "/pipeline")]),
        ({"parallelism": 2}, [("extra_forbidden", "/parallelism")]),
    ],
)
def test_invalid(body_problems, fields, expected) -> None:
    assert body_problems(KEY, body(**fields)) == expected
