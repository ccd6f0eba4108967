"""Comparison (BSON cross-type order), boolean and conditional operators."""

from __future__ import annotations

import pytest

from ..test_expression_support import MISSING, Case, Err, case_ids, evaluate, mismatch

DATE = {"$date": "2024-01-01T00:00:00.000Z"}
DOC = {"n": None, "s": "b", "o": {"a": 1}, "arr": [1, 2], "d": DATE, "t": True, "zero": 0}

CASES: list[Case] = [
    ("eq int double", {"$eq": [1, 1.0]}, {}, True),
    ("eq int string", {"$eq": [1, "1"]}, {}, False),
    ("eq missing null is false", {"$eq": ["$nope", None]}, {}, False),
    ("eq null null", {"$eq": ["$n", None]}, DOC, True),
    ("eq missing missing", {"$eq": ["$nope", "$nada"]}, {}, True),
    ("lte missing null", {"$lte": ["$nope", None]}, {}, True),
    ("eq objects", {"$eq": ["$o", {"a": 1}]}, DOC, True),
    ("eq arrays", {"$eq": ["$arr", [1, 2]]}, DOC, True),
    ("eq arrays differ", {"$eq": ["$arr", [1, 3]]}, DOC, False),
    ("eq large longs exact", {"$eq": [9007199254740993, 9007199254740992]}, {}, False),
    ("ne", {"$ne": [1, 2]}, {}, True),
    ("gt null zero", {"$gt": [None, 0]}, {}, False),
    ("lt number string", {"$lt": [1, "a"]}, {}, True),
    ("gt string object", {"$gt": ["a", {"x": 1}]}, {}, False),
    ("lt object array", {"$lt": [{"a": 1}, [1]]}, {}, True),
    ("gt bool string", {"$gt": [True, "z"]}, {}, True),
    ("gt date bool", {"$gt": ["$d", True]}, DOC, True),
    ("lt array bool", {"$lt": [[1], True]}, {}, True),
    ("gt null missing", {"$gt": [None, "$nope"]}, {}, True),
    ("gt mixed numbers", {"$gt": [2, 1.5]}, {}, True),
    ("gte equal", {"$gte": [2, 2.0]}, {}, True),
    ("lt strings bytewise", {"$lt": ["B", "a"]}, {}, True),
    ("gt false true", {"$gt": [False, True]}, {}, False),
    ("dates compare", {"$lt": ["$d", {"$date": "2024-06-01T00:00:00Z"}]}, DOC, True),
    ("field vs literal", {"$gt": ["$s", "a"]}, DOC, True),
    ("cmp less", {"$cmp": [1, 2]}, {}, -1),
    ("cmp greater", {"$cmp": ["b", "a"]}, {}, 1),
    ("cmp equal", {"$cmp": ["a", "a"]}, {}, 0),
    ("and empty", {"$and": []}, {}, True),
    ("and truthy", {"$and": [1, "x", [], {}]}, {}, True),
    ("and zero", {"$and": [1, 0]}, {}, False),
    ("and null", {"$and": ["$n"]}, DOC, False),
    ("or empty", {"$or": []}, {}, False),
    ("or falsy", {"$or": [0, "$n", "$nope", False]}, DOC, False),
    ("or empty array truthy", {"$or": [0, []]}, {}, True),
    ("not zero", {"$not": [0]}, {}, True),
    ("not empty array", {"$not": [[]]}, {}, False),
    ("not string", {"$not": "$s"}, DOC, False),
    ("and short circuit", {"$and": [False, {"$divide": [1, 0]}]}, {}, False),
    ("and error", {"$and": [True, {"$divide": [1, 0]}]}, {}, Err("can't $divide by zero")),
    ("or short circuit", {"$or": ["$t", {"$divide": [1, 0]}]}, DOC, True),
    ("cond array true", {"$cond": [True, 1, 2]}, {}, 1),
    ("cond array false", {"$cond": [0, 1, 2]}, {}, 2),
    ("cond object form", {"$cond": {"if": "$nope", "then": "yes", "else": "no"}}, {}, "no"),
    ("cond field", {"$cond": [{"$gte": ["$zero", 0]}, "pos", "neg"]}, DOC, "pos"),
    (
        "cond guards division",
        {"$cond": [{"$eq": ["$b", 0]}, None, {"$divide": ["$a", "$b"]}]},
        {"a": 6, "b": 0},
        None,
    ),
    (
        "cond divides",
        {"$cond": [{"$eq": ["$b", 0]}, None, {"$divide": ["$a", "$b"]}]},
        {"a": 6, "b": 2},
        3.0,
    ),
    ("cond branch missing", {"$cond": [True, "$nope", 1]}, {}, MISSING),
    (
        "cond condition error",
        {"$cond": [{"$divide": [1, 0]}, 1, 2]},
        {},
        Err("can't $divide by zero"),
    ),
    ("ifNull missing", {"$ifNull": ["$a", "default"]}, {}, "default"),
    ("ifNull zero kept", {"$ifNull": ["$a", "default"]}, {"a": 0}, 0),
    ("ifNull n-ary", {"$ifNull": [None, "$b", 3]}, {}, 3),
    ("ifNull second", {"$ifNull": [None, "$b", 3]}, {"b": "x"}, "x"),
    ("ifNull last as is", {"$ifNull": [None, "$nope"]}, {}, MISSING),
    ("ifNull lazy error", {"$ifNull": [1, {"$divide": [1, 0]}]}, {}, 1),
    ("ifNull error", {"$ifNull": [None, {"$divide": [1, 0]}]}, {}, Err("can't $divide by zero")),
    (
        "switch matches",
        {
            "$switch": {
                "branches": [
                    {"case": {"$lt": ["$v", 0]}, "then": "neg"},
                    {"case": {"$gt": ["$v", 0]}, "then": "pos"},
                ],
                "default": "zero",
            }
        },
        {"v": 5},
        "pos",
    ),
    (
        "switch default",
        {
            "$switch": {
                "branches": [{"case": {"$lt": ["$v", 0]}, "then": "neg"}],
                "default": "other",
            }
        },
        {"v": 5},
        "other",
    ),
    (
        "switch no match",
        {"$switch": {"branches": [{"case": False, "then": 1}]}},
        {},
        Err("$switch could not find a matching branch for an input, and no default was specified."),
    ),
    (
        "switch lazy branches",
        {
            "$switch": {
                "branches": [{"case": True, "then": 1}, {"case": True, "then": {"$divide": [1, 0]}}]
            }
        },
        {},
        1,
    ),
]


@pytest.fixture(scope="module")
def outcomes(spark):
    return evaluate(spark, [(c[1], c[2]) for c in CASES])


@pytest.mark.spark
@pytest.mark.parametrize("index", range(len(CASES)), ids=case_ids(CASES))
def test_logic(outcomes, index):
    problem = mismatch(outcomes[index], CASES[index][3])
    assert problem is None, problem
