"""Query operators one by one: membership, arrays, evaluation, element and logical operators.

Expected values follow the MongoDB query-operator reference pages (and, for `$mod`, C++
truncated division, which MongoDB uses: `-5 % 4 == -1`).
"""

from __future__ import annotations

from typing import Any

import pytest

from .test_harness import Row, evaluate, key, row_id


def rx(pattern: str, options: str = "") -> dict[str, Any]:
    """A regular-expression literal in Extended JSON."""
    return {"$regularExpression": {"pattern": pattern, "options": options}}


DATE = {"$date": "2024-01-01T00:00:00.000Z"}

MEMBERSHIP: list[Row] = [
    ({"a": {"$in": [1, "x"]}}, {"a": 1}, True),
    ({"a": {"$in": [1, "x"]}}, {"a": 1.0}, True),
    ({"a": {"$in": [1, "x"]}}, {"a": "x"}, True),
    ({"a": {"$in": [1, "x"]}}, {"a": "1"}, False),
    ({"a": {"$in": [1, "x"]}}, {"a": [2, "x"]}, True),
    ({"a": {"$in": [1, "x"]}}, {}, False),
    ({"a": {"$in": [1, "x"]}}, {"a": None}, False),
    ({"a": {"$in": [2.5, 7]}}, {"a": 2.5}, True),
    ({"a": {"$in": [2.5, 7]}}, {"a": 7.0}, True),
    ({"a": {"$in": []}}, {"a": 1}, False),
    ({"a": {"$in": [[1, 2]]}}, {"a": [1, 2]}, True),
    ({"a": {"$in": [[1, 2]]}}, {"a": [[1, 2]]}, True),
    ({"a": {"$in": [[1, 2]]}}, {"a": 1}, False),
    ({"a": {"$in": [rx("^ab"), 5]}}, {"a": "abc"}, True),
    ({"a": {"$in": [rx("^ab"), 5]}}, {"a": "xab"}, False),
    ({"a": {"$in": [rx("^ab"), 5]}}, {"a": 5}, True),
    ({"a": {"$in": [rx("^ab"), 5]}}, {"a": ["zz", "abz"]}, True),
    ({"a": {"$in": [{"b": 1}]}}, {"a": {"b": 1}}, True),
    ({"a": {"$in": [{"$date": "2024-01-01T00:00:00Z"}]}}, {"a": DATE}, True),
    ({"a": {"$in": [True]}}, {"a": True}, True),
    ({"a": {"$in": [True]}}, {"a": 1}, False),
    (
        {"a": {"$in": [{"$oid": "65a1b2c3d4e5f60718293a4b"}]}},
        {"a": {"$oid": "65a1b2c3d4e5f60718293a4b"}},
        True,
    ),
    ({"a": {"$nin": [1, "x"]}}, {"a": 2}, True),
    ({"a": {"$nin": [1, "x"]}}, {}, True),
    ({"a": {"$nin": [1, "x"]}}, {"a": [2, 1]}, False),
    ({"a": {"$ne": 5}}, {"a": 5}, False),
    ({"a": {"$ne": 5}}, {"a": 6}, True),
    ({"a": {"$ne": 5}}, {}, True),
    ({"a": {"$ne": 5}}, {"a": [5, 6]}, False),
    ({"a": {"$ne": 5}}, {"a": [6]}, True),
    ({"a": {"$ne": 5}}, {"a": "5"}, True),
]

ARRAY_OPERATORS: list[Row] = [
    ({"a": {"$all": [1, 2]}}, {"a": [2, 3, 1]}, True),
    ({"a": {"$all": [1, 2]}}, {"a": [1, 3]}, False),
    ({"a": {"$all": [1, 2]}}, {"a": 1}, False),
    ({"a": {"$all": [1, 2]}}, {"a": [[1, 2]]}, False),
    ({"a": {"$all": [1]}}, {"a": 1}, True),
    ({"a": {"$all": [[1, 2]]}}, {"a": [1, 2]}, True),
    ({"a": {"$all": [[1, 2]]}}, {"a": [[1, 2], 3]}, True),
    ({"a": {"$all": []}}, {"a": []}, False),
    ({"a": {"$all": []}}, {"a": [1]}, False),
    ({"a": {"$all": [rx("^x"), "yz"]}}, {"a": ["xa", "yz"]}, True),
    (
        {"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"c": 2}}]}},
        {"a": [{"b": 1}, {"c": 2}]},
        True,
    ),
    (
        {"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"c": 2}}]}},
        {"a": [{"b": 1}]},
        False,
    ),
    ({"a": {"$size": 2}}, {"a": [1, 2]}, True),
    ({"a": {"$size": 2}}, {"a": [1]}, False),
    ({"a": {"$size": 2}}, {"a": "ab"}, False),
    ({"a": {"$size": 2}}, {}, False),
    ({"a": {"$size": 2}}, {"a": [[1, 2]]}, False),
    ({"a": {"$size": 0}}, {"a": []}, True),
    ({"a": {"$size": 0}}, {"a": [[]]}, False),
    ({"a": {"$size": 2.0}}, {"a": [1, 2]}, True),
    ({"a.b": {"$size": 1}}, {"a": [{"b": [1, 2]}, {"b": [1]}]}, True),
    ({"a": {"$elemMatch": {"$gte": 80, "$lt": 85}}}, {"a": [82, 90]}, True),
    ({"a": {"$elemMatch": {"$gte": 80, "$lt": 85}}}, {"a": [90, 70]}, False),
    ({"a": {"$elemMatch": {"$in": ["x"]}}}, {"a": ["x"]}, True),
    ({"a": {"$elemMatch": {"$not": {"$gt": 5}}}}, {"a": [7, 3]}, True),
    ({"a": {"$elemMatch": {"$not": {"$gt": 5}}}}, {"a": [7, 8]}, False),
    ({"a": {"$elemMatch": {"b": {"$elemMatch": {"c": 1}}}}}, {"a": [{"b": [{"c": 1}]}]}, True),
    ({"a": {"$elemMatch": {"b": {"$elemMatch": {"c": 1}}}}}, {"a": [{"b": [{"c": 2}]}]}, False),
    ({"a": {"$elemMatch": {"$or": [{"b": 1}, {"c": 1}]}}}, {"a": [{"c": 1}]}, True),
    ({"a": {"$elemMatch": {"b.c": 1}}}, {"a": [{"b": [{"c": 1}]}]}, True),
    ({"a": {"$elemMatch": {}}}, {"a": [{}]}, True),
    ({"a": {"$elemMatch": {}}}, {"a": [1]}, False),
    ({"a": {"$elemMatch": {}}}, {"a": []}, False),
    ({"a": {"$elemMatch": {"0": 1}}}, {"a": [[1, 2]]}, True),
]

EVALUATION: list[Row] = [
    ({"a": {"$mod": [4, 0]}}, {"a": 8}, True),
    ({"a": {"$mod": [4, 0]}}, {"a": 9}, False),
    ({"a": {"$mod": [4, 0]}}, {"a": 8.5}, True),
    ({"a": {"$mod": [4, 0]}}, {"a": "8"}, False),
    ({"a": {"$mod": [4, 0]}}, {"a": [1, 12]}, True),
    ({"a": {"$mod": [4, 0]}}, {"a": -8}, True),
    ({"a": {"$mod": [4, -1]}}, {"a": -5}, True),
    ({"a": {"$mod": [4, -1]}}, {"a": 3}, False),
    ({"a": {"$mod": [-4, 1]}}, {"a": 5}, True),
    ({"a": {"$mod": [2.9, 1.1]}}, {"a": 3}, True),
    ({"a": {"$regex": "^ab"}}, {"a": "abc"}, True),
    ({"a": {"$regex": "^ab"}}, {"a": "xab"}, False),
    ({"a": {"$regex": "^ab"}}, {"a": 5}, False),
    ({"a": {"$regex": "^ab"}}, {"a": ["q", "ab"]}, True),
    ({"a": {"$regex": "^ab"}}, {}, False),
    ({"a": {"$regex": "b"}}, {"a": "abc"}, True),
    ({"a": {"$regex": "AB", "$options": "i"}}, {"a": "xaby"}, True),
    ({"a": {"$regex": "AB"}}, {"a": "xaby"}, False),
    ({"a": {"$regex": "^b", "$options": "m"}}, {"a": "a\nb"}, True),
    ({"a": {"$regex": "^b"}}, {"a": "a\nb"}, False),
    ({"a": {"$regex": "a.b", "$options": "s"}}, {"a": "a\nb"}, True),
    ({"a": {"$regex": "a.b"}}, {"a": "a\nb"}, False),
    ({"a": {"$regex": "a b # comment", "$options": "x"}}, {"a": "ab"}, True),
    ({"a": {"$regex": "é"}}, {"a": "café"}, True),
    ({"a": {"$regex": '"q"'}}, {"a": 'say "q"'}, True),
    ({"a": rx("^x", "i")}, {"a": "XY"}, True),
    ({"a": {"$regex": rx("y$")}}, {"a": "xy"}, True),
    ({"a": {"$not": rx("^x")}}, {"a": "xy"}, False),
    ({"a": {"$not": rx("^x")}}, {"a": "y"}, True),
    ({"a": {"$not": rx("^x")}}, {"a": 5}, True),
    ({"a": {"$not": {"$regex": "^x"}}}, {}, True),
]

ELEMENT: list[Row] = [
    ({"a": {"$exists": True}}, {"a": None}, True),
    ({"a": {"$exists": True}}, {}, False),
    ({"a": {"$exists": True}}, {"a": []}, True),
    ({"a": {"$exists": False}}, {}, True),
    ({"a": {"$exists": False}}, {"a": 0}, False),
    ({"a": {"$exists": 0}}, {}, True),
    ({"a": {"$exists": 1}}, {"a": 1}, True),
    ({"a.b": {"$exists": True}}, {"a": [{"c": 1}, {"b": None}]}, True),
    ({"a.b": {"$exists": True}}, {"a": [{"c": 1}]}, False),
    ({"a.b": {"$exists": True}}, {"a": [1, 2]}, False),
    ({"a": {"$type": "string"}}, {"a": "x"}, True),
    ({"a": {"$type": "string"}}, {"a": 1}, False),
    ({"a": {"$type": "string"}}, {"a": ["x", 1]}, True),
    ({"a": {"$type": 2}}, {"a": "x"}, True),
    ({"a": {"$type": "number"}}, {"a": 1}, True),
    ({"a": {"$type": "number"}}, {"a": 1.5}, True),
    ({"a": {"$type": "number"}}, {"a": "1"}, False),
    ({"a": {"$type": "number"}}, {"a": {"$numberLong": "5"}}, True),
    ({"a": {"$type": "int"}}, {"a": 1}, True),
    ({"a": {"$type": "int"}}, {"a": 3000000000}, False),
    ({"a": {"$type": "int"}}, {"a": 1.5}, False),
    ({"a": {"$type": "int"}}, {"a": 5.0}, False),
    ({"a": {"$type": 16}}, {"a": -7}, True),
    ({"a": {"$type": "long"}}, {"a": 3000000000}, True),
    ({"a": {"$type": "long"}}, {"a": 1}, False),
    ({"a": {"$type": "long"}}, {"a": {"$numberLong": "1"}}, True),
    ({"a": {"$type": 18}}, {"a": -3000000000}, True),
    ({"a": {"$type": "double"}}, {"a": 1.5}, True),
    ({"a": {"$type": "double"}}, {"a": 5.0}, True),
    ({"a": {"$type": "double"}}, {"a": 1e300}, True),
    ({"a": {"$type": "double"}}, {"a": 1}, False),
    ({"a": {"$type": 1}}, {"a": 2.5}, True),
    ({"a": {"$type": "decimal"}}, {"a": {"$numberDecimal": "1.5"}}, True),
    ({"a": {"$type": "bool"}}, {"a": False}, True),
    ({"a": {"$type": 8}}, {"a": 0}, False),
    ({"a": {"$type": "null"}}, {"a": None}, True),
    ({"a": {"$type": "null"}}, {}, False),
    ({"a": {"$type": 10}}, {"a": None}, True),
    ({"a": {"$type": "object"}}, {"a": {}}, True),
    ({"a": {"$type": "object"}}, {"a": DATE}, False),
    ({"a": {"$type": 3}}, {"a": {"b": 1}}, True),
    ({"a": {"$type": "array"}}, {"a": []}, True),
    ({"a": {"$type": "array"}}, {"a": [[1]]}, True),
    ({"a": {"$type": 4}}, {"a": 1}, False),
    ({"a": {"$type": "date"}}, {"a": DATE}, True),
    ({"a": {"$type": 9}}, {"a": "2024-01-01"}, False),
    ({"a": {"$type": "objectId"}}, {"a": {"$oid": "65a1b2c3d4e5f60718293a4b"}}, True),
    ({"a": {"$type": 7}}, {"a": "65a1b2c3d4e5f60718293a4b"}, False),
    ({"a": {"$type": ["string", "int"]}}, {"a": 1}, True),
    ({"a": {"$type": ["string", "int"]}}, {"a": "x"}, True),
    ({"a": {"$type": ["string", "int"]}}, {"a": True}, False),
    ({"a": {"$type": "regex"}}, {"a": "x"}, False),
]

LOGICAL: list[Row] = [
    ({"a": {"$not": {"$gt": 5}}}, {"a": 3}, True),
    ({"a": {"$not": {"$gt": 5}}}, {"a": 6}, False),
    ({"a": {"$not": {"$gt": 5}}}, {}, True),
    ({"a": {"$not": {"$gt": 5}}}, {"a": "x"}, True),
    ({"a": {"$not": {"$gt": 5}}}, {"a": [1, 6]}, False),
    ({"a": {"$not": {"$gt": 5}}}, {"a": [1, 2]}, True),
    ({"a": {"$not": {"$gt": 1, "$lt": 5}}}, {"a": 3}, False),
    ({"a": {"$not": {"$gt": 1, "$lt": 5}}}, {"a": 7}, True),
    ({"$and": [{"a": 1}, {"b": 2}]}, {"a": 1, "b": 2}, True),
    ({"$and": [{"a": 1}, {"b": 2}]}, {"a": 1}, False),
    ({"$or": [{"a": 1}, {"b": 2}]}, {"b": 2}, True),
    ({"$or": [{"a": 1}, {"b": 2}]}, {}, False),
    ({"$nor": [{"a": 1}, {"b": 2}]}, {}, True),
    ({"$nor": [{"a": 1}, {"b": 2}]}, {"a": 1}, False),
    ({"$and": [{"$or": [{"a": 1}, {"a": 2}]}, {"$nor": [{"b": 1}]}]}, {"a": 2, "b": 3}, True),
    ({"a": 1, "$or": [{"b": 1}, {"c": 1}]}, {"a": 1, "c": 1}, True),
    ({"a": 1, "$or": [{"b": 1}, {"c": 1}]}, {"a": 2, "c": 1}, False),
    ({"$comment": "why", "a": 1}, {"a": 1}, True),
    ({}, {"a": 1}, True),
    ({}, {}, True),
]

ROWS = MEMBERSHIP + ARRAY_OPERATORS + EVALUATION + ELEMENT + LOGICAL


@pytest.fixture(scope="module")
def results(spark: Any) -> dict[tuple[str, str], bool]:
    """Every row of this module, evaluated in a few Spark jobs."""
    return evaluate(spark, ROWS)


@pytest.mark.spark
@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_operator_matches_like_mongodb(row: Row, results: dict[tuple[str, str], bool]) -> None:
    filter_, doc, expected = row
    assert results[(key(filter_), key(doc))] is expected
