"""Column layouts of what the decoders produce, as Arrow types.

Spark types are derived from these (see `sharestate.decode.spark`), so the Arrow arrays
the decoder builds and the type Spark is told to expect cannot drift apart.
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa

#: The share-partition: what Kafka keys share state by, and what the tables key rows by.
KEY: Final = ("group_id", "topic_id", "partition")
#: A record's place in the exported topic: partitions are independent logs.
LOG_ORDER: Final = ("source_partition", "source_offset")

STATE_BATCH_TYPE: Final = pa.struct(
    [
        pa.field("first_offset", pa.int64(), nullable=False),
        pa.field("last_offset", pa.int64(), nullable=False),
        pa.field("delivery_state", pa.int32(), nullable=False),
        pa.field("delivery_count", pa.int32(), nullable=False),
    ]
)
STATE_BATCHES_TYPE: Final = pa.list_(pa.field("element", STATE_BATCH_TYPE, nullable=False))

UNKNOWN_TAGS_TYPE: Final = pa.list_(
    pa.field(
        "element",
        pa.struct(
            [
                pa.field("path", pa.string()),
                pa.field("tag", pa.int32()),
                pa.field("data", pa.binary()),
            ]
        ),
    )
)

#: What the decoder makes of a `__share_group_state` record.
SHARE_STATE_DECODED_FIELDS: Final = [
    pa.field("record_type", pa.string()),
    pa.field("group_id", pa.string()),
    pa.field("topic_id", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("snapshot_epoch", pa.int32()),
    pa.field("state_epoch", pa.int32()),
    pa.field("leader_epoch", pa.int32()),
    pa.field("start_offset", pa.int64()),
    pa.field("create_timestamp", pa.int64()),
    pa.field("write_timestamp", pa.int64()),
    pa.field("delivery_complete_count", pa.int32()),
    pa.field("state_batches", STATE_BATCHES_TYPE),
    pa.field("layout", pa.string()),
    pa.field("value_version", pa.int16()),
    pa.field("unknown_tagged_fields", UNKNOWN_TAGS_TYPE),
]

#: Set only on rows that failed to decode; they go to `quarantine` with their bytes.
DECODE_ERROR_FIELD: Final = pa.field("decode_error", pa.string())

#: Fields of the struct the share-state decoder returns per row.
SHARE_STATE_RESULT_FIELDS: Final = [*SHARE_STATE_DECODED_FIELDS, DECODE_ERROR_FIELD]

#: The export columns the decode step reads, in order (the JVM tier takes exactly these types).
DECODE_INPUT_FIELDS: Final = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    # Spark passes timestamps as microseconds; the zone does not change the schema.
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
]

#: The JVM tier's flag on each of its output rows: true when the row is left to the Python
#: decoder (its decoded columns null, its bytes kept).
NEEDS_REFERENCE_FIELD: Final = pa.field("needs_reference", pa.bool_(), nullable=False)


def decoded_output_fields(result_fields: list[pa.Field]) -> list[pa.Field]:
    """What the decode step hands back to Spark: source columns, the decoder's fields (the
    error last), and the raw bytes (set only where a table needs them)."""
    return [
        pa.field("source_partition", pa.int32()),
        pa.field("source_offset", pa.int64()),
        pa.field("source_timestamp", pa.timestamp("us", tz="UTC")),
        *result_fields,
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
    ]


_TOPIC_PARTITIONS = pa.list_(
    pa.struct([pa.field("topic_id", pa.string()), pa.field("partitions", pa.list_(pa.int32()))])
)
_TOPIC_PARTITIONS_INFO = pa.list_(
    pa.struct(
        [
            pa.field("topic_id", pa.string()),
            pa.field("topic_name", pa.string()),
            pa.field("partitions", pa.list_(pa.int32())),
        ]
    )
)
_TOPIC_INFO = pa.list_(
    pa.struct([pa.field("topic_id", pa.string()), pa.field("topic_name", pa.string())])
)
_TOPIC_METADATA = pa.list_(
    pa.struct(
        [
            pa.field("topic_id", pa.string()),
            pa.field("topic_name", pa.string()),
            pa.field("num_partitions", pa.int32()),
            pa.field(
                "partition_metadata",
                pa.list_(
                    pa.struct(
                        [
                            pa.field("partition", pa.int32()),
                            pa.field("racks", pa.list_(pa.string())),
                        ]
                    )
                ),
            ),
        ]
    )
)

#: Output column -> (record type, Kafka field in snake_case) for share-group record values.
GROUP_VALUE_COLUMNS: Final[dict[str, tuple[int, str, pa.DataType]]] = {
    "partition_metadata_topics": (9, "topics", _TOPIC_METADATA),
    "rack_id": (10, "rack_id", pa.string()),
    "client_id": (10, "client_id", pa.string()),
    "client_host": (10, "client_host", pa.string()),
    "subscribed_topic_names": (10, "subscribed_topic_names", pa.list_(pa.string())),
    "group_epoch": (11, "epoch", pa.int32()),
    "metadata_hash": (11, "metadata_hash", pa.int64()),
    "assignment_epoch": (12, "assignment_epoch", pa.int32()),
    "assignment_timestamp": (12, "assignment_timestamp", pa.int64()),
    "target_partitions": (13, "topic_partitions", _TOPIC_PARTITIONS),
    "member_epoch": (14, "member_epoch", pa.int32()),
    "previous_member_epoch": (14, "previous_member_epoch", pa.int32()),
    "member_state": (14, "state", pa.int32()),
    "assigned_partitions": (14, "assigned_partitions", _TOPIC_PARTITIONS),
    "initializing_topics": (15, "initializing_topics", _TOPIC_PARTITIONS_INFO),
    "initialized_topics": (15, "initialized_topics", _TOPIC_PARTITIONS_INFO),
    "deleting_topics": (15, "deleting_topics", _TOPIC_INFO),
}

GROUP_RECORD_FIELDS: Final = [
    pa.field("record_type_id", pa.int32()),
    pa.field("record_type", pa.string()),
    pa.field("is_share_record", pa.bool_()),
    pa.field("tombstone", pa.bool_()),
    pa.field("group_id", pa.string()),
    pa.field("member_id", pa.string()),
    pa.field("layout", pa.string()),
    pa.field("value_version", pa.int16()),
    *[pa.field(name, dtype) for name, (_, _, dtype) in GROUP_VALUE_COLUMNS.items()],
    pa.field("unknown_tagged_fields", UNKNOWN_TAGS_TYPE),
]

#: Fields of the struct the group-record decoder returns per row.
GROUP_RESULT_FIELDS: Final = [*GROUP_RECORD_FIELDS, DECODE_ERROR_FIELD]
