"""Arithmetic operators against MongoDB's documented results (int vs double kept apart)."""

from __future__ import annotations

import pytest

from ..test_expression_support import MISSING, Approx, Case, Err, case_ids, evaluate, mismatch

D = {"$date": "2024-01-01T00:00:00.000Z"}
DOC = {"d": D, "e": {"$date": "2024-01-01T00:01:00.000Z"}, "x": "s", "n": None}

CASES: list[Case] = [
    ("add ints stays int", {"$add": [1, 2]}, {}, 3),
    ("add int double", {"$add": [1, 2.5]}, {}, 3.5),
    ("add doubles", {"$add": [1.5, 2.5]}, {}, 4.0),
    ("add nothing", {"$add": []}, {}, 0),
    ("add missing is null", {"$add": ["$nope", 1]}, {}, None),
    ("add null is null", {"$add": [1, "$n"]}, DOC, None),
    ("add int32 overflow widens", {"$add": [2147483647, 1]}, {}, 2147483648),
    (
        "add int64 overflow to double",
        {"$add": [9223372036854775807, 1]},
        {},
        9.223372036854775807e18,
    ),
    ("add date millis", {"$add": ["$d", 1000]}, DOC, {"$date": "2024-01-01T00:00:01.000Z"}),
    ("add date double rounds", {"$add": ["$d", 1.5]}, DOC, {"$date": "2024-01-01T00:00:00.002Z"}),
    (
        "add two dates",
        {"$add": ["$d", "$e"]},
        DOC,
        Err("only one date allowed in an $add expression"),
    ),
    (
        "add string",
        {"$add": [1, "$x"]},
        DOC,
        Err("$add only supports numeric or date types, not string"),
    ),
    ("add null before string", {"$add": ["$n", "$x"]}, DOC, None),
    (
        "add string before null",
        {"$add": ["$x", "$n"]},
        DOC,
        Err("$add only supports numeric or date types, not string"),
    ),
    ("add bool", {"$add": [1, True]}, {}, Err("not bool")),
    ("subtract ints", {"$subtract": [5, 3]}, {}, 2),
    ("subtract double", {"$subtract": [5, 2.5]}, {}, 2.5),
    ("subtract date number", {"$subtract": ["$e", 60000]}, DOC, D),
    ("subtract dates is millis", {"$subtract": ["$e", "$d"]}, DOC, 60000),
    (
        "subtract string from date",
        {"$subtract": ["$d", "$x"]},
        DOC,
        Err("can't $subtract string from Date"),
    ),
    ("subtract from string", {"$subtract": ["$x", 1]}, DOC, Err("can't $subtract int from string")),
    (
        "subtract date from number",
        {"$subtract": [1, "$d"]},
        DOC,
        Err("can't $subtract date from int"),
    ),
    ("subtract null", {"$subtract": ["$n", 1]}, DOC, None),
    (
        "subtract long overflow",
        {"$subtract": [-9223372036854775807, 10]},
        {},
        -9.223372036854775817e18,
    ),
    ("multiply ints", {"$multiply": [2, 3]}, {}, 6),
    ("multiply int double", {"$multiply": [2, 1.5]}, {}, 3.0),
    ("multiply nothing", {"$multiply": []}, {}, 1),
    (
        "multiply string",
        {"$multiply": [2, "$x"]},
        DOC,
        Err("$multiply only supports numeric types, not string"),
    ),
    ("multiply null", {"$multiply": [2, "$n"]}, DOC, None),
    ("multiply overflow", {"$multiply": [9223372036854775807, 2]}, {}, 1.8446744073709552e19),
    ("divide always double", {"$divide": [6, 3]}, {}, 2.0),
    ("divide fraction", {"$divide": [1, 4]}, {}, 0.25),
    ("divide by zero", {"$divide": [1, 0]}, {}, Err("can't $divide by zero")),
    ("divide by zero double", {"$divide": [1, 0.0]}, {}, Err("can't $divide by zero")),
    (
        "divide string",
        {"$divide": ["$x", 1]},
        DOC,
        Err("$divide only supports numeric types, not string and int"),
    ),
    ("divide null", {"$divide": ["$n", 0]}, DOC, None),
    ("mod ints", {"$mod": [7, 3]}, {}, 1),
    ("mod sign of dividend", {"$mod": [-7, 3]}, {}, -1),
    ("mod double", {"$mod": [7.5, 2]}, {}, 1.5),
    ("mod zero", {"$mod": [7, 0]}, {}, Err("can't $mod by zero")),
    (
        "mod string",
        {"$mod": ["$x", 2]},
        DOC,
        Err("$mod only supports numeric types, not string and int"),
    ),
    ("abs int", {"$abs": -5}, {}, 5),
    ("abs double", {"$abs": -2.5}, {}, 2.5),
    ("abs null", {"$abs": "$n"}, DOC, None),
    ("abs string", {"$abs": "$x"}, DOC, Err("$abs only supports numeric types, not string")),
    ("ceil double", {"$ceil": 1.2}, {}, 2.0),
    ("ceil int unchanged", {"$ceil": 5}, {}, 5),
    ("floor negative", {"$floor": -1.2}, {}, -2.0),
    ("ceil huge double", {"$ceil": 1e300}, {}, 1e300),
    ("round half to even", {"$round": 2.5}, {}, 2.0),
    ("round half to even up", {"$round": 3.5}, {}, 4.0),
    ("round places", {"$round": [1.2345, 2]}, {}, Approx(1.23)),
    ("round negative places", {"$round": [1234, -2]}, {}, 1200),
    ("round negative places even", {"$round": [1250, -2]}, {}, 1200),
    ("round int unchanged", {"$round": 5}, {}, 5),
    (
        "round bad precision",
        {"$round": [1.5, 1.5]},
        {},
        Err("precision argument to  $round must be a integral value"),
    ),
    (
        "round precision range",
        {"$round": [1.5, 101]},
        {},
        Err("cannot apply $round with precision value 101 value must be in [-20, 100]"),
    ),
    ("round null precision", {"$round": [1.5, "$n"]}, DOC, None),
    ("trunc positive", {"$trunc": 2.7}, {}, 2.0),
    ("trunc negative", {"$trunc": -2.7}, {}, -2.0),
    ("trunc places", {"$trunc": [1.2789, 2]}, {}, Approx(1.27)),
    ("trunc negative places", {"$trunc": [1299, -2]}, {}, 1200),
    ("pow ints", {"$pow": [2, 10]}, {}, 1024),
    ("pow negative exponent", {"$pow": [2, -1]}, {}, 0.5),
    ("pow double base", {"$pow": [2.0, 2]}, {}, 4.0),
    (
        "pow zero negative",
        {"$pow": [0, -1]},
        {},
        Err("$pow cannot take a base of 0 and a negative exponent"),
    ),
    ("pow exact long", {"$pow": [3, 39]}, {}, 4052555153018976267),
    ("pow too big for long", {"$pow": [2, 63]}, {}, 9.223372036854775808e18),
    ("pow minus one", {"$pow": [-1, 3]}, {}, -1),
    ("pow string", {"$pow": ["$x", 2]}, DOC, Err("$pow's base must be numeric, not string")),
    ("sqrt", {"$sqrt": 16}, {}, 4.0),
    (
        "sqrt negative",
        {"$sqrt": -1},
        {},
        Err("$sqrt's argument must be greater than or equal to 0"),
    ),
    ("exp", {"$exp": 0}, {}, 1.0),
    ("ln", {"$ln": 1}, {}, 0.0),
    ("ln zero", {"$ln": 0}, {}, Err("$ln's argument must be a positive number, but is 0")),
    ("log10", {"$log10": 100}, {}, 2.0),
    (
        "log10 negative",
        {"$log10": -1},
        {},
        Err("$log10's argument must be a positive number, but is -1"),
    ),
    ("log base", {"$log": [8, 2]}, {}, Approx(3.0)),
    (
        "log base one",
        {"$log": [8, 1]},
        {},
        Err("$log's base must be a positive number not equal to 1, but is 1"),
    ),
    ("sin", {"$sin": 0}, {}, 0.0),
    ("asin out of domain", {"$asin": 2}, {}, Err("cannot apply $asin to 2, value must in [-1,1]")),
    ("degrees", {"$radiansToDegrees": 0}, {}, 0.0),
    ("field arithmetic", {"$add": [{"$multiply": ["$p", "$q"]}, 1]}, {"p": 3, "q": 4}, 13),
    (
        "argument error wins",
        {"$add": [{"$divide": [1, 0]}, "$x"]},
        DOC,
        Err("can't $divide by zero"),
    ),
    ("missing field chain", {"$multiply": ["$nope", 2]}, {}, None),
]


@pytest.fixture(scope="module")
def outcomes(spark):
    return evaluate(spark, [(c[1], c[2]) for c in CASES])


@pytest.mark.spark
@pytest.mark.parametrize("index", range(len(CASES)), ids=case_ids(CASES))
def test_arithmetic(outcomes, index):
    problem = mismatch(outcomes[index], CASES[index][3])
    assert problem is None, problem


def test_missing_marker_is_distinct():
    assert MISSING is not None
