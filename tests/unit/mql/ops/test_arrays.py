"""Array operators, including `$map`/`$filter`/`$reduce` on Spark lambdas."""

from __future__ import annotations

import pytest

from ..test_expression_support import MISSING, Case, Err, case_ids, evaluate, mismatch

DOC = {"arr": [1, 2, 3], "items": [{"p": 1}, {"p": 2}], "n": None, "k": 10, "s": "x"}

CASES: list[Case] = [
    ("size", {"$size": "$arr"}, DOC, 3),
    ("size literal", {"$size": [[1, 2]]}, {}, 2),
    (
        "size missing",
        {"$size": "$nope"},
        {},
        Err("The argument to $size must be an array, but was of type: missing"),
    ),
    (
        "size int",
        {"$size": 5},
        {},
        Err("The argument to $size must be an array, but was of type: int"),
    ),
    ("arrayElemAt", {"$arrayElemAt": ["$arr", 0]}, DOC, 1),
    ("arrayElemAt negative", {"$arrayElemAt": ["$arr", -1]}, DOC, 3),
    ("arrayElemAt past end", {"$arrayElemAt": ["$arr", 5]}, DOC, MISSING),
    ("arrayElemAt before start", {"$arrayElemAt": ["$arr", -5]}, DOC, MISSING),
    ("arrayElemAt null", {"$arrayElemAt": ["$nope", 0]}, {}, None),
    (
        "arrayElemAt string",
        {"$arrayElemAt": ["$s", 0]},
        DOC,
        Err("$arrayElemAt's first argument must be an array, but is string"),
    ),
    (
        "arrayElemAt fraction",
        {"$arrayElemAt": ["$arr", 1.5]},
        DOC,
        Err("$arrayElemAt's second argument must be representable as a 32-bit integer: 1.5"),
    ),
    ("arrayElemAt whole double", {"$arrayElemAt": ["$arr", 1.0]}, DOC, 2),
    (
        "arrayElemAt string index",
        {"$arrayElemAt": ["$arr", "a"]},
        DOC,
        Err("$arrayElemAt's second argument must be a numeric value, but is string"),
    ),
    ("first", {"$first": "$arr"}, DOC, 1),
    ("last", {"$last": "$arr"}, DOC, 3),
    ("first empty", {"$first": [[]]}, {}, MISSING),
    ("first missing", {"$first": "$nope"}, {}, None),
    ("first int", {"$first": 5}, {}, Err("$first's argument must be an array, but is int")),
    ("in", {"$in": [2, "$arr"]}, DOC, True),
    ("in absent", {"$in": [5, "$arr"]}, DOC, False),
    ("in cross numeric", {"$in": [1, [1.0]]}, {}, True),
    ("in null", {"$in": [None, [None]]}, {}, True),
    (
        "in not array",
        {"$in": [1, "$s"]},
        DOC,
        Err("$in requires an array as a second argument, found: string"),
    ),
    ("isArray", {"$isArray": "$arr"}, DOC, True),
    ("isArray literal", {"$isArray": [[1]]}, {}, True),
    ("isArray string", {"$isArray": ["x"]}, {}, False),
    ("concatArrays", {"$concatArrays": [[1], [2, 3]]}, {}, [1, 2, 3]),
    ("concatArrays fields", {"$concatArrays": ["$arr", [4]]}, DOC, [1, 2, 3, 4]),
    ("concatArrays null", {"$concatArrays": [[1], "$n"]}, DOC, None),
    (
        "concatArrays int",
        {"$concatArrays": [[1], 5]},
        {},
        Err("$concatArrays only supports arrays, not int"),
    ),
    ("slice head", {"$slice": [[1, 2, 3, 4], 2]}, {}, [1, 2]),
    ("slice tail", {"$slice": [[1, 2, 3, 4], -2]}, {}, [3, 4]),
    ("slice position", {"$slice": [[1, 2, 3, 4], 1, 2]}, {}, [2, 3]),
    ("slice negative position", {"$slice": [[1, 2, 3, 4], -3, 2]}, {}, [2, 3]),
    ("slice too many", {"$slice": [[1, 2], 10]}, {}, [1, 2]),
    ("slice past end", {"$slice": [[1, 2], 5, 1]}, {}, []),
    (
        "slice zero count",
        {"$slice": [[1, 2], 0, 0]},
        {},
        Err("Third argument to $slice must be positive: 0"),
    ),
    (
        "slice string",
        {"$slice": ["x", 1]},
        {},
        Err("First argument to $slice must be an array, but is of type: string"),
    ),
    ("slice null", {"$slice": ["$n", 1]}, DOC, None),
    ("map", {"$map": {"input": "$arr", "in": {"$multiply": ["$$this", 2]}}}, DOC, [2, 4, 6]),
    ("map as", {"$map": {"input": [1, 2], "as": "n", "in": {"$add": ["$$n", 1]}}}, {}, [2, 3]),
    ("map missing becomes null", {"$map": {"input": [1, 2], "in": "$$REMOVE"}}, {}, [None, None]),
    ("map element field", {"$map": {"input": "$items", "in": "$$this.p"}}, DOC, [1, 2]),
    (
        "map outer field",
        {"$map": {"input": [1, 2], "in": {"$add": ["$$this", "$k"]}}},
        DOC,
        [11, 12],
    ),
    (
        "map nested",
        {
            "$map": {
                "input": [[1, 2], [3]],
                "as": "r",
                "in": {"$map": {"input": "$$r", "in": {"$multiply": ["$$this", 2]}}},
            }
        },
        {},
        [[2, 4], [6]],
    ),
    (
        "map nested outer var",
        {
            "$map": {
                "input": [1, 2],
                "as": "a",
                "in": {"$map": {"input": [10], "as": "b", "in": {"$add": ["$$a", "$$b"]}}},
            }
        },
        {},
        [[11], [12]],
    ),
    ("map null", {"$map": {"input": "$n", "in": 1}}, DOC, None),
    ("map int", {"$map": {"input": 5, "in": 1}}, {}, Err("input to $map must be an array not int")),
    (
        "map element error",
        {"$map": {"input": [1, 0], "in": {"$divide": [1, "$$this"]}}},
        {},
        Err("can't $divide by zero"),
    ),
    ("map empty", {"$map": {"input": [], "in": 1}}, {}, []),
    ("filter", {"$filter": {"input": [1, 2, 3, 4], "cond": {"$gt": ["$$this", 2]}}}, {}, [3, 4]),
    (
        "filter as",
        {"$filter": {"input": "$items", "as": "it", "cond": {"$eq": ["$$it.p", 2]}}},
        DOC,
        [{"p": 2}],
    ),
    (
        "filter limit",
        {"$filter": {"input": [1, 2, 3, 4], "cond": {"$gt": ["$$this", 2]}, "limit": 1}},
        {},
        [3],
    ),
    ("filter null", {"$filter": {"input": "$n", "cond": True}}, DOC, None),
    (
        "filter error",
        {"$filter": {"input": [1, 0], "cond": {"$divide": [1, "$$this"]}}},
        {},
        Err("can't $divide by zero"),
    ),
    (
        "reduce sum",
        {"$reduce": {"input": "$arr", "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}},
        DOC,
        6,
    ),
    (
        "reduce concat",
        {
            "$reduce": {
                "input": ["a", "b", "c"],
                "initialValue": "",
                "in": {"$concat": ["$$value", "$$this"]},
            }
        },
        {},
        "abc",
    ),
    ("reduce empty", {"$reduce": {"input": [], "initialValue": 7, "in": 1}}, {}, 7),
    ("reduce null", {"$reduce": {"input": "$n", "initialValue": 0, "in": 1}}, DOC, None),
    (
        "reduce not array",
        {"$reduce": {"input": 5, "initialValue": 0, "in": 1}},
        {},
        Err("$reduce requires that 'input' be an array, found: 5"),
    ),
    (
        "reduce arrays",
        {
            "$reduce": {
                "input": [[1], [2, 3]],
                "initialValue": [],
                "in": {"$concatArrays": ["$$value", "$$this"]},
            }
        },
        {},
        [1, 2, 3],
    ),
    (
        "reduce error",
        {"$reduce": {"input": [1, 0], "initialValue": 0, "in": {"$divide": ["$$value", "$$this"]}}},
        {},
        Err("can't $divide by zero"),
    ),
    ("indexOfArray", {"$indexOfArray": [[1, 2, 3, 2], 2]}, {}, 1),
    ("indexOfArray start", {"$indexOfArray": [[1, 2, 3, 2], 2, 2]}, {}, 3),
    ("indexOfArray absent", {"$indexOfArray": [[1, 2], 5]}, {}, -1),
    ("indexOfArray null", {"$indexOfArray": ["$n", 1]}, DOC, None),
    ("reverseArray", {"$reverseArray": "$arr"}, DOC, [3, 2, 1]),
    ("range", {"$range": [0, 5]}, {}, [0, 1, 2, 3, 4]),
    ("range step", {"$range": [0, 10, 3]}, {}, [0, 3, 6, 9]),
    ("range down", {"$range": [5, 0, -2]}, {}, [5, 3, 1]),
    ("range empty", {"$range": [0, 0]}, {}, []),
    ("range zero step", {"$range": [0, 5, 0]}, {}, Err("$range requires a non-zero step value")),
    ("allElementsTrue", {"$allElementsTrue": [[1, True]]}, {}, True),
    ("allElementsTrue false", {"$allElementsTrue": [[1, 0]]}, {}, False),
    ("anyElementTrue", {"$anyElementTrue": [[0, None, 1]]}, {}, True),
    ("anyElementTrue empty", {"$anyElementTrue": [[]]}, {}, False),
]


@pytest.fixture(scope="module")
def outcomes(spark):
    return evaluate(spark, [(c[1], c[2]) for c in CASES])


@pytest.mark.spark
@pytest.mark.parametrize("index", range(len(CASES)), ids=case_ids(CASES))
def test_arrays(outcomes, index):
    problem = mismatch(outcomes[index], CASES[index][3])
    assert problem is None, problem
