"""`$jsonSchema` (JSON Schema draft 4, MongoDB dialect) compiled to a Spark predicate.

Supported keywords: `type`, `bsonType` (a name or an array of names), `properties`,
`required`, `enum`, `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (draft-4
booleans), `minLength`, `maxLength`, `pattern`, `items` (one schema for every element),
`additionalProperties` (boolean or schema), `minItems`, `maxItems`, and the annotations
`title` and `description`. Every other keyword is rejected with `unsupported_option`.

As in JSON Schema, a keyword only constrains values of the type it is about: `minimum`
ignores strings, `properties` ignores arrays, and so on. As in MongoDB, `type: "integer"` is
rejected (use `bsonType: "int"` or `"long"`), and `type: "object"` means a document (a date
is not one). Documents at `$validate` carry `_ts` and `_stream_meta`, so a schema with
`additionalProperties: false` must list them (atlas-semantics §3.2).
"""

from __future__ import annotations

import difflib
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._base import ProblemCode, ProblemCollector, join_path
from pipeline_stages._mql.query import compare as C
from pipeline_stages._mql.query.literals import BadLiteral, QueryLiteral, make_regex, parse_literal
from pipeline_stages._mql.query.ops import TYPE_NAMES
from pipeline_stages._mql.query.values import Typed, as_object_map, get_field, typed_array

Validator = Callable[[Typed], Column]

ANNOTATIONS = frozenset({"title", "description"})
UNSUPPORTED = frozenset(
    {
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "dependencies",
        "patternProperties",
        "multipleOf",
        "uniqueItems",
        "additionalItems",
        "minProperties",
        "maxProperties",
        "$ref",
        "$schema",
        "default",
        "definitions",
        "format",
        "id",
        "encrypt",
        "encryptMetadata",
    }
)

#: JSON Schema `type` names and the MQL type test each one means.
JSON_TYPES: dict[str, Callable[[Typed], Column]] = {
    "object": Typed.is_object,
    "array": Typed.is_array,
    "number": Typed.is_number,
    "boolean": Typed.is_bool,
    "string": Typed.is_string,
    "null": Typed.is_null,
}


def compile_json_schema(schema: Any, doc: Column, path: str, problems: ProblemCollector) -> Column:
    """A BOOLEAN column: whether `doc` satisfies the `$jsonSchema` `schema`.

    Args:
        schema: The parsed `$jsonSchema` argument.
        doc: The document (VARIANT).
        path: JSON pointer of the `$jsonSchema` value, for problems.
        problems: Where compile-time problems are recorded.
    """
    validator = _SchemaCompiler(problems).schema(schema, path)
    if validator is None:
        return F.lit(False)
    # The document is an object; only `enum` needs its JSON text, which costs a full
    # serialisation per row.
    top = Typed.of(doc) if "enum" in schema else Typed.document(doc)
    return F.coalesce(validator(top), F.lit(False))


@dataclass(frozen=True)
class _SchemaCompiler:
    problems: ProblemCollector

    def schema(self, schema: Any, path: str) -> Validator | None:
        """One (sub)schema: the conjunction of its keywords."""
        if not isinstance(schema, Mapping):
            self.fail(path, "a JSON schema must be an object")
            return None
        if "type" in schema and "bsonType" in schema:
            self.fail(path, "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'")
        validators: list[Validator] = []
        for key, arg in schema.items():
            here = join_path(path, key)
            keyword = _KEYWORDS.get(key)
            if keyword is not None:
                validator = keyword(self, arg, here, schema)
                if validator is not None:
                    validators.append(validator)
            elif key not in ANNOTATIONS:
                self._unsupported(key, here)
        return lambda t: _conjoin([v(t) for v in validators])

    def _unsupported(self, key: str, path: str) -> None:
        if key in UNSUPPORTED:
            message = f"$jsonSchema keyword '{key}' is not supported by Sluice"
        else:
            hint = difflib.get_close_matches(key, [*_KEYWORDS, *ANNOTATIONS], n=1)
            suffix = f"; did you mean '{hint[0]}'?" if hint else ""
            message = f"unknown $jsonSchema keyword: {key}{suffix}"
        self.problems.error(path, ProblemCode.UNSUPPORTED_OPTION, message)

    def fail(self, path: str, message: str) -> None:
        """Record an `invalid_arguments` problem."""
        self.problems.error(path, ProblemCode.INVALID_ARGUMENTS, message)

    # ------------------------------------------------------------------ argument checks

    def names(self, arg: Any, path: str, keyword: str) -> list[str] | None:
        """A type name or a non-empty array of unique names."""
        items = arg if isinstance(arg, list) else [arg]
        if not items or not all(isinstance(i, str) for i in items):
            self.fail(
                path, f"$jsonSchema keyword '{keyword}' must be a string or an array of strings"
            )
            return None
        if len(set(items)) != len(items):
            self.fail(path, f"$jsonSchema keyword '{keyword}' has duplicate values")
            return None
        return items

    def count(self, arg: Any, path: str, keyword: str) -> int | None:
        """A non-negative whole number."""
        if isinstance(arg, bool) or not isinstance(arg, int | float) or arg < 0:
            self.fail(path, f"$jsonSchema keyword '{keyword}' must be a non-negative integer")
            return None
        if not float(arg).is_integer():
            self.fail(path, f"$jsonSchema keyword '{keyword}' must be a whole number")
            return None
        return int(arg)


def _conjoin(columns: list[Column]) -> Column:
    if not columns:
        return F.lit(True)
    result = columns[0]
    for column in columns[1:]:
        result = result & column
    return result


def _disjoin(columns: list[Column]) -> Column:
    result = columns[0]
    for column in columns[1:]:
        result = result | column
    return result


# --------------------------------------------------------------------------- type keywords


def _type(c: _SchemaCompiler, arg: Any, path: str, _: Mapping[str, Any]) -> Validator | None:
    names = c.names(arg, path, "type")
    if names is None:
        return None
    if "integer" in names:
        message = "type 'integer' is not supported by MongoDB; use bsonType 'int' or 'long'"
        c.problems.error(path, ProblemCode.UNSUPPORTED_OPTION, message)
        return None
    unknown = [n for n in names if n not in JSON_TYPES]
    if unknown:
        c.fail(path, f"unknown type name '{unknown[0]}'")
        return None
    return lambda t: _disjoin([JSON_TYPES[n](t) for n in names])


def _bson_type(c: _SchemaCompiler, arg: Any, path: str, _: Mapping[str, Any]) -> Validator | None:
    names = c.names(arg, path, "bsonType")
    if names is None:
        return None
    unknown = [n for n in names if n not in TYPE_NAMES]
    if unknown:
        c.fail(path, f"unknown BSON type name '{unknown[0]}'")
        return None
    return lambda t: _disjoin([t.is_type(n) for n in names])


def _enum(c: _SchemaCompiler, arg: Any, path: str, _: Mapping[str, Any]) -> Validator | None:
    if not isinstance(arg, list) or not arg:
        c.fail(path, "$jsonSchema keyword 'enum' must be a non-empty array")
        return None
    try:
        lits = [parse_literal(v) for v in arg]
    except BadLiteral as exc:
        c.fail(path, str(exc))
        return None
    # enum compares whole values: an array must equal an array literal, not contain it.
    return C.in_list([lit for lit in lits if lit.kind != "regex"])


# --------------------------------------------------------------------------- numbers, strings


def _bound(op: str, exclusive_op: str, flag: str) -> Callable[..., Validator | None]:
    def keyword(
        c: _SchemaCompiler, arg: Any, path: str, schema: Mapping[str, Any]
    ) -> Validator | None:
        if isinstance(arg, bool) or not isinstance(arg, int | float):
            c.fail(path, "$jsonSchema keyword must be a number")
            return None
        exclusive = schema.get(flag, False)
        test = C.compare(exclusive_op if exclusive is True else op, QueryLiteral("number", arg))
        return lambda t: ~t.is_number() | test(t)

    return keyword


def _exclusive(bound: str) -> Callable[..., Validator | None]:
    def keyword(
        c: _SchemaCompiler, arg: Any, path: str, schema: Mapping[str, Any]
    ) -> Validator | None:
        if not isinstance(arg, bool):
            c.fail(path, "$jsonSchema keyword must be a boolean")
        elif bound not in schema:
            c.fail(path, f"$jsonSchema keyword requires '{bound}' to be present")
        return None  # applied by the bound keyword itself

    return keyword


def _length(compare: Callable[[Column, int], Column], name: str) -> Callable[..., Validator | None]:
    def keyword(c: _SchemaCompiler, arg: Any, path: str, _: Mapping[str, Any]) -> Validator | None:
        n = c.count(arg, path, name)
        if n is None:
            return None
        # JSON Schema counts code points; Spark's length does too.
        return lambda t: (
            ~t.is_string() | F.coalesce(compare(F.length(t.as_string()), n), F.lit(False))
        )

    return keyword


def _pattern(c: _SchemaCompiler, arg: Any, path: str, _: Mapping[str, Any]) -> Validator | None:
    try:
        regex = make_regex(arg, "")
    except BadLiteral as exc:
        c.fail(path, str(exc).replace("$regex", "$jsonSchema keyword 'pattern'"))
        return None
    test = C.regex_test(regex)
    return lambda t: ~t.is_string() | test(t)


# --------------------------------------------------------------------------- arrays


def _items(c: _SchemaCompiler, arg: Any, path: str, _: Mapping[str, Any]) -> Validator | None:
    if isinstance(arg, list):
        message = "'items' as an array of schemas is not supported by Sluice; use one schema"
        c.problems.error(path, ProblemCode.UNSUPPORTED_OPTION, message)
        return None
    element = c.schema(arg, path)
    if element is None:
        return None
    return lambda t: (
        ~t.is_array() | F.forall(typed_array(t.as_array()), lambda e: element(Typed.of_struct(e)))
    )


def _item_count(
    compare: Callable[[Column, int], Column], name: str
) -> Callable[..., Validator | None]:
    def keyword(c: _SchemaCompiler, arg: Any, path: str, _: Mapping[str, Any]) -> Validator | None:
        n = c.count(arg, path, name)
        if n is None:
            return None
        return lambda t: ~t.is_array() | F.coalesce(compare(F.size(t.as_array()), n), F.lit(False))

    return keyword


# --------------------------------------------------------------------------- objects


def _properties(c: _SchemaCompiler, arg: Any, path: str, _: Mapping[str, Any]) -> Validator | None:
    if not isinstance(arg, Mapping):
        c.fail(path, "$jsonSchema keyword 'properties' must be an object")
        return None
    compiled = {name: c.schema(sub, join_path(path, name)) for name, sub in arg.items()}
    subs = {name: v for name, v in compiled.items() if v is not None}
    if len(subs) != len(compiled):
        return None

    def check(t: Typed) -> Column:
        # Absent properties are fine (that is `required`'s business).
        checks = []
        for name, sub in subs.items():
            field = get_field(t.value, name)
            checks.append(field.isNull() | sub(Typed.of(field)))
        return ~t.is_object() | _conjoin(checks)

    return check


def _required(c: _SchemaCompiler, arg: Any, path: str, _: Mapping[str, Any]) -> Validator | None:
    if not isinstance(arg, list) or not arg or not all(isinstance(n, str) for n in arg):
        c.fail(path, "$jsonSchema keyword 'required' must be a non-empty array of strings")
        return None
    if len(set(arg)) != len(arg):
        c.fail(path, "$jsonSchema keyword 'required' array must not contain duplicate values")
        return None
    return lambda t: ~t.is_object() | _conjoin([get_field(t.value, n).isNotNull() for n in arg])


def _additional(
    c: _SchemaCompiler, arg: Any, path: str, schema: Mapping[str, Any]
) -> Validator | None:
    properties = schema.get("properties")
    declared = list(properties) if isinstance(properties, Mapping) else []
    if arg is True:
        return None
    if arg is False:
        return lambda t: (
            ~t.is_object()
            | F.forall(
                F.map_keys(as_object_map(t.value)),
                lambda k: k.isin(*declared) if declared else F.lit(False),
            )
        )
    if not isinstance(arg, Mapping):
        c.fail(path, "$jsonSchema keyword 'additionalProperties' must be a boolean or an object")
        return None
    extra = c.schema(arg, path)
    if extra is None:
        return None

    def check(t: Typed) -> Column:
        undeclared = F.map_filter(
            as_object_map(t.value), lambda k, _: ~k.isin(*declared) if declared else F.lit(True)
        )
        values = typed_array(F.map_values(undeclared))
        return ~t.is_object() | F.forall(values, lambda v: extra(Typed.of_struct(v)))

    return check


_KEYWORDS: dict[str, Callable[..., Validator | None]] = {
    "type": _type,
    "bsonType": _bson_type,
    "enum": _enum,
    "minimum": _bound("$gte", "$gt", "exclusiveMinimum"),
    "maximum": _bound("$lte", "$lt", "exclusiveMaximum"),
    "exclusiveMinimum": _exclusive("minimum"),
    "exclusiveMaximum": _exclusive("maximum"),
    "minLength": _length(operator.ge, "minLength"),
    "maxLength": _length(operator.le, "maxLength"),
    "pattern": _pattern,
    "items": _items,
    "minItems": _item_count(operator.ge, "minItems"),
    "maxItems": _item_count(operator.le, "maxItems"),
    "properties": _properties,
    "required": _required,
    "additionalProperties": _additional,
}
