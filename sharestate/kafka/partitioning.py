"""Which `__share_group_state` partition Kafka puts a share-partition's records on.

Kafka: `Utils.abs(("%s:%s:%d" % (groupId, topicId, partition)).hashCode()) % numPartitions`,
with Java's String.hashCode over UTF-16 code units and `Utils.abs(Integer.MIN_VALUE) == 0`.
"""

from __future__ import annotations

from typing import Final

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


def offsets_topic_partition(group_id: str, num_partitions: int = 50) -> int:
    """The `__consumer_offsets` partition of a group (`offsets.topic.num.partitions`, 50)."""
    return kafka_abs(java_string_hash(group_id)) % num_partitions
