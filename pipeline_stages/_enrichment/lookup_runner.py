"""The per-partition side of `$lookup` and `$cachedLookup`, run by `mapInArrow` on executors.

A partition of a micro-batch arrives as Arrow record batches; the runner reads them all, takes
the local keys of its healthy rows and asks the store once for all of them (one `$in`, the
store's index doing the work), then matches each row against the answer in Python with MQL's
equality rules (`matching`). With a `let` + `pipeline`, it runs one store query per distinct
combination of variable values (and local key, when both forms are given). `$cachedLookup`
first looks every distinct local value up in the executor's cache and queries only the misses.

It adds two string columns: the JSON of the `as` array for each healthy row, and a per-row
error (a key that cannot be decoded, a result that cannot be encoded): that row goes to the
DLQ; and the per-operator stats columns (`operator_stats`: store query latencies, cache hits). A store that cannot answer fails the micro-batch, which Spark retries.
"""

from __future__ import annotations

import json
import time
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipeline_stages._connectors.ports import StoreError
from pipeline_stages._documents.ejson import from_relaxed_ejson
from pipeline_stages._documents.values import MISSING, get_path, set_path, sort_key, to_ejson
from pipeline_stages._enrichment.cache import LookupCache, cache_for
from pipeline_stages._enrichment.matching import ForeignIndex, distinct_values, local_keys
from pipeline_stages._enrichment.operator_stats import CACHE_HIT, LATENCY_MS
from pipeline_stages._stream.json_text import prefer_double

if TYPE_CHECKING:
    import pyarrow as pa

    from pipeline_stages._connectors.ports import KeyedDocuments, LookupStores

#: Columns the compiler adds before the runner and the runner adds after.
HEALTHY = "__lookup_healthy__"
LOCAL = "__lookup_local__"
LET_PREFIX = "__lookup_let_"
RESULT = "__lookup_result__"
ERROR = "__lookup_error__"


@dataclass(frozen=True)
class CacheConfig:
    """`$cachedLookup`'s cache: its name in the executor, TTL and byte bound."""

    name: str
    ttl_ms: int
    max_bytes: int


@dataclass(frozen=True)
class LookupJob:
    """Everything the executors need to run one lookup stage (pickled with the query)."""

    stores: LookupStores
    connection: str
    db: str
    coll: str
    local_field: str | None
    foreign_field: str | None
    let_names: tuple[str, ...] = ()
    pipeline: tuple[Mapping[str, Any], ...] = ()
    cache: CacheConfig | None = None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Spark's `mapInArrow` function: the batches with `RESULT` and `ERROR` added."""
        import pyarrow as pa

        held = list(batches)
        rows = _Rows.read(held, len(self.let_names))
        results, errors, timing = self._resolve(rows)
        offset = 0
        for batch in held:
            end = offset + batch.num_rows
            yield (
                batch.append_column(RESULT, pa.array(results[offset:end], pa.string()))
                .append_column(ERROR, pa.array(errors[offset:end], pa.string()))
                .append_column(LATENCY_MS, pa.array(timing.latency[offset:end], pa.float64()))
                .append_column(CACHE_HIT, pa.array(timing.hit[offset:end], pa.int32()))
            )
            offset = end

    def _resolve(self, rows: _Rows) -> tuple[list[str | None], list[str | None], _Timing]:
        results: list[str | None] = [None] * rows.count
        errors: list[str | None] = [None] * rows.count
        timing = _Timing(latency=[None] * rows.count, hit=[None] * rows.count)
        # Rows are grouped by their key text first (cheap), then texts by MQL value: `1` and
        # `1.0` are one request, and one cache entry.
        by_value: dict[Hashable, list[int]] = {}
        requests: dict[Hashable, tuple[Any, tuple[Any, ...]]] = {}
        for texts, indexes in rows.groups.items():
            try:
                local, lets = _decode(texts[0]), tuple(_decode(t) for t in texts[1:])
            except (ValueError, TypeError) as exc:
                for index in indexes:
                    errors[index] = f"cannot read the lookup key: {exc}"
                continue
            group: Hashable = (
                sort_key(None if local is MISSING else local),
                tuple(map(sort_key, lets)),
            )
            by_value.setdefault(group, []).extend(indexes)
            requests.setdefault(group, (local, lets))
        answers, hits, latencies = self._answers(requests)
        for value, indexes in by_value.items():
            text, error = answers[value]
            for index in indexes:
                results[index], errors[index] = text, error
            if value in hits:  # one cache look-up per distinct key, on its first row
                timing.hit[indexes[0]] = int(hits[value])
        # One latency per store query, each on a row of its own (there are fewer queries
        # than rows: each query answers at least one row).
        timing.latency[: len(latencies)] = latencies
        return results, errors, timing

    def _answers(
        self, requests: Mapping[Hashable, tuple[Any, tuple[Any, ...]]]
    ) -> tuple[dict[Hashable, tuple[str | None, str | None]], dict[Hashable, bool], list[float]]:
        """The answer per request, whether the cache had it (`$cachedLookup`), and the
        latency (ms) of each store query made."""
        cache = self._cache()
        answers: dict[Hashable, tuple[str | None, str | None]] = {}
        hits: dict[Hashable, bool] = {}
        latencies: list[float] = []
        missing = {}
        for group, request in requests.items():
            hit = cache.get(group) if cache is not None else None
            if cache is not None:
                hits[group] = hit is not None
            if hit is not None:
                answers[group] = (hit, None)
            else:
                missing[group] = request
        if missing:
            store = self.stores(self.connection)
            fetched = (
                self._fetch_by_pipeline(store, missing, latencies)
                if self.pipeline or self.let_names
                else self._fetch_by_keys(store, missing, latencies)
            )
            memo: dict[int, str] = {}
            for group, docs in fetched.items():
                answers[group] = (None, docs) if isinstance(docs, str) else _encode(docs, memo)
                if cache is not None and answers[group][1] is None:
                    cache.put(group, answers[group][0] or "[]")
        return answers, hits, latencies

    def _cache(self) -> LookupCache | None:
        if self.cache is None:
            return None
        return cache_for(self.cache.name, ttl_ms=self.cache.ttl_ms, max_bytes=self.cache.max_bytes)

    def _fetch_by_keys(
        self,
        store: KeyedDocuments,
        requests: Mapping[Hashable, tuple[Any, tuple[Any, ...]]],
        latencies: list[float],
    ) -> dict[Hashable, list[Mapping[str, Any]]]:
        assert self.foreign_field is not None  # noqa: S101 - the compiler guarantees it
        keys = {group: local_keys(local) for group, (local, _) in requests.items()}
        wanted = distinct_values(k for values in keys.values() for k in values)
        started = time.perf_counter()
        docs = store.find_by_keys(self.db, self.coll, self.foreign_field, wanted)
        latencies.append((time.perf_counter() - started) * 1000)
        index = ForeignIndex(docs, self.foreign_field)
        return {group: index.matches(values) for group, values in keys.items()}

    def _fetch_by_pipeline(
        self,
        store: KeyedDocuments,
        requests: Mapping[Hashable, tuple[Any, tuple[Any, ...]]],
        latencies: list[float],
    ) -> dict[Hashable, list[Mapping[str, Any]] | str]:
        out: dict[Hashable, list[Mapping[str, Any]] | str] = {}
        for group, (local, lets) in requests.items():
            variables = dict(zip(self.let_names, lets, strict=True))
            query = _StoreQuery.of(self.pipeline, variables)
            if self.local_field is not None and self.foreign_field is not None:
                keys = local_keys(local)
                query.filters.insert(0, {self.foreign_field: {"$in": keys}})
            started = time.perf_counter()
            try:
                docs = store.find(
                    self.db,
                    self.coll,
                    query.filter(),
                    sort=query.sort,
                    skip=query.skip,
                    limit=query.limit,
                )
            except (StoreError, KeyError) as exc:
                # A query the store cannot evaluate for these values (the embedded store's
                # matcher raises KeyError for `$expr` over a field a document lacks): the
                # documents that asked go to the DLQ, the rest of the batch goes on.
                out[group] = f"the lookup pipeline failed in the store: {exc!r}"
                continue
            finally:
                latencies.append((time.perf_counter() - started) * 1000)
            out[group] = [query.project(d) for d in docs]
        return out


@dataclass
class _Timing:
    """The per-row stats columns (`operator_stats`): query latencies and cache hits."""

    latency: list[float | None]
    hit: list[int | None]


@dataclass
class _Rows:
    """A partition's healthy rows grouped by the text of their local key and `let` values."""

    count: int
    groups: dict[tuple[str | None, ...], list[int]]

    @classmethod
    def read(cls, batches: Sequence[pa.RecordBatch], let_count: int) -> _Rows:
        healthy: list[bool] = []
        columns: list[list[str | None]] = [[] for _ in range(let_count + 1)]
        names = [LOCAL, *(f"{LET_PREFIX}{i}" for i in range(let_count))]
        for batch in batches:
            healthy += batch.column(HEALTHY).to_pylist()
            for column, name in zip(columns, names, strict=True):
                column += batch.column(name).to_pylist()
        groups: dict[tuple[str | None, ...], list[int]] = {}
        for index, (ok, *texts) in enumerate(zip(healthy, *columns, strict=True)):
            if ok:
                groups.setdefault(tuple(texts), []).append(index)
        return cls(count=len(healthy), groups=groups)


def _decode(text: str | None) -> Any:
    return MISSING if text is None else from_relaxed_ejson(json.loads(text))


def _encode(
    docs: Sequence[Mapping[str, Any]], memo: dict[int, str]
) -> tuple[str | None, str | None]:
    """The JSON array of `docs`; each document is encoded once per partition (`memo`)."""
    try:
        texts = []
        for doc in docs:
            text = memo.get(id(doc))
            if text is None:
                text = memo[id(doc)] = prefer_double(json.dumps(to_ejson(dict(doc))))
            texts.append(text)
        return "[" + ",".join(texts) + "]", None
    except (TypeError, ValueError) as exc:
        return None, f"cannot encode a looked-up document: {exc}"


@dataclass
class _StoreQuery:
    """An inner pipeline as one store query: filters, sort, skip, limit, projection."""

    filters: list[dict[str, Any]]
    sort: list[tuple[str, int]] | None = None
    skip: int = 0
    limit: int | None = None
    projection: dict[str, Any] | None = None

    @classmethod
    def of(cls, pipeline: Sequence[Mapping[str, Any]], variables: Mapping[str, Any]) -> _StoreQuery:
        query = cls(filters=[])
        for stage in pipeline:
            ((name, body),) = stage.items()
            if name == "$match":
                query.filters.append(_bind(body, variables))
            elif name == "$sort":
                query.sort = [(k, int(v)) for k, v in body.items()]
            elif name == "$skip":
                query.skip = int(body)
            elif name == "$limit":
                query.limit = int(body)
            elif name == "$project":
                query.projection = dict(body)
        return query

    def filter(self) -> dict[str, Any]:
        if not self.filters:
            return {}
        return self.filters[0] if len(self.filters) == 1 else {"$and": self.filters}

    def project(self, doc: dict[str, Any]) -> dict[str, Any]:
        if not self.projection:
            return doc
        include_id = bool(self.projection.get("_id", 1))
        fields = {k: bool(v) for k, v in self.projection.items() if k != "_id"}
        if fields and all(fields.values()):
            out: dict[str, Any] = {"_id": doc["_id"]} if include_id and "_id" in doc else {}
            for name in fields:
                value = get_path(doc, name)
                if value is not MISSING:
                    set_path(out, name, value)
            return out
        out = {k: v for k, v in doc.items() if k not in fields and (include_id or k != "_id")}
        return out


def _bind(value: Any, variables: Mapping[str, Any]) -> Any:
    """`value` with `$$name` / `$$name.path` of `let` replaced by `{$literal: ...}`."""
    if isinstance(value, str) and value.startswith("$$"):
        name, _, rest = value[2:].partition(".")
        if name in variables:
            bound = variables[name]
            if rest:
                bound = get_path(bound, rest) if isinstance(bound, dict) else MISSING
            return {"$literal": None if bound is MISSING else bound}
        return value
    if isinstance(value, dict):
        if "$literal" in value:
            return value
        return {k: _bind(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [_bind(v, variables) for v in value]
    return value
