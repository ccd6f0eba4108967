"""`$type`, `$isNumber`, `$convert` and the `$to*` shortcuts."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ..test_expression_support import Case, Err, case_ids, evaluate, mismatch

OID = "507f1f77bcf86cd799439011"
DATE = {"$date": "2024-01-01T00:00:00.000Z"}
DOC = {"d": DATE, "oid": {"$oid": OID}, "n": None, "big": 3000000000, "f": 2.5}
#: The ObjectId's embedded creation time (its first four bytes, in seconds).
OID_TIME = datetime.fromtimestamp(int(OID[:8], 16), tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
CONVERT = "in $convert with no onError value"

CASES: list[Case] = [
    ("type int", {"$type": 1}, {}, "int"),
    ("type long", {"$type": "$big"}, DOC, "long"),
    ("type double", {"$type": "$f"}, DOC, "double"),
    ("type string", {"$type": "x"}, {}, "string"),
    ("type bool", {"$type": True}, {}, "bool"),
    ("type null", {"$type": "$n"}, DOC, "null"),
    ("type missing", {"$type": "$nope"}, {}, "missing"),
    ("type object", {"$type": {"$literal": {"a": 1}}}, {}, "object"),
    ("type array", {"$type": [[1]]}, {}, "array"),
    ("type date", {"$type": "$d"}, DOC, "date"),
    ("type objectId", {"$type": "$oid"}, DOC, "objectId"),
    ("type decimal", {"$type": {"$toDecimal": 1}}, {}, "decimal"),
    ("type computed double", {"$type": {"$divide": [1, 2]}}, {}, "double"),
    ("isNumber", {"$isNumber": "$f"}, DOC, True),
    ("isNumber string", {"$isNumber": "1"}, {}, False),
    ("toInt string", {"$toInt": "42"}, {}, 42),
    (
        "toInt fraction string",
        {"$toInt": "4.5"},
        {},
        Err(f"Failed to parse number '4.5' {CONVERT}: Did not consume whole string."),
    ),
    (
        "toInt hello",
        {"$toInt": "hello"},
        {},
        Err(f"Failed to parse number 'hello' {CONVERT}: Did not consume whole string."),
    ),
    ("toInt empty", {"$toInt": ""}, {}, Err(f"Failed to parse number '' {CONVERT}: No digits")),
    (
        "toInt overflow string",
        {"$toInt": "2147483648"},
        {},
        Err(f"Failed to parse number '2147483648' {CONVERT}: Overflow"),
    ),
    ("toInt hex", {"$toInt": "0x1A"}, {}, Err(f"Illegal hexadecimal input {CONVERT}: 0x1A")),
    ("toInt truncates", {"$toInt": 4.9}, {}, 4),
    ("toInt truncates negative", {"$toInt": -4.9}, {}, -4),
    ("toInt bool", {"$toInt": True}, {}, 1),
    (
        "toInt long overflow",
        {"$toInt": "$big"},
        DOC,
        Err(f"Conversion would overflow target type {CONVERT}"),
    ),
    (
        "toInt date",
        {"$toInt": "$d"},
        DOC,
        Err(f"Unsupported conversion from date to int {CONVERT}"),
    ),
    ("toInt null", {"$toInt": "$n"}, DOC, None),
    ("toInt missing", {"$toInt": "$nope"}, {}, None),
    ("toLong string", {"$toLong": "9000000000"}, {}, 9000000000),
    ("toLong date", {"$toLong": "$d"}, DOC, 1704067200000),
    ("toDouble string", {"$toDouble": "1.5"}, {}, 1.5),
    ("toDouble exponent", {"$toDouble": "1e3"}, {}, 1000.0),
    ("toDouble int", {"$toDouble": 5}, {}, 5.0),
    ("toDouble bool", {"$toDouble": True}, {}, 1.0),
    ("toDouble date", {"$toDouble": "$d"}, DOC, 1704067200000.0),
    (
        "toDouble bad",
        {"$toDouble": "abc"},
        {},
        Err(f"Failed to parse number 'abc' {CONVERT}: Did not consume whole string."),
    ),
    ("toDecimal int", {"$toDecimal": 5}, {}, {"$numberDecimal": "5"}),
    ("toDecimal string", {"$toDecimal": "1.5"}, {}, {"$numberDecimal": "1.5"}),
    ("toString int", {"$toString": 5}, {}, "5"),
    ("toString double", {"$toString": 2.5}, {}, "2.5"),
    ("toString whole double", {"$toString": {"$toDouble": 1}}, {}, "1"),
    ("toString bool", {"$toString": True}, {}, "true"),
    ("toString date", {"$toString": "$d"}, DOC, "2024-01-01T00:00:00.000Z"),
    ("toString objectId", {"$toString": "$oid"}, DOC, OID),
    ("toString null", {"$toString": "$n"}, DOC, None),
    ("toDate string", {"$toDate": "2024-03-05"}, {}, {"$date": "2024-03-05T00:00:00.000Z"}),
    (
        "toDate iso offset",
        {"$toDate": "2024-03-05T10:00:00+02:00"},
        {},
        {"$date": "2024-03-05T08:00:00.000Z"},
    ),
    ("toDate bad string", {"$toDate": "bad"}, {}, Err("Error parsing date string 'bad'")),
    ("toDate long millis", {"$toDate": 1704067200000}, {}, DATE),
    ("toDate double millis", {"$toDate": 1704067200000.0}, {}, DATE),
    ("toDate int", {"$toDate": 5}, {}, Err(f"Unsupported conversion from int to date {CONVERT}")),
    ("toDate objectId", {"$toDate": "$oid"}, DOC, {"$date": OID_TIME}),
    ("toBool zero", {"$toBool": 0}, {}, False),
    ("toBool empty string", {"$toBool": ""}, {}, True),
    ("toBool false string", {"$toBool": "false"}, {}, True),
    ("toBool double", {"$toBool": 2.5}, {}, True),
    ("toBool null", {"$toBool": "$n"}, DOC, None),
    ("toObjectId", {"$toObjectId": OID}, {}, {"$oid": OID}),
    (
        "toObjectId bad",
        {"$toObjectId": "xyz"},
        {},
        Err(f"Failed to parse objectId 'xyz' {CONVERT}"),
    ),
    ("convert onError", {"$convert": {"input": "abc", "to": "int", "onError": -1}}, {}, -1),
    ("convert onNull", {"$convert": {"input": "$n", "to": "int", "onNull": 0}}, DOC, 0),
    ("convert missing", {"$convert": {"input": "$nope", "to": "int"}}, {}, None),
    ("convert numeric to", {"$convert": {"input": "5", "to": 16}}, {}, 5),
    ("convert to double", {"$convert": {"input": "5", "to": "double"}}, {}, 5.0),
    ("convert to null", {"$convert": {"input": "5", "to": None}}, {}, None),
    (
        "convert keeps input error",
        {"$convert": {"input": {"$divide": [1, 0]}, "to": "int", "onError": 0}},
        {},
        Err("can't $divide by zero"),
    ),
    (
        "convert unsupported",
        {"$convert": {"input": 1, "to": "object"}},
        {},
        Err(f"Unsupported conversion from int to object {CONVERT}"),
    ),
    ("convert type object form", {"$convert": {"input": "5", "to": {"type": "int"}}}, {}, 5),
    (
        "convert onError expression",
        {"$convert": {"input": "x", "to": "int", "onError": {"$concat": ["bad:", "x"]}}},
        {},
        "bad:x",
    ),
]


@pytest.fixture(scope="module")
def outcomes(spark):
    return evaluate(spark, [(c[1], c[2]) for c in CASES])


@pytest.mark.spark
@pytest.mark.parametrize("index", range(len(CASES)), ids=case_ids(CASES))
def test_types(outcomes, index):
    problem = mismatch(outcomes[index], CASES[index][3])
    assert problem is None, problem
