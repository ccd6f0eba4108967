"""The per-partition lookup runner on Arrow batches, against an in-memory store (no Spark)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from mongomock.filtering import filter_applies

from pipeline_stages._enrichment.lookup_runner import (
    ERROR,
    HEALTHY,
    LET_PREFIX,
    LOCAL,
    RESULT,
    CacheConfig,
    LookupJob,
)
from pipeline_stages._enrichment.operator_stats import CACHE_HIT, LATENCY_MS

PRODUCTS = [
    {"_id": 1, "sku": "a", "price": 5},
    {"_id": 2, "sku": "b", "price": 50},
    {"_id": 3, "sku": "a", "price": 7},
    {"_id": 4, "price": 1},
]


@dataclass
class MemoryStore:
    docs: list[dict[str, Any]]
    asked: list[list[Any]] = field(default_factory=list)

    def find_by_keys(self, db: str, coll: str, field: str, keys: Any) -> list[dict[str, Any]]:
        self.asked.append(list(keys))
        return [d for d in self.docs if filter_applies({field: {"$in": list(keys)}}, d)]

    def find(
        self,
        db: str,
        coll: str,
        filter: Any = None,
        *,
        sort: Any = None,
        skip: int = 0,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        if "$expr" in json.dumps(filter):
            raise KeyError("price")  # what the embedded store's matcher raises on a gap
        found = [d for d in self.docs if filter_applies(filter or {}, d)]
        for name, direction in reversed(sort or []):
            found.sort(key=lambda d: d.get(name, 0), reverse=direction < 0)
        return found[skip:] if limit is None else found[skip : skip + limit]


@dataclass(frozen=True)
class Opener:
    store: MemoryStore

    def __call__(self, connection: str) -> MemoryStore:
        return self.store


def run(job: LookupJob, keys: list[str | None], **lets: list[str | None]) -> list[Any]:
    columns: dict[str, Any] = {
        HEALTHY: pa.array([k != "SKIP" for k in keys]),
        LOCAL: pa.array([None if k == "SKIP" else k for k in keys], pa.string()),
    }
    for i, values in enumerate(lets.values()):
        columns[f"{LET_PREFIX}{i}"] = pa.array(values, pa.string())
    (out,) = list(job(iter([pa.record_batch(columns)])))
    results = out.column(RESULT).to_pylist()
    errors = out.column(ERROR).to_pylist()
    return [
        ("error", e) if e else (None if r is None else [d["_id"] for d in json.loads(r)])
        for r, e in zip(results, errors, strict=True)
    ]


def job(store: MemoryStore, **fields: Any) -> LookupJob:
    base: dict[str, Any] = {"local_field": "sku", "foreign_field": "sku"}
    return LookupJob(
        stores=Opener(store), connection="local", db="shop", coll="p", **{**base, **fields}
    )


def test_one_store_query_per_partition_and_rows_grouped() -> None:
    store = MemoryStore(PRODUCTS)
    out = run(job(store), ['"a"', '"b"', '"a"', None, "SKIP", '["b", "zz"]', "{bad"])
    assert out[:6] == [[1, 3], [2], [1, 3], [4], None, [2]]
    assert out[6][0] == "error" and "cannot read the lookup key" in out[6][1]
    assert len(store.asked) == 1


def test_cached_lookup_asks_only_for_misses() -> None:
    store = MemoryStore(PRODUCTS)
    cached = job(store, cache=CacheConfig(name="test/runner", ttl_ms=60_000, max_bytes=10_000))
    assert run(cached, ['"a"', '"b"']) == [[1, 3], [2]]
    assert run(cached, ['"a"', '"b"', '"a"']) == [[1, 3], [2], [1, 3]]
    assert len(store.asked) == 1


def test_pipeline_errors_send_only_their_rows_to_the_dlq() -> None:
    store = MemoryStore(PRODUCTS)
    with_expr = job(
        store,
        local_field=None,
        foreign_field=None,
        let_names=("top",),
        pipeline=({"$match": {"$expr": {"$lt": ["$price", "$$top"]}}},),
    )
    out = run(with_expr, [None, None], top=["6", "100"])
    assert [kind for kind, _ in out] == ["error", "error"]
    plain = job(
        store,
        local_field=None,
        foreign_field=None,
        let_names=("s",),
        pipeline=({"$match": {"price": {"$gte": 5}}}, {"$sort": {"price": -1}}, {"$limit": 1}),
    )
    assert run(plain, [None], s=['"x"']) == [[2]]


def _stats_columns(job: LookupJob, keys: list[str | None]) -> tuple[list[Any], list[Any]]:
    columns = {
        HEALTHY: pa.array([True] * len(keys)),
        LOCAL: pa.array(keys, pa.string()),
    }
    (out,) = list(job(iter([pa.record_batch(columns)])))
    return out.column(LATENCY_MS).to_pylist(), out.column(CACHE_HIT).to_pylist()


def test_stats_columns_carry_one_latency_per_store_query_and_one_hit_flag_per_key() -> None:
    store = MemoryStore(PRODUCTS)
    latency, hits = _stats_columns(job(store), ['"a"', '"b"', '"a"'])
    assert len([x for x in latency if x is not None]) == len(store.asked) == 1
    assert all(x >= 0 for x in latency if x is not None)
    assert hits == [None, None, None]  # no cache: no hit flags
    cached = job(store, cache=CacheConfig(name="test/stats", ttl_ms=60_000, max_bytes=10_000))
    _, first = _stats_columns(cached, ['"a"', '"b"', '"a"'])
    assert sorted(x for x in first if x is not None) == [0, 0]  # two distinct keys, both missed
    latency, again = _stats_columns(cached, ['"a"', '"b"', '"c"'])
    assert sorted(x for x in again if x is not None) == [0, 1, 1]
    assert len([x for x in latency if x is not None]) == 1  # only "c" was asked for
