"""Which `__share_group_state` partition Kafka puts a share-partition's records on.

Kafka: `Utils.abs(("%s:%s:%d" % (groupId, topicId, partition)).hashCode()) % numPartitions`,
with Java's String.hashCode over UTF-16 code units and `Utils.abs(Integer.MIN_VALUE) == 0`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import numpy as np

#: Kafka's default `share.coordinator.state.topic.num.partitions`.
DEFAULT_STATE_TOPIC_PARTITIONS: Final = 50


def java_string_hash(text: str) -> int:
    """Java's `String.hashCode()` as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's `Utils.abs`: like abs, but Integer.MIN_VALUE maps to 0."""
    return 0 if n == -(1 << 31) else abs(n)


def state_topic_partition(
    group_id: str,
    topic_id: str,
    partition: int,
    num_partitions: int = DEFAULT_STATE_TOPIC_PARTITIONS,
) -> int:
    return kafka_abs(java_string_hash(f"{group_id}:{topic_id}:{partition}")) % num_partitions


def share_partition_key_hashes(keys: Iterable[tuple[str, str, int]]) -> np.ndarray:
    """`kafka_abs(java_string_hash("group:topic:partition"))` of each (group_id, topic_id,
    partition), as int64: the partitioner's hash before the modulus, for many keys at once
    (numpy: the keys' UTF-16 code units in a matrix, folded a column at a time)."""
    units = [np.frombuffer(f"{g}:{t}:{p}".encode("utf-16-be"), dtype=">u2") for g, t, p in keys]
    lengths = np.array([len(u) for u in units], dtype=np.int64)
    if not units:
        return np.zeros(0, dtype=np.int64)
    matrix = np.zeros((len(units), int(lengths.max())), dtype=np.uint64)
    rows = np.repeat(np.arange(len(units)), lengths)
    columns = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    matrix[rows, columns] = np.concatenate(units)
    hashed = np.zeros(len(units), dtype=np.uint64)
    for column in range(matrix.shape[1]):
        folded = (hashed * np.uint64(31) + matrix[:, column]) & np.uint64(0xFFFFFFFF)
        hashed = np.where(lengths > column, folded, hashed)
    signed = hashed.astype(np.int64)
    signed = np.where(signed >= 1 << 31, signed - (1 << 32), signed)
    return np.where(signed == -(1 << 31), 0, np.abs(signed))


def offsets_topic_partition(group_id: str, num_partitions: int = 50) -> int:
    """The `__consumer_offsets` partition of a group (`offsets.topic.num.partitions`, 50)."""
    return kafka_abs(java_string_hash(group_id)) % num_partitions
