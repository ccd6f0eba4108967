"""The per-executor cache of `$cachedLookup`: lookup results by key, with a TTL and a size bound.

One cache per stage and executor process (`cache_for`), shared by the partitions that process
runs, so a hot key is fetched once per TTL per executor, not once per micro-batch. When the
cache grows past `maxMemUsageBytes` it evicts expired entries first, then the oldest ones
(Atlas evicts "randomly" once no expired entry is left; oldest-first is one such choice and
keeps recently fetched keys). Sizes are estimated from the entries' JSON text, which is what
the cache holds.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass


@dataclass
class CacheStats:
    """Counts since the cache was created (per executor process)."""

    hits: int = 0
    misses: int = 0
    evictions: int = 0


class LookupCache:
    """Key → JSON text of the matching documents, with a TTL and a byte bound."""

    def __init__(
        self, *, ttl_ms: int, max_bytes: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ttl_s = ttl_ms / 1000
        self._max_bytes = max_bytes
        self._clock = clock
        self._entries: OrderedDict[Hashable, tuple[float, str]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.stats = CacheStats()

    @property
    def size_bytes(self) -> int:
        """The estimated bytes held."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> str | None:
        """The cached value of `key`, or None when absent or expired (counted as a miss)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] <= self._clock():
                self.stats.misses += 1
                return None
            self.stats.hits += 1
            return entry[1]

    def put(self, key: Hashable, value: str) -> None:
        """Cache `value` for `key` (inserted as the newest), then evict to the bound."""
        size = _size(key, value)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= _size(key, old[1])
            if size > self._max_bytes:
                return  # larger than the whole cache: never cached
            self._entries[key] = (self._clock() + self._ttl_s, value)
            self._bytes += size
            self._evict()

    def _evict(self) -> None:
        if self._bytes <= self._max_bytes:
            return
        now = self._clock()
        for key in [k for k, (expires, _) in self._entries.items() if expires <= now]:
            self._drop(key)
        while self._bytes > self._max_bytes and self._entries:
            self._drop(next(iter(self._entries)))

    def _drop(self, key: Hashable) -> None:
        _, value = self._entries.pop(key)
        self._bytes -= _size(key, value)
        self.stats.evictions += 1


def _size(key: Hashable, value: str) -> int:
    # The text plus a fixed overhead per entry (dict slot, tuple, key object).
    return len(value) + len(repr(key)) + 96


_CACHES: dict[str, LookupCache] = {}
_CACHES_LOCK = threading.Lock()


def cache_for(name: str, *, ttl_ms: int, max_bytes: int) -> LookupCache:
    """The executor process's cache for one stage (`name` identifies processor and stage)."""
    with _CACHES_LOCK:
        cache = _CACHES.get(name)
        if cache is None:
            cache = _CACHES[name] = LookupCache(ttl_ms=ttl_ms, max_bytes=max_bytes)
        return cache
