"""The VARIANT value helpers (`values.py`) that both compilers build on."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from pipeline_stages._mql import kinds as K
from pipeline_stages._mql import order as O
from pipeline_stages._mql import values as V

#: One value per BSON type, in MQL's cross-type sort order.
ORDERED = [
    None,  # null (missing sorts below it; checked separately)
    -5,
    2.5,
    3000000000,
    "a",
    "b",
    {"x": 1},
    [1],
    {"$oid": "507f1f77bcf86cd799439011"},
    False,
    True,
    {"$date": "2024-01-01T00:00:00.000Z"},
]
KINDS = [
    ("1", "int"), ("3000000000", "long"), ("1.5", "double"), ("1e5", "double"), ('"s"', "string"),
    ("true", "bool"), ("null", "null"), ('{"a": 1}', "object"), ("[1, 2]", "array"), ("[]", "array"),
    ('{"$date": "2024-01-01T00:00:00.000Z"}', "date"), ('{"$oid": "507f1f77bcf86cd799439011"}', "objectId"),
    ('{"$numberDecimal": "1.5"}', "decimal"), ('{"$numberLong": "5"}', "long"),
]  # fmt: skip


@pytest.mark.spark
def test_kind_of(spark):
    df = spark.createDataFrame([(j,) for j, _ in KINDS], "j string")
    got = [r[0] for r in df.select(K.kind_of(F.parse_json("j"))).collect()]
    assert got == [k for _, k in KINDS]
    assert spark.range(1).select(K.kind_of(V.missing())).first()[0] == "missing"


@pytest.mark.spark
def test_is_plain_object_is_kind_of_object(spark):
    edges = ['{"a": 1, "$date": 5}', '{"$date": null}', '{"$oid": null, "b": 1}', "{}",
             '{"$dates": 1}', '[{"a": 1}]', '{"a": {"$date": 5}}']  # fmt: skip
    texts = [j for j, _ in KINDS] + edges
    df = spark.createDataFrame([(j,) for j in texts], "j string")
    value = F.parse_json("j")
    rows = df.select(K.kind_of(value) == "object", K.is_plain_object(value)).collect()
    assert [r[1] for r in rows] == [r[0] for r in rows]
    assert [r[1] for r in rows].count(True) == 4  # `{"a": 1}`, `{}`, `$dates`, nested date


@pytest.mark.spark
@pytest.mark.parametrize("with_kinds", [False, True], ids=["computed kinds", "precomputed kinds"])
def test_compare_follows_bson_order(spark, with_kinds):
    n = len(ORDERED)
    pairs = [(json.dumps(ORDERED[i]), json.dumps(ORDERED[j])) for i in range(n) for j in range(n)]
    df = spark.createDataFrame(pairs, "l string, r string").select(
        F.parse_json("l").alias("l"), F.parse_json("r").alias("r")
    )
    if with_kinds:
        df = df.withColumns({"lk": K.kind_of(F.col("l")), "rk": K.kind_of(F.col("r"))})
        cmp = O.compare(F.col("l"), F.col("r"), F.col("lk"), F.col("rk"))
    else:
        cmp = O.compare(F.col("l"), F.col("r"))
    got = [r[0] for r in df.select(cmp).collect()]
    expected = [(i > j) - (i < j) for i in range(n) for j in range(n)]
    # "a" < "b" and False < True are value orders inside one type; the table is sorted.
    assert got == expected


@pytest.mark.spark
def test_missing_sorts_before_null_and_equals_itself(spark):
    row = (
        spark.range(1)
        .select(
            O.compare(V.missing(), V.null()).alias("mn"),
            O.equals(V.missing(), V.missing()).alias("mm"),
            O.equals(V.literal(1), V.literal(1.0)).alias("num"),
            O.equals(V.literal(9007199254740993), V.literal(9007199254740992)).alias("long"),
            O.compare(V.literal("B"), V.literal("a"), "string", "string").alias("bytes"),
        )
        .first()
    )
    assert (row["mn"], row["mm"], row["num"], row["long"], row["bytes"]) == (
        -1,
        True,
        True,
        False,
        -1,
    )


@pytest.mark.spark
def test_truthy(spark):
    values = [None, False, 0, 0.0, True, 1, -0.5, "", "false", [], {}]
    expected = [False, False, False, False, True, True, True, True, True, True, True]
    df = spark.createDataFrame([(json.dumps(v),) for v in values], "j string")
    got = [r[0] for r in df.select(O.truthy(F.parse_json("j"))).collect()]
    assert got == expected
    assert spark.range(1).select(O.truthy(V.missing())).first()[0] is False


@pytest.mark.spark
def test_extractors_and_constructors(spark):
    doc = F.parse_json(
        F.lit(
            '{"i": 7, "d": 2.5, "s": "x", "b": true, "t": {"$date": "2024-01-01T00:00:01.500Z"}, "a": [1, "x"], "o": {"k": 1}}'
        )
    )

    def get(name):
        return F.try_variant_get(doc, f"$.{name}", "variant")

    row = (
        spark.range(1)
        .select(
            V.as_long(get("i")).alias("long"),
            V.as_long(get("d")).alias("not_long"),
            V.as_double(get("i")).alias("double"),
            V.as_double(get("s")).alias("not_double"),
            V.as_string(get("s")).alias("string"),
            V.as_string(get("i")).alias("not_string"),
            V.as_bool(get("b")).alias("bool"),
            V.as_epoch_ms(get("t")).alias("millis"),
            V.as_whole_number(V.literal(3.0)).alias("whole"),
            V.as_whole_number(V.literal(3.5)).alias("not_whole"),
            F.size(V.as_array(get("a"))).alias("size"),
            V.as_object_map(get("o"))["k"].isNotNull().alias("map"),
            F.to_json(V.from_epoch_ms(F.lit(1500))).alias("date"),
            F.to_json(V.literal({"a": [1, None]})).alias("lit"),
            F.to_json(V.from_double(F.lit(2))).alias("dbl"),
        )
        .first()
    )
    assert (row["long"], row["not_long"], row["double"], row["not_double"]) == (7, None, 7.0, None)
    assert (row["string"], row["not_string"], row["bool"], row["millis"]) == (
        "x",
        None,
        True,
        1704067201500,
    )
    assert (row["whole"], row["not_whole"], row["size"], row["map"]) == (3, None, 2, True)
    assert json.loads(row["date"]) == {"$date": "1970-01-01T00:00:01.500Z"}
    assert json.loads(row["lit"]) == {"a": [1, None]}
    assert row["dbl"] == "2.0"


def test_literal_kinds():
    assert [V.literal_kind(v) for v in (None, True, 1, 2**40, 1.5, "s", [1], {"a": 1}, {"$date": "x"})] == [
        "null", "bool", "int", "long", "double", "string", "array", "object", "date",
    ]  # fmt: skip


def test_type_rank_order_matches_bson():
    order = [
        "minKey",
        "missing",
        "null",
        "int",
        "string",
        "object",
        "array",
        "binData",
        "objectId",
        "bool",
        "date",
        "timestamp",
        "regex",
        "maxKey",
    ]
    ranks = [V.TYPE_RANK[name] for name in order]
    assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks)
    assert (
        V.TYPE_RANK["int"] == V.TYPE_RANK["long"] == V.TYPE_RANK["double"] == V.TYPE_RANK["decimal"]
    )


#: Every `$date` form `as_epoch_ms` reads, and values that are not dates.
DATE_FORMS = [
    ('{"$date": "2024-01-01T00:00:01.500Z"}', 1704067201500),
    ('{"$date": "2024-01-01"}', 1704067200000),
    ('{"$date": 1704067201500}', 1704067201500),
    ('{"$date": -1000}', -1000),
    ('{"$date": {"$numberLong": "1704067201500"}}', 1704067201500),
    ('{"$date": "not a date"}', None),
    ('"2024-01-01T00:00:01.500Z"', None),
    ('{"a": 1}', None),
    # Edges of "a date is an object with a `$date` key" (`as_timestamp` reads `$date` only).
    ('{"a": 1, "$date": 5}', 5),
    ('{"$oid": "507f1f77bcf86cd799439011", "$date": 5}', 5),
    ('{"$date": null}', None),
    ('[{"$date": 5}]', None),
    ("5", None),
    ("null", None),
    ('{"$numberLong": "5"}', None),
]


@pytest.mark.spark
@pytest.mark.parametrize("kind", [None, "date"], ids=["computed kind", "known date"])
def test_epoch_ms_of_every_date_form(spark, kind):
    if kind == "date":  # a known kind is only ever passed for dates
        forms = [(text, millis) for text, millis in DATE_FORMS if millis is not None]
    else:
        forms = DATE_FORMS
    df = spark.createDataFrame([(text,) for text, _ in forms], "j string")
    got = [r[0] for r in df.select(V.as_epoch_ms(F.parse_json("j"), kind)).collect()]
    assert got == [millis for _, millis in forms]
