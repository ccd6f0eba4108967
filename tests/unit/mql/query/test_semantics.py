"""Query-filter semantics: comparisons, type bracketing, null/missing and array traversal.

Expected values follow MongoDB's documented query behaviour. The null table is MongoDB's own
`jstests/core/query/null_query_semantics.js` (FCV 8.0 expectations), minus the documents that
hold `undefined`, which JSON cannot express.
"""

from __future__ import annotations

from typing import Any

import pytest

from .test_harness import Row, evaluate, expand, key, row_id

REGEX_STR = {"$regularExpression": {"pattern": "^str.*", "options": ""}}

NULL_DOCS: dict[str, Any] = {
    "a_empty_subobject": {"a": {}},
    "a_null": {"a": None},
    "a_number": {"a": 4},
    "a_subobject_b_not_null": {"a": {"b": "hi"}},
    "a_subobject_b_null": {"a": {"b": None}},
    "no_a": {},
    "a_double_array": {"a": [[]]},
    "a_empty_array": {"a": []},
    "a_object_array_no_b_nulls": {"a": [{"b": 1}, {"b": 3}, {"b": "string"}]},
    "a_object_array_some_b_nulls": {"a": [{"b": None}, {"b": 3}, {"b": None}]},
    "a_object_array_some_b_missing": {"a": [{"b": 3}, {}]},
    "a_value_array_all_nulls": {"a": [None, None]},
    "a_value_array_no_nulls": {"a": [1, "string", 4]},
    "a_value_array_with_null": {"a": [1, "string", None, 4]},
}
EQ_NULL = {"a_null", "no_a", "a_value_array_all_nulls", "a_value_array_with_null"}
NE_NULL = set(NULL_DOCS) - EQ_NULL
DOTTED_EQ_NULL = {
    "a_empty_subobject",
    "a_null",
    "a_number",
    "a_subobject_b_null",
    "no_a",
    "a_object_array_some_b_nulls",
    "a_object_array_some_b_missing",
}
DOTTED_NE_NULL = set(NULL_DOCS) - DOTTED_EQ_NULL
OBJECT_ARRAYS = {
    "a_object_array_no_b_nulls",
    "a_object_array_some_b_nulls",
    "a_object_array_some_b_missing",
}

NULL_QUERIES: list[tuple[Any, set[str]]] = [
    ({"a": None}, EQ_NULL),
    ({"a": {"$eq": None}}, EQ_NULL),
    ({"a": {"$ne": None}}, NE_NULL),
    ({"a": {"$not": {"$gte": None}}}, NE_NULL),
    ({"a": {"$in": [None, 75]}}, EQ_NULL),
    ({"$or": [{"a": None}, {"a": 75}]}, EQ_NULL),
    ({"a": {"$nin": [None, 75]}}, NE_NULL),
    ({"a": {"$nin": [None, []]}}, NE_NULL - {"a_double_array", "a_empty_array"}),
    (
        {"a": {"$nin": [None, REGEX_STR]}},
        NE_NULL - {"a_value_array_no_nulls"},
    ),
    ({"a": {"$exists": False}}, {"no_a"}),
    ({"a.b": {"$eq": None}}, DOTTED_EQ_NULL),
    ({"a.b": {"$ne": None}}, DOTTED_NE_NULL),
    ({"a.b": {"$in": [None, 75]}}, DOTTED_EQ_NULL),
    ({"$or": [{"a.b": None}, {"a.b": 75}]}, DOTTED_EQ_NULL),
    ({"a.b": {"$nin": [None, 75]}}, DOTTED_NE_NULL),
    ({"a.b": {"$nin": [None, REGEX_STR]}}, DOTTED_NE_NULL - {"a_object_array_no_b_nulls"}),
    (
        {"a.b": {"$exists": False}},
        {
            "no_a",
            "a_empty_subobject",
            "a_null",
            "a_number",
            "a_double_array",
            "a_empty_array",
            "a_value_array_all_nulls",
            "a_value_array_no_nulls",
            "a_value_array_with_null",
        },
    ),
    ({"a": {"$elemMatch": {"$eq": None}}}, {"a_value_array_all_nulls", "a_value_array_with_null"}),
    (
        {"a": {"$elemMatch": {"$ne": None}}},
        OBJECT_ARRAYS | {"a_double_array", "a_value_array_no_nulls", "a_value_array_with_null"},
    ),
    (
        {"a": {"$elemMatch": {"b": {"$eq": None}}}},
        {"a_double_array", "a_object_array_some_b_nulls", "a_object_array_some_b_missing"},
    ),
    ({"a": {"$elemMatch": {"b": {"$ne": None}}}}, OBJECT_ARRAYS),
    ({"a.b": {"$elemMatch": {"$eq": None}}}, set()),
    ({"a.b": {"$elemMatch": {"$ne": None}}}, set()),
]

DATE = {"$date": "2024-01-01T00:00:00Z"}
DATE_DOC = {"$date": "2024-01-01T00:00:00.000Z"}
OID = {"$oid": "65a1b2c3d4e5f60718293a4b"}

COMPARISONS: list[Row] = [
    # implicit equality with numbers: numeric types compare by value, strings never match
    ({"a": 5}, {"a": 5}, True),
    ({"a": 5}, {"a": 5.0}, True),
    ({"a": 5}, {"a": "5"}, False),
    ({"a": 5}, {"a": 6}, False),
    ({"a": 5}, {}, False),
    ({"a": 5}, {"a": None}, False),
    ({"a": 5.5}, {"a": 5.5}, True),
    ({"a": 5.5}, {"a": 5}, False),
    ({"a": 9007199254740993}, {"a": 9007199254740992}, False),
    ({"a": {"$gt": 9007199254740992}}, {"a": 9007199254740993}, True),
    # ordering operators are type-bracketed
    ({"a": {"$gt": 5}}, {"a": 6}, True),
    ({"a": {"$gt": 5}}, {"a": 5}, False),
    ({"a": {"$gt": 5}}, {"a": 5.1}, True),
    ({"a": {"$gt": 5}}, {"a": "6"}, False),
    ({"a": {"$gt": 5}}, {"a": "abc"}, False),
    ({"a": {"$gt": 5}}, {"a": True}, False),
    ({"a": {"$gt": 5}}, {"a": None}, False),
    ({"a": {"$gt": 5}}, {}, False),
    ({"a": {"$gt": 5}}, {"a": {"b": 6}}, False),
    ({"a": {"$gt": 5}}, {"a": 1e300}, True),
    ({"a": {"$gt": 5}}, {"a": -1e300}, False),
    ({"a": {"$gte": 5}}, {"a": 5}, True),
    ({"a": {"$gte": 5}}, {"a": 4.999}, False),
    ({"a": {"$lt": 5}}, {"a": 4}, True),
    ({"a": {"$lt": 5}}, {"a": -2.5}, True),
    ({"a": {"$lt": 5}}, {"a": "4"}, False),
    ({"a": {"$lt": 5}}, {"a": None}, False),
    ({"a": {"$lt": 5}}, {}, False),
    ({"a": {"$lte": 5}}, {"a": 5.0}, True),
    ({"a": {"$lte": 5}}, {"a": 6}, False),
    ({"a": {"$lte": 2.5}}, {"a": 2}, True),
    # strings: binary (UTF-8) order, exact equality
    ({"a": "abc"}, {"a": "abc"}, True),
    ({"a": "abc"}, {"a": "ABC"}, False),
    ({"a": {"$gt": "b"}}, {"a": "c"}, True),
    ({"a": {"$gt": "b"}}, {"a": "ba"}, True),
    ({"a": {"$gt": "b"}}, {"a": "a"}, False),
    ({"a": {"$gt": "b"}}, {"a": "B"}, False),
    ({"a": {"$gt": "b"}}, {"a": 5}, False),
    ({"a": {"$lt": "b"}}, {"a": ""}, True),
    ({"a": 'say "hi"'}, {"a": 'say "hi"'}, True),
    ({"a": {"$gte": "say"}}, {"a": 'say "hi"'}, True),
    ({"a": {"$lt": "say!"}}, {"a": 'say "hi"'}, True),
    ({"a": {"$gt": "say!"}}, {"a": 'say "hi"'}, False),
    ({"a": "tab\there"}, {"a": "tab\there"}, True),
    ({"a": "héllo"}, {"a": "héllo"}, True),
    ({"a": {"$gt": "h"}}, {"a": "héllo"}, True),
    ({"a": {"$lt": "i"}}, {"a": "日本"}, False),
    # booleans
    ({"a": True}, {"a": True}, True),
    ({"a": True}, {"a": 1}, False),
    ({"a": True}, {"a": "true"}, False),
    ({"a": False}, {"a": 0}, False),
    ({"a": False}, {}, False),
    ({"a": {"$gt": False}}, {"a": True}, True),
    ({"a": {"$gt": False}}, {"a": False}, False),
    ({"a": {"$gt": False}}, {"a": 1}, False),
    # null sorts with missing; only the inclusive comparisons match it
    ({"a": {"$gte": None}}, {"a": None}, True),
    ({"a": {"$gte": None}}, {}, True),
    ({"a": {"$gte": None}}, {"a": 0}, False),
    ({"a": {"$lte": None}}, {}, True),
    ({"a": {"$gt": None}}, {"a": None}, False),
    ({"a": {"$gt": None}}, {"a": 1}, False),
    ({"a": {"$lt": None}}, {"a": None}, False),
    # dates: by instant, in any Extended JSON form
    ({"a": DATE}, {"a": DATE_DOC}, True),
    ({"a": DATE}, {"a": {"$date": 1704067200000}}, True),
    ({"a": DATE}, {"a": {"$date": {"$numberLong": "1704067200000"}}}, True),
    ({"a": DATE}, {"a": "2024-01-01T00:00:00Z"}, False),
    ({"a": {"$gt": DATE}}, {"a": {"$date": "2024-06-01T00:00:00.000Z"}}, True),
    ({"a": {"$gt": DATE}}, {"a": {"$date": "2023-06-01T00:00:00.000Z"}}, False),
    ({"a": {"$gt": DATE}}, {"a": 1704067200001}, False),
    (
        {"a": {"$lt": {"$date": {"$numberLong": "1704067200000"}}}},
        {"a": {"$date": "2023-12-31T23:59:59.999Z"}},
        True,
    ),
    ({"a": {"$gte": {"$date": "2024-01-01T01:00:00+01:00"}}}, {"a": DATE_DOC}, True),
    # ObjectIds
    ({"a": OID}, {"a": OID}, True),
    ({"a": OID}, {"a": {"$oid": "65A1B2C3D4E5F60718293A4B"}}, True),
    ({"a": OID}, {"a": "65a1b2c3d4e5f60718293a4b"}, False),
    ({"a": {"$gt": {"$oid": "000000000000000000000000"}}}, {"a": OID}, True),
    ({"a": {"$gt": {"$oid": "000000000000000000000000"}}}, {"a": "zzz"}, False),
    # sub-documents: exact equality
    ({"a": {"b": 1}}, {"a": {"b": 1}}, True),
    ({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}}, False),
    ({"a": {"b": 1}}, {"a": {"b": 2}}, False),
    ({"a": {"b": 1}}, {"a": {"b": "1"}}, False),
    ({"a": {"b": 1}}, {"a": [{"b": 1}]}, True),
    ({"a": {}}, {"a": {}}, True),
    ({"a": {}}, {"a": {"b": 1}}, False),
    ({"a": {"b": {"c": 1}}}, {"a": {"b": {"c": 1}}}, True),
    ({"a": {"$eq": {"b": 1}}}, {"a": {"b": 1}}, True),
    ({"a": {"b": DATE}}, {"a": {"b": DATE_DOC}}, True),
    ({"a.b": 1}, {"a": {"b": 1, "c": 2}}, True),
]

ARRAYS: list[Row] = [
    # a query on a field matches the array itself or any of its elements (one level)
    ({"a": 5}, {"a": [1, 5]}, True),
    ({"a": 5}, {"a": [[5]]}, False),
    ({"a": "abc"}, {"a": ["x", "abc"]}, True),
    ({"a": True}, {"a": [False, True]}, True),
    ({"a": {"$gt": 5}}, {"a": [1, 6]}, True),
    ({"a": {"$gt": 5}}, {"a": [1, 2]}, False),
    ({"a": {"$gt": 5, "$lt": 10}}, {"a": [1, 20]}, True),
    ({"a": {"$elemMatch": {"$gt": 5, "$lt": 10}}}, {"a": [1, 20]}, False),
    ({"a": {"$elemMatch": {"$gt": 5, "$lt": 10}}}, {"a": [1, 7]}, True),
    ({"a": {"$elemMatch": {"$gt": 5, "$lt": 10}}}, {"a": 7}, False),
    ({"a": [1, 2]}, {"a": [1, 2]}, True),
    ({"a": [1, 2]}, {"a": [2, 1]}, False),
    ({"a": [1, 2]}, {"a": [[1, 2], 3]}, True),
    ({"a": [1, 2]}, {"a": [1, 2, 3]}, False),
    ({"a": [1, 2]}, {"a": 1}, False),
    ({"a": []}, {"a": []}, True),
    ({"a": []}, {"a": [[]]}, True),
    ({"a": []}, {"a": [1]}, False),
    # numeric path components index arrays; an object field named "0" matches too
    ({"a.0": 1}, {"a": [1, 2]}, True),
    ({"a.0": 1}, {"a": [2, 1]}, False),
    ({"a.0": 1}, {"a": {"0": 1}}, True),
    ({"a.1": {"$gt": 1}}, {"a": [5, 2]}, True),
    ({"a.1": {"$gt": 1}}, {"a": [5]}, False),
    ({"a.0": 5}, {"a": [[5]]}, False),
    ({"a.1": 5}, {"a": [[5], 5]}, True),
    ({"a.0.b": 1}, {"a": [{"b": 1}]}, True),
    ({"a.0.b": 1}, {"a": [{"b": 2}, {"b": 1}]}, False),
    ({"a.0.b": 1}, {"a": [[{"b": 1}]]}, True),
    ({"a.0.b": None}, {"a": [{"b": 1}]}, True),
    # dotted paths traverse arrays of objects, at every level
    ({"a.b": 1}, {"a": [{"b": 1}, {"b": 2}]}, True),
    ({"a.b": 1}, {"a": [{"b": [0, 1]}]}, True),
    ({"a.b": 1}, {"a": [[{"b": 1}]]}, False),
    ({"a.b": 1}, {"a": [1, {"b": 1}]}, True),
    ({"a.b.c": 1}, {"a": [{"b": [{"c": 1}]}]}, True),
    ({"a.b.c": 1}, {"a": {"b": [{"c": 2}, {"c": 1}]}}, True),
    ({"a.b.c": 1}, {"a": {"b": {"c": [1]}}}, True),
    ({"a.b.c": 1}, {"a": {"b": 1}}, False),
    ({"a.b": {"$gt": 1}}, {"a": [{"b": 0}, {"b": 3}]}, True),
    ({"a.b": {"$gt": 1, "$lt": 3}}, {"a": [{"b": 0}, {"b": 5}]}, True),
    ({"a": {"$elemMatch": {"b": {"$gt": 1, "$lt": 3}}}}, {"a": [{"b": 0}, {"b": 5}]}, False),
    ({"a.b": 1, "a.c": 2}, {"a": [{"b": 1}, {"c": 2}]}, True),
    ({"a": {"$elemMatch": {"b": 1, "c": 2}}}, {"a": [{"b": 1}, {"c": 2}]}, False),
    ({"a": {"$elemMatch": {"b": 1, "c": 2}}}, {"a": [{"b": 1, "c": 2}]}, True),
    # field names that need quoting in VARIANT paths
    ({'we"ird': 1}, {'we"ird': 1}, True),
    ({'it\'s "both"': 1}, {'it\'s "both"': 1}, True),
    ({'it\'s "both"': 1}, {'it\'s "both"': 2}, False),
    # stream documents at $validate carry _ts and _stream_meta (atlas-semantics §3.2)
    (
        {"_stream_meta.source.type": "kafka", "_ts": {"$gte": DATE}},
        {"_ts": DATE_DOC, "_stream_meta": {"source": {"type": "kafka", "partition": 0}}},
        True,
    ),
]

ROWS = expand(NULL_DOCS, NULL_QUERIES) + COMPARISONS + ARRAYS


@pytest.fixture(scope="module")
def results(spark: Any) -> dict[tuple[str, str], bool]:
    """Every row of this module, evaluated in a few Spark jobs."""
    return evaluate(spark, ROWS)


@pytest.mark.spark
@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_filter_matches_like_mongodb(row: Row, results: dict[tuple[str, str], bool]) -> None:
    filter_, doc, expected = row
    assert results[(key(filter_), key(doc))] is expected
