"""Key partitioning: Kafka's murmur2, as the Java client and kafka-python compute it.

All three clients pick a keyed record's partition with it (librdkafka is told
``partitioner=murmur2_random``; the memory broker calls :func:`murmur2_partition`),
so a key lands on the same partition whichever client produced it.

Examples
--------
>>> murmur2_partition(b"key-123", 7)
5
"""
from __future__ import annotations

__all__ = ["murmur2", "murmur2_partition"]


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (seed 0x9747b28c), as in the Java client's ``Utils.murmur2``."""
    length = len(data)
    m = 0x5BD1E995
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    n4 = length // 4
    for i in range(n4):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length % 4
    base = n4 * 4
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


def murmur2_partition(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key``."""
    return (murmur2(bytes(key)) & 0x7FFFFFFF) % num_partitions
