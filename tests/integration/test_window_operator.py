"""The Spark window operator on random streams: batch-size invariance and late ∪ counted.

Each case feeds one seeded stream (out-of-order and late documents, an expression error, idle
gaps) through the real operator (`tests.conformance.spark_executor`: the production planner on
a scripted source with a test clock) with micro-batches of 1, 10 and 1000 documents. Expected
results come from the reference model (the spec of record, `tests.conformance`): Spark must
give the reference's output, identically for every batch size.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from pipeline_stages._documents.ejson import from_ejson
from pipeline_stages._documents.values import to_ejson
from tests.conformance.reference_model import ReferenceExecutor
from tests.conformance.spark_executor import SparkExecutor, SparkParallelExecutor, stop_active

pytestmark = [pytest.mark.spark, pytest.mark.slow]

BASE_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
GROUP = {
    "$group": {
        "_id": "$k",
        "n": {"$count": {}},
        "sum": {"$sum": "$v"},
        "ids": {"$push": "$id"},
        "inv": {"$sum": {"$divide": [1, "$d"]}},
        "first": {"$first": "$id"},
    }
}
PASS_THROUGH = [{"$addFields": {"w": {"$meta": "stream.window.start"}}}]


def ms(size: int) -> dict[str, Any]:
    return {"size": size, "unit": "ms"}


def windows(inner: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One window stage of each kind around `inner`."""
    return {
        "tumbling": {
            "$tumblingWindow": {
                "interval": ms(2000),
                "allowedLateness": ms(500),
                "idleTimeout": ms(3000),
                "pipeline": [{"$match": {"k": {"$ne": "z"}}}, *inner],
            }
        },
        "hopping": {
            "$hoppingWindow": {
                "interval": ms(3000),
                "hopSize": ms(1000),
                "allowedLateness": 0,
                "pipeline": inner,
            }
        },
        "session": {
            "$sessionWindow": {
                "partitionBy": "$k",
                "gap": ms(1500),
                "allowedLateness": ms(1000),
                "pipeline": inner,
            }
        },
        "sliding": {
            "$slidingWindow": {"timeDifference": ms(1000), "grace": ms(500), "pipeline": inner}
        },
    }


def pipeline(window: dict[str, Any]) -> list[dict[str, Any]]:
    source = {"connectionName": "k", "topic": "t", "timeField": {"$toDate": "$ts"}}
    return [{"$source": source}, window]


def stream(seed: int, n: int = 12, keys: str = "ab") -> list[Any]:
    """Steps: documents (dicts) and idle periods (ints, ms), out of order, some late; group
    keys drawn from `keys`."""
    rng = random.Random(seed)
    steps: list[Any] = []
    clock = 0
    for i in range(n):
        clock += rng.randint(0, 900)
        late_by = rng.choice([0, 0, 0, rng.randint(100, 6000)])
        ts = max(0, clock - late_by) if i != 9 else 0  # document 9 is late for every kind
        steps.append(
            {
                "id": i,
                "k": rng.choice(keys),
                "v": rng.choice([1, 2.5, 3]),
                "d": rng.choice([1, 2, 4, 0]) if i % 5 else 0,
                "ts": {"$date": {"$numberLong": str(BASE_MS + ts)}},
            }
        )
        if i in (4, 8):
            steps.append(rng.choice([1000, 4000]))
    # A far-future document closes whatever is still open (on both keys).
    steps += [{"id": 100 + j, "k": k, "v": 0, "d": 1, "ts": {"$date": {"$numberLong": str(BASE_MS + 60_000)}}} for j, k in enumerate(keys[:2])]  # fmt: skip
    return steps


def run(executor: Any, stages: list[dict[str, Any]], steps: list[Any], batch: int) -> Any:
    """Feed `steps`, draining (one micro-batch) after every `batch` documents."""
    executor.start(stages)
    emitted: list[Any] = []
    dlq: list[Any] = []
    fed = 0
    for step in steps:
        if isinstance(step, int):
            executor.idle(step)
            continue
        executor.feed([step])
        fed += 1
        if fed % batch == 0:
            out, dead = executor.drain()
            emitted += out
            dlq += dead
    out, dead = executor.drain()
    emitted += out
    dlq += dead
    volatile = ("_id", "dlqTime", "processorName")
    dlq = [{k: v for k, v in r.items() if k not in volatile} for r in dlq]
    return emitted, dlq


def canonical(docs: list[Any]) -> list[str]:
    """Order-free comparable form of decoded values (int and double stay distinct; dates
    written as canonical or relaxed Extended JSON compare equal)."""
    return sorted(json.dumps(to_ejson(from_ejson(d)), sort_keys=True) for d in docs)


@pytest.fixture(scope="module", autouse=True)
def _stop_queries() -> Any:
    yield
    stop_active()


@pytest.mark.parametrize("kind", ["tumbling", "hopping", "session", "sliding"])
def test_batch_size_invariance_against_the_reference(kind: str) -> None:
    stages = pipeline(windows([GROUP])[kind])
    steps = stream(seed=7)
    reference = run(ReferenceExecutor(), stages, steps, batch=1)
    runs = {size: run(SparkExecutor(), stages, steps, batch=size) for size in (1, 10, 1000)}
    for size, (emitted, dlq) in runs.items():
        assert canonical(emitted) == canonical(reference[0]), f"batch size {size}"
        assert canonical(dlq) == canonical(reference[1]), f"batch size {size}"
    # Not only the same set: the same order, whatever the micro-batch size.
    assert runs[1] == runs[10] == runs[1000]
    assert any(r["errInfo"]["reason"] == "Input document arrived late." for r in runs[1][1])
    assert any("GroupOperator with error" in r["errInfo"]["reason"] for r in runs[1][1])


# Not sessions: a session window's pipeline must hold a $group (Atlas), so it has no
# pass-through form; the session transcripts cover its lateness.
@pytest.mark.parametrize("kind", ["tumbling", "hopping", "sliding"])
def test_late_union_counted_is_all_inputs(kind: str) -> None:
    steps = [s for s in stream(seed=11) if not isinstance(s, int)]
    stages = pipeline(windows(PASS_THROUGH)[kind])
    emitted, dlq = run(SparkExecutor(), stages, steps, batch=1000)
    counted = {e["id"] for e in emitted}
    late = {d["doc"]["id"] for d in dlq if d["errInfo"]["reason"] == "Input document arrived late."}
    inputs = {s["id"] for s in steps} - {100, 101}
    assert (counted | late) - {100, 101} == inputs
    if kind == "tumbling":
        assert not counted & late  # only hopping and sliding windows have partially late docs
    for doc in map(from_ejson, emitted):
        assert doc["w"] == doc["_stream_meta"]["window"]["start"]


@pytest.mark.parametrize("kind", ["tumbling", "hopping"])
def test_two_buckets_split_the_groups_and_keep_the_semantics(kind: str) -> None:
    """`spark.sluice.window.buckets=2`: each bucket folds and emits some of the groups, and
    the results and DLQ are still the reference's, the same at every batch size, with windows
    in start order."""
    stages = pipeline(windows([GROUP])[kind])
    steps = stream(seed=7, n=30, keys="abcdefgh")
    reference = run(ReferenceExecutor(), stages, steps, batch=1)
    runs = {}
    for size in (1, 10, 1000):
        executor = SparkParallelExecutor()
        runs[size] = run(executor, stages, steps, batch=size)
        emitted_by_bucket: dict[int, int] = {}
        for stats in executor.collector.stats:
            count = emitted_by_bucket.get(int(stats["bucket"]), 0)
            emitted_by_bucket[int(stats["bucket"])] = count + stats["outputMessageCount"]
        assert sorted(emitted_by_bucket) == [0, 1]
        assert all(emitted_by_bucket.values()), emitted_by_bucket  # both buckets hold groups
    for size, (emitted, dlq) in runs.items():
        assert canonical(emitted) == canonical(reference[0]), f"batch size {size}"
        assert canonical(dlq) == canonical(reference[1]), f"batch size {size}"
        starts = [from_ejson(e)["_stream_meta"]["window"]["start"] for e in emitted]
        assert starts == sorted(starts), f"batch size {size}"
    assert runs[1] == runs[10] == runs[1000]
    assert any(r["errInfo"]["reason"] == "Input document arrived late." for r in runs[1][1])
