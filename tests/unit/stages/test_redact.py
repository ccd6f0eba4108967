"""`$redact` spec: the raw expression."""

from __future__ import annotations

from pipeline_stages.redact import KEY, OPERATOR_NAME, RedactSpec


def test_key_and_operator() -> None:
    assert (KEY, OPERATOR_NAME) == ("$redact", "RedactOperator")


def test_valid(parse_body) -> None:
    body = {"$cond": {"if": {"$eq": ["$level", 5]}, "then": "$$PRUNE", "else": "$$DESCEND"}}
    spec = parse_body(KEY, body)
    assert isinstance(spec, RedactSpec)
    assert spec.expression == body


def test_system_variable_body(parse_body) -> None:
    assert parse_body(KEY, "$$KEEP").expression == "$$KEEP"
