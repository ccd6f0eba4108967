"""The `$cachedLookup` cache: TTL, byte bound (expired first, then oldest), hit/miss counts."""

from __future__ import annotations

from pipeline_stages._enrichment.cache import LookupCache, cache_for


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_hits_misses_and_ttl() -> None:
    clock = Clock()
    cache = LookupCache(ttl_ms=1000, max_bytes=10_000, clock=clock)
    assert cache.get("a") is None
    cache.put("a", "[1]")
    assert cache.get("a") == "[1]"
    clock.now = 0.999
    assert cache.get("a") == "[1]"
    clock.now = 1.0
    assert cache.get("a") is None
    assert (cache.stats.hits, cache.stats.misses) == (2, 2)


def test_memory_bound_evicts_expired_first_then_oldest() -> None:
    clock = Clock()
    entry = 100
    cache = LookupCache(ttl_ms=1000, max_bytes=3 * (entry + 96 + len(repr("k1"))), clock=clock)
    cache.put("k1", "x" * entry)
    clock.now = 0.5
    cache.put("k2", "x" * entry)
    cache.put("k3", "x" * entry)
    assert len(cache) == 3
    clock.now = 1.2  # k1 expired; k2 and k3 alive
    cache.put("k4", "x" * entry)
    assert cache.get("k1") is None
    assert cache.get("k2") is not None
    cache.put("k5", "x" * entry)  # nothing expired: the oldest (k2) goes
    assert cache.get("k2") is None
    assert [cache.get(k) is not None for k in ("k3", "k4", "k5")] == [True, True, True]
    assert cache.size_bytes <= 3 * (entry + 96 + len(repr("k1")))
    assert cache.stats.evictions == 2


def test_an_entry_larger_than_the_bound_is_not_cached() -> None:
    cache = LookupCache(ttl_ms=1000, max_bytes=50)
    cache.put("k", "x" * 100)
    assert len(cache) == 0 and cache.size_bytes == 0


def test_replacing_an_entry_keeps_the_size_right() -> None:
    cache = LookupCache(ttl_ms=1000, max_bytes=10_000)
    cache.put("k", "x" * 10)
    cache.put("k", "x" * 20)
    assert len(cache) == 1
    assert cache.size_bytes == 20 + len(repr("k")) + 96


def test_one_cache_per_stage_name() -> None:
    first = cache_for("p/pipeline/1", ttl_ms=1, max_bytes=10)
    assert cache_for("p/pipeline/1", ttl_ms=1, max_bytes=10) is first
    assert cache_for("p/pipeline/2", ttl_ms=1, max_bytes=10) is not first
