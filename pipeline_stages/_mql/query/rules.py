"""A validator split into the rules a failing document can be told about, without Spark.

MongoDB's validation errors say which rule failed (`errInfo.details`: the query operator and
how it was specified, or the `$jsonSchema` keywords not satisfied). `$validate` compiles each
rule on its own and names the ones a document fails. A rule is one operator of one field
(`{a: {$gt: 5}}`), one top-level logical or `$expr` clause, or one `$jsonSchema` keyword
(each property of `properties` apart). Keywords that only mean something together stay
together (`minimum` with `exclusiveMinimum`, `items` with `additionalItems`, `properties`
with `patternProperties` and `additionalProperties`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline_stages._mql.names import QUERY_EJSON_KEYS

#: `$jsonSchema` keywords read together; the first present names the rule.
_TOGETHER = (
    ("additionalProperties", "properties", "patternProperties"),
    ("exclusiveMinimum", "minimum"),
    ("exclusiveMaximum", "maximum"),
    ("additionalItems", "items"),
)
#: Keywords that never fail a document.
_ANNOTATIONS = frozenset({"title", "description"})


@dataclass(frozen=True)
class Rule:
    """One rule: the filter that checks it alone, and what an error says about it."""

    filter: dict[str, Any]
    details: dict[str, Any]
    #: True for a `$jsonSchema` keyword (reported under `schemaRulesNotSatisfied`).
    schema: bool = False


def validator_rules(validator: Any) -> list[Rule]:
    """The rules of a validator (an empty list for a shape the compiler rejects)."""
    if not isinstance(validator, dict):
        return []
    rules: list[Rule] = []
    for key, value in validator.items():
        if key == "$jsonSchema":
            rules.extend(_schema_rules(value))
        elif key == "$comment":
            continue
        elif key.startswith("$"):
            rules.append(Rule({key: value}, {"operatorName": key, "specifiedAs": {key: value}}))
        else:
            rules.extend(_field_rules(key, value))
    return rules


def _field_rules(field: str, value: Any) -> list[Rule]:
    literal = isinstance(value, dict) and len(value) == 1 and next(iter(value)) in QUERY_EJSON_KEYS
    if literal or not (isinstance(value, dict) and value and next(iter(value)).startswith("$")):
        return [Rule({field: value}, {"operatorName": "$eq", "specifiedAs": {field: value}})]
    rules = []
    for op, argument in value.items():
        if op == "$options":
            continue
        spec = {op: argument}
        if op == "$regex" and "$options" in value:
            spec["$options"] = value["$options"]
        rules.append(Rule({field: spec}, {"operatorName": op, "specifiedAs": {field: spec}}))
    return rules


def _schema_rules(schema: Any) -> list[Rule]:
    if not isinstance(schema, dict):
        return []
    rules = []
    grouped: set[str] = set()
    for group in _TOGETHER:
        present = [k for k in group if k in schema]
        if present and group[0] in schema:
            grouped.update(present)
            rules.append(_schema_rule(group[0], {k: schema[k] for k in present}))
    for keyword, argument in schema.items():
        if keyword in grouped or keyword in _ANNOTATIONS:
            continue
        if keyword == "properties" and isinstance(argument, dict):
            for name, sub in argument.items():
                rules.append(_schema_rule("properties", {"properties": {name: sub}}, name))
        else:
            rules.append(_schema_rule(keyword, {keyword: argument}))
    return rules


def _schema_rule(keyword: str, part: dict[str, Any], property_name: str | None = None) -> Rule:
    details: dict[str, Any] = {"operatorName": keyword, "specifiedAs": part}
    if property_name is not None:
        details["propertyName"] = property_name
    return Rule({"$jsonSchema": part}, details, schema=True)
