"""How many state partitions a new checkpoint of a window query gets (`WindowPlan.
state_partitions`), so that the operator's buckets run in parallel tasks.

Spark places each bucket's rows by hash partitioning of the bucket id, `pmod(murmur3(id, 42),
n)` over the state's `n` partitions (fixed when a checkpoint starts). With Spark's hash, ids 0
and 1 both land in partition 1 of 2: on the default 2 partitions the two buckets of
`spark.sluice.window.buckets=2` ran one after the other in one task, and the other task was
empty (RESULTS.md, tenth session). So a window split over P buckets starts its checkpoint
with the fewest partitions (at least P) over which the ids 0..P-1 land apart; every partition
is one Python call per micro-batch, so P of them hold a bucket and the rest are empty. A
one-bucket window gets one partition. An existing checkpoint keeps its count (Spark restores
it from the offset log).
"""

from __future__ import annotations

_MASK = 0xFFFFFFFF


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _MASK


def spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark's `hash()` of an INT (`Murmur3_x86_32.hashInt`), as a signed 32-bit integer."""
    k1 = _rotl((value & _MASK) * 0xCC9E2D51 & _MASK, 15) * 0x1B873593 & _MASK
    h1 = (_rotl(seed ^ k1, 13) * 5 + 0xE6546B64) & _MASK
    h1 ^= 4  # the input's length in bytes
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _MASK
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def partition_of(bucket: int, partitions: int) -> int:
    """The state partition Spark's hash partitioning gives bucket id `bucket`."""
    return spark_hash_int(bucket) % partitions


def spread_partitions(buckets: int, limit_factor: int = 4) -> int | None:
    """The fewest partitions, at least `buckets`, over which bucket ids 0..buckets-1 all land
    in different partitions (1 for one bucket); None when none up to `limit_factor` times the
    buckets does (then the session's count applies)."""
    if buckets <= 1:
        return 1
    for partitions in range(buckets, buckets * limit_factor + 1):
        if len({partition_of(b, partitions) for b in range(buckets)}) == buckets:
            return partitions
    return None


__all__ = ["partition_of", "spark_hash_int", "spread_partitions"]
