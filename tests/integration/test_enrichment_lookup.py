"""`$lookup` and `$cachedLookup` against `local` (SQLite) on real Spark, through `run_process`.

The foreign collection is written with the SQLite store; the pipeline runs on the shared
SparkSession; the executors open the same file through the run's lookup opener.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from service.runtime.process import run_process
from service.stores.secrets import SecretBox
from service.stores.sqlite import SqliteStores

pytestmark = pytest.mark.spark

FROM = {"connectionName": "local", "db": "shop", "coll": "products"}
PRODUCTS = [
    {"_id": 1, "sku": "a", "price": 10, "tags": ["x", "y"]},
    {"_id": 2, "sku": "b", "price": 20, "tags": ["y"]},
    {"_id": 3, "sku": "c", "price": 30.5},
    {"_id": 4, "sku": None, "price": 0},
    {"_id": 5, "price": -1},
    {"_id": 6.0, "sku": "a", "price": 11},
]


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    path = tmp_path / "sluice.db"
    monkeypatch.setenv("SLUICE_STORE_URL", f"sqlite:///{path}")
    monkeypatch.setenv("SLUICE_DATA_DIR", str(tmp_path))
    stores = SqliteStores(str(path), secrets=SecretBox.load(data_dir=tmp_path))
    stores.documents.merge("shop", "products", PRODUCTS)
    yield stores
    stores.close()


def run(spark: Any, pipeline: list[dict[str, Any]], *, batch_size: int = 4) -> list[Any]:
    out, err = io.StringIO(), io.StringIO()
    code = run_process(
        pipeline,
        out=out,
        err=err,
        batch_size=batch_size,
        max_seconds=120,
        spark_factory=lambda: spark,
        connections={},
    )
    assert code == 0, err.getvalue()
    return [json.loads(line) for line in out.getvalue().splitlines()]


def source(*docs: dict[str, Any]) -> dict[str, Any]:
    return {"$source": {"documents": list(docs)}}


def ids(doc: dict[str, Any], field: str = "p") -> list[Any]:
    return [d["_id"] for d in doc[field]]


def test_equality_lookup_mql_semantics(spark: Any, store: Any) -> None:
    out = run(
        spark,
        [
            source(
                {"n": 1, "k": "a"},
                {"n": 2, "k": ["b", "c"]},
                {"n": 3, "k": None},
                {"n": 4},
                {"n": 5, "k": "zzz"},
                {"n": 6, "k": 2.0},
                {"n": 7, "k": "y"},
            ),
            {"$lookup": {"from": FROM, "localField": "k", "foreignField": "sku", "as": "p"}},
        ],
    )
    by_n = {d["n"]: d for d in out}
    assert ids(by_n[1]) == [1, 6.0]
    assert ids(by_n[2]) == [2, 3]
    # null and missing match null and missing on the other side
    assert ids(by_n[3]) == [4, 5]
    assert ids(by_n[4]) == [4, 5]
    assert by_n[5]["p"] == []
    assert by_n[1]["p"][0] == {"_id": 1, "sku": "a", "price": 10, "tags": ["x", "y"]}
    assert by_n[2]["p"][1]["price"] == 30.5


def test_foreign_arrays_and_numbers_by_value(spark: Any, store: Any) -> None:
    out = run(
        spark,
        [
            source({"n": 1, "t": "y"}, {"n": 2, "id": 6}, {"n": 3, "id": 1.0}, {"n": 4, "id": 7}),
            {"$lookup": {"from": FROM, "localField": "t", "foreignField": "tags", "as": "p"}},
            {"$lookup": {"from": FROM, "localField": "id", "foreignField": "_id", "as": "q"}},
        ],
    )
    by_n = {d["n"]: d for d in out}
    assert ids(by_n[1]) == [1, 2]
    assert ids(by_n[2], "q") == [6.0]
    assert ids(by_n[3], "q") == [1]
    assert by_n[4]["q"] == []


def test_let_pipeline(spark: Any, store: Any) -> None:
    out = run(
        spark,
        [
            source({"n": 1, "max": 15}, {"n": 2, "max": 100}),
            {
                "$lookup": {
                    "from": FROM,
                    "let": {"m": "$max"},
                    "pipeline": [
                        {"$match": {"$expr": {"$lt": ["$price", "$$m"]}}},
                        {"$match": {"price": {"$gte": 0}}},
                        {"$sort": {"price": -1}},
                        {"$limit": 2},
                        {"$project": {"_id": 0, "price": 1}},
                    ],
                    "as": "cheap",
                }
            },
        ],
    )
    by_n = {d["n"]: d for d in out}
    assert by_n[1]["cheap"] == [{"price": 11}, {"price": 10}]
    assert by_n[2]["cheap"] == [{"price": 30.5}, {"price": 20}]


def test_lookup_inside_a_window_before_group(spark: Any, store: Any) -> None:
    def doc(n: int, k: str, second: int) -> dict[str, Any]:
        return {"n": n, "k": k, "t": f"2024-01-01T00:00:{second:02d}Z"}

    out = run(
        spark,
        [
            {
                "$source": {
                    "documents": [doc(1, "a", 1), doc(2, "b", 2), doc(3, "a", 3), doc(4, "c", 15)],
                    "timeField": {"$dateFromString": {"dateString": "$t"}},
                }
            },
            {
                "$tumblingWindow": {
                    "interval": {"size": 10, "unit": "second"},
                    "allowedLateness": 0,
                    "pipeline": [
                        {
                            "$lookup": {
                                "from": FROM,
                                "localField": "k",
                                "foreignField": "sku",
                                "as": "p",
                            }
                        },
                        {"$unwind": "$p"},
                        {"$group": {"_id": "$k", "total": {"$sum": "$p.price"}}},
                        {"$sort": {"_id": 1}},
                    ],
                }
            },
        ],
        batch_size=2,
    )
    assert [(d["_id"], d["total"]) for d in out] == [("a", 42), ("b", 20)]


def test_cached_lookup(spark: Any, store: Any) -> None:
    out = run(
        spark,
        [
            source(*({"n": i, "k": "ab"[i % 2]} for i in range(8))),
            {
                "$cachedLookup": {
                    "ttl": {"size": 1, "unit": "hour"},
                    "maxMemUsageBytes": 1_000_000,
                    "from": FROM,
                    "localField": "k",
                    "foreignField": "sku",
                    "as": "p",
                }
            },
        ],
        batch_size=3,
    )
    assert sorted((d["n"], tuple(ids(d))) for d in out) == [
        (i, (1, 6.0) if i % 2 == 0 else (2,)) for i in range(8)
    ]


def test_unknown_connection_is_a_problem(spark: Any, store: Any) -> None:
    out, err = io.StringIO(), io.StringIO()
    bad = {**FROM, "connectionName": "nope"}
    code = run_process(
        [
            source({"k": 1}),
            {"$lookup": {"from": bad, "localField": "k", "foreignField": "k", "as": "p"}},
        ],
        out=out,
        err=err,
        max_seconds=60,
        spark_factory=lambda: spark,
        connections={},
    )
    assert code != 0
    problems = json.loads(err.getvalue())["problems"]
    assert [(p["code"], p["path"]) for p in problems] == [
        ("unknown_connection", "/pipeline/1/$lookup/from/connectionName")
    ]
