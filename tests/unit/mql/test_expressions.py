"""Compile-time problems: exact `{code, path}` and the key words of each message."""

from __future__ import annotations

import pytest

from .test_expression_support import compile_problems

# (id, expression, [(code, path, message fragment), ...]) -- the expression sits at path /e.
PROBLEMS = [
    (
        "unknown operator hint",
        {"$flor": 1.5},
        [("unknown_operator", "/e/$flor", "did you mean '$floor'?")],
    ),
    (
        "unknown operator nested",
        {"$add": [1, {"$bogus": 2}]},
        [("unknown_operator", "/e/$add/1/$bogus", "Unrecognized expression '$bogus'")],
    ),
    (
        "all problems collected",
        {"$add": [{"$x1": 1}, {"$x2": 2}]},
        [
            ("unknown_operator", "/e/$add/0/$x1", "$x1"),
            ("unknown_operator", "/e/$add/1/$x2", "$x2"),
        ],
    ),
    (
        "divide arity",
        {"$divide": [1]},
        [
            (
                "invalid_arguments",
                "/e/$divide",
                "Expression $divide takes exactly 2 arguments. 1 were passed in.",
            )
        ],
    ),
    (
        "round arity",
        {"$round": [1, 2, 3]},
        [
            (
                "invalid_arguments",
                "/e/$round",
                "takes at least 1 arguments, and at most 2, but 3 were passed in",
            )
        ],
    ),
    (
        "ifNull arity",
        {"$ifNull": ["$a"]},
        [("invalid_arguments", "/e/$ifNull", "$ifNull needs at least two arguments, had: 1")],
    ),
    (
        "toInt arity",
        {"$toInt": [1, 2]},
        [("invalid_arguments", "/e/$toInt", "$toInt requires a single argument, got 2")],
    ),
    ("now unsupported", "$$NOW", [("unsupported_option", "/e", "$$NOW")]),
    ("cluster time unsupported", "$$CLUSTER_TIME", [("unsupported_option", "/e", "CLUSTER_TIME")]),
    ("user roles unsupported", "$$USER_ROLES", [("unsupported_option", "/e", "USER_ROLES")]),
    (
        "function unsupported",
        {"$function": {"body": "x", "args": [], "lang": "js"}},
        [("unsupported_option", "/e/$function", "$function")],
    ),
    (
        "accumulator unsupported",
        {"$accumulator": {}},
        [("unsupported_option", "/e/$accumulator", "$accumulator")],
    ),
    (
        "setUnion unsupported",
        {"$setUnion": [[1]]},
        [("unsupported_option", "/e/$setUnion", "$setUnion")],
    ),
    (
        "meta keyword unsupported",
        {"$meta": "textScore"},
        [("unsupported_option", "/e/$meta", "textScore")],
    ),
    (
        "undefined variable",
        "$$nothere",
        [("invalid_arguments", "/e", "Use of undefined variable: nothere")],
    ),
    (
        "two operators",
        {"$add": [1], "$sum": [2]},
        [("invalid_arguments", "/e", "exactly one field")],
    ),
    (
        "cond missing else",
        {"$cond": {"if": 1, "then": 2}},
        [("invalid_arguments", "/e/$cond", "Missing 'else' parameter to $cond")],
    ),
    (
        "cond unknown key",
        {"$cond": {"if": 1, "then": 2, "else": 3, "x": 4}},
        [("invalid_arguments", "/e/$cond/x", "Unrecognized parameter to $cond: x")],
    ),
    (
        "map unknown key",
        {"$map": {"input": [], "in": 1, "bad": 2}},
        [("invalid_arguments", "/e/$map/bad", "bad")],
    ),
    (
        "map bad variable",
        {"$map": {"input": [], "as": "Bad", "in": 1}},
        [("invalid_arguments", "/e/$map/as", "starts with an invalid character")],
    ),
    (
        "switch branch then",
        {"$switch": {"branches": [{"case": True}]}},
        [
            (
                "invalid_arguments",
                "/e/$switch/branches/0",
                "$switch requires each branch have a 'then' expression.",
            )
        ],
    ),
    (
        "bad regex",
        {"$regexMatch": {"input": "a", "regex": "["}},
        [("invalid_arguments", "/e/$regexMatch/regex", "Invalid Regex in $regexMatch")],
    ),
    (
        "bad regex flag",
        {"$regexMatch": {"input": "a", "regex": "a", "options": "q"}},
        [("invalid_arguments", "/e/$regexMatch/options", "invalid flag in regex options: q")],
    ),
    (
        "bad date format",
        {"$dateToString": {"date": "$d", "format": "%Q"}},
        [
            (
                "invalid_arguments",
                "/e/$dateToString/format",
                "Invalid format character '%Q' in format string",
            )
        ],
    ),
    (
        "computed date format",
        {"$dateToString": {"date": "$d", "format": "$f"}},
        [("unsupported_option", "/e/$dateToString/format", "constant 'format'")],
    ),
    (
        "bad unit",
        {"$dateAdd": {"startDate": "$d", "unit": "fortnight", "amount": 1}},
        [("invalid_arguments", "/e/$dateAdd/unit", "unknown time unit value: fortnight")],
    ),
    (
        "bad zone",
        {"$year": {"date": "$d", "timezone": "Mars/Base"}},
        [
            (
                "invalid_arguments",
                "/e/$year/timezone",
                'unrecognized time zone identifier: "Mars/Base"',
            )
        ],
    ),
    (
        "bad convert target",
        {"$convert": {"input": 1, "to": "nonsense"}},
        [("invalid_arguments", "/e/$convert/to", "Unknown type name: nonsense")],
    ),
    (
        "bad field path",
        "$a..b",
        [("invalid_arguments", "/e", "FieldPath field names may not be empty strings")],
    ),
    ("dollar alone", "$", [("invalid_arguments", "/e", "'$' by itself is not a valid FieldPath")]),
    ("dotted object key", {"a.b": 1}, [("invalid_arguments", "/e/a.b", "may not contain '.'")]),
    (
        "escaped pointer",
        {"x": {"$add": [{"$nope/x": 1}]}},
        [("unknown_operator", "/e/x/$add/0/$nope~1x", "$nope/x")],
    ),
]


@pytest.mark.spark
@pytest.mark.parametrize("index", range(len(PROBLEMS)), ids=[p[0] for p in PROBLEMS])
def test_compile_problems(spark, index):
    _, expr, expected = PROBLEMS[index]
    found = compile_problems(expr)
    assert [(p["code"], p["path"]) for p in found] == [(code, path) for code, path, _ in expected]
    for problem, (_, _, fragment) in zip(found, expected, strict=True):
        assert fragment in problem["message"]


@pytest.mark.spark
@pytest.mark.parametrize(
    "expr",
    [
        {"$add": ["$a", 1]},
        {"$cond": {"if": "$a", "then": 1, "else": 2}},
        {"$map": {"input": "$arr", "as": "item", "in": "$$item.x"}},
        {"$dateTrunc": {"date": "$d", "unit": "week", "startOfWeek": "mon"}},
        {"$meta": "stream.source.topic"},
        {"$let": {"vars": {"CURRENT": "$o"}, "in": "$x"}},
    ],
)
def test_valid_expressions_have_no_problems(spark, expr):
    assert compile_problems(expr) == []
