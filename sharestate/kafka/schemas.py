"""Field tables of every coordinator record layout Kafka has shipped that this job decodes.

Written from Kafka's message schemas as released (checked against the schema files bundled
in the 4.0.0 ... 4.4.0 jars on Maven Central). Field names are Kafka's, in snake_case, so
`snapshot_epoch` here is `SnapshotEpoch` / `snapshotEpoch` in Kafka's JSON.

Several changes were made *inside* value version 0, so the bytes alone do not name their
layout; a layout is chosen per record by which one parses the value exactly (see
`sharestate.kafka.records`). Layout names are the first Kafka release that wrote them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

#: Primitive kinds a field can have.
INT8, INT16, UINT16, INT32, INT64 = "int8", "int16", "uint16", "int32", "int64"
UUID, STRING = "uuid", "string"
INT32_ARRAY, STRING_ARRAY, STRUCT_ARRAY = "[]int32", "[]string", "[]struct"

#: Fewest bytes one element of each kind can take on the wire (flexible encoding); used to
#: reject absurd array counts before allocating anything.
MIN_BYTES: Final[dict[str, int]] = {
    INT8: 1,
    INT16: 2,
    UINT16: 2,
    INT32: 4,
    INT64: 8,
    UUID: 16,
    STRING: 1,
    INT32_ARRAY: 1,
    STRING_ARRAY: 1,
    STRUCT_ARRAY: 1,
}


@dataclass(frozen=True)
class Field:
    name: str
    kind: str
    nullable: bool = False
    struct: Struct | None = None


@dataclass(frozen=True)
class TaggedField:
    tag: int
    name: str
    kind: str  # a fixed-width primitive
    default: int


@dataclass(frozen=True)
class Struct:
    name: str
    fields: tuple[Field, ...]
    tagged: tuple[TaggedField, ...] = ()
    flexible: bool = True
    min_bytes: int = field(init=False)

    def __post_init__(self) -> None:
        fixed = sum(MIN_BYTES[f.kind] for f in self.fields)
        object.__setattr__(self, "min_bytes", fixed + (1 if self.flexible else 0))


def _f(name: str, kind: str, *, nullable: bool = False, struct: Struct | None = None) -> Field:
    return Field(name, kind, nullable, struct)


# --- __share_group_state -------------------------------------------------------------------

SHARE_STATE_TOPIC: Final = "__share_group_state"
CONSUMER_OFFSETS_TOPIC: Final = "__consumer_offsets"

SHARE_SNAPSHOT, SHARE_UPDATE = 0, 1

SHARE_STATE_KEY = Struct(
    "ShareStateKey",
    (_f("group_id", STRING), _f("topic_id", UUID), _f("partition", INT32)),
    flexible=False,
)

STATE_BATCH = Struct(
    "StateBatch",
    (
        _f("first_offset", INT64),
        _f("last_offset", INT64),
        _f("delivery_state", INT8),
        _f("delivery_count", INT16),
    ),
)
#: Bytes of one state batch with an empty tagged section: 8 + 8 + 1 + 2 + 1.
STATE_BATCH_BYTES: Final = 20

_BATCHES = _f("state_batches", STRUCT_ARRAY, struct=STATE_BATCH)
_DCC = TaggedField(0, "delivery_complete_count", INT32, -1)

#: Share-state layouts, oldest first. "4.2" is the 4.1 layout plus the tagged
#: DeliveryCompleteCount (KIP-1226); Kafka omits that tag when it holds its default -1,
#: and then a 4.2+ record is byte-for-byte a 4.1 record.
SHARE_STATE_LAYOUTS: Final = ("4.0", "4.1", "4.2")

SHARE_SNAPSHOT_VALUE: Final[dict[str, Struct]] = {
    "4.0": Struct(
        "ShareSnapshotValue",
        (
            _f("snapshot_epoch", UINT16),
            _f("state_epoch", INT32),
            _f("leader_epoch", INT32),
            _f("start_offset", INT64),
            _BATCHES,
        ),
    ),
    "4.1": Struct(
        "ShareSnapshotValue",
        (
            _f("snapshot_epoch", INT32),
            _f("state_epoch", INT32),
            _f("leader_epoch", INT32),
            _f("start_offset", INT64),
            _f("create_timestamp", INT64),
            _f("write_timestamp", INT64),
            _BATCHES,
        ),
    ),
}
SHARE_SNAPSHOT_VALUE["4.2"] = Struct(
    "ShareSnapshotValue", SHARE_SNAPSHOT_VALUE["4.1"].fields, tagged=(_DCC,)
)

SHARE_UPDATE_VALUE: Final[dict[str, Struct]] = {
    "4.0": Struct(
        "ShareUpdateValue",
        (
            _f("snapshot_epoch", UINT16),
            _f("leader_epoch", INT32),
            _f("start_offset", INT64),
            _BATCHES,
        ),
    ),
    "4.1": Struct(
        "ShareUpdateValue",
        (
            _f("snapshot_epoch", INT32),
            _f("leader_epoch", INT32),
            _f("start_offset", INT64),
            _BATCHES,
        ),
    ),
}
SHARE_UPDATE_VALUE["4.2"] = Struct(
    "ShareUpdateValue", SHARE_UPDATE_VALUE["4.1"].fields, tagged=(_DCC,)
)


# --- __consumer_offsets: share-group records ----------------------------------------------

#: Every record type id the group coordinator has used, by Kafka's record name.
GROUP_RECORD_TYPES: Final[dict[int, str]] = {
    0: "LegacyOffsetCommit",
    1: "OffsetCommit",
    2: "GroupMetadata",
    3: "ConsumerGroupMetadata",
    4: "ConsumerGroupPartitionMetadata",
    5: "ConsumerGroupMemberMetadata",
    6: "ConsumerGroupTargetAssignmentMetadata",
    7: "ConsumerGroupTargetAssignmentMember",
    8: "ConsumerGroupCurrentMemberAssignment",
    9: "ShareGroupPartitionMetadata",
    10: "ShareGroupMemberMetadata",
    11: "ShareGroupMetadata",
    12: "ShareGroupTargetAssignmentMetadata",
    13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment",
    15: "ShareGroupStatePartitionMetadata",
    16: "ConsumerGroupRegularExpression",
    17: "StreamsGroupMetadata",
    18: "StreamsGroupPartitionMetadata",
    19: "StreamsGroupMemberMetadata",
    20: "StreamsGroupTargetAssignmentMetadata",
    21: "StreamsGroupTargetAssignmentMember",
    22: "StreamsGroupCurrentMemberAssignment",
    23: "StreamsGroupTopology",
}
SHARE_GROUP_RECORD_TYPES: Final = frozenset(range(9, 16))

_GROUP_KEY = Struct("GroupKey", (_f("group_id", STRING),), flexible=False)
_GROUP_MEMBER_KEY = Struct(
    "GroupMemberKey", (_f("group_id", STRING), _f("member_id", STRING)), flexible=False
)
SHARE_GROUP_KEYS: Final[dict[int, Struct]] = {
    9: _GROUP_KEY,
    10: _GROUP_MEMBER_KEY,
    11: _GROUP_KEY,
    12: _GROUP_KEY,
    13: _GROUP_MEMBER_KEY,
    14: _GROUP_MEMBER_KEY,
    15: _GROUP_KEY,
}

_TOPIC_PARTITIONS = Struct("TopicPartitions", (_f("topic_id", UUID), _f("partitions", INT32_ARRAY)))
_TOPIC_PARTITIONS_INFO = Struct(
    "TopicPartitionsInfo",
    (_f("topic_id", UUID), _f("topic_name", STRING), _f("partitions", INT32_ARRAY)),
)
_TOPIC_INFO = Struct("TopicInfo", (_f("topic_id", UUID), _f("topic_name", STRING)))
_PARTITION_METADATA = Struct(
    "PartitionMetadata", (_f("partition", INT32), _f("racks", STRING_ARRAY))
)
_TOPIC_METADATA = Struct(
    "TopicMetadata",
    (
        _f("topic_id", UUID),
        _f("topic_name", STRING),
        _f("num_partitions", INT32),
        _f("partition_metadata", STRUCT_ARRAY, struct=_PARTITION_METADATA),
    ),
)

#: Group-record layouts. "4.0+" marks a type whose bytes never changed.
GROUP_LAYOUTS: Final = ("4.0", "4.1", "4.0+")

#: Per record type: layout name -> value struct, tried in this order.
SHARE_GROUP_VALUES: Final[dict[int, dict[str, Struct]]] = {
    9: {
        "4.0": Struct(
            "ShareGroupPartitionMetadataValue",
            (_f("topics", STRUCT_ARRAY, struct=_TOPIC_METADATA),),
        )
    },
    10: {
        "4.0+": Struct(
            "ShareGroupMemberMetadataValue",
            (
                _f("rack_id", STRING, nullable=True),
                _f("client_id", STRING),
                _f("client_host", STRING),
                _f("subscribed_topic_names", STRING_ARRAY),
            ),
        )
    },
    11: {
        "4.1": Struct("ShareGroupMetadataValue", (_f("epoch", INT32), _f("metadata_hash", INT64))),
        "4.0": Struct("ShareGroupMetadataValue", (_f("epoch", INT32),)),
    },
    12: {
        # AssignmentTimestamp (tag 0) arrived in 4.3; being tagged, older bytes still parse.
        "4.0+": Struct(
            "ShareGroupTargetAssignmentMetadataValue",
            (_f("assignment_epoch", INT32),),
            tagged=(TaggedField(0, "assignment_timestamp", INT64, 0),),
        )
    },
    13: {
        "4.0+": Struct(
            "ShareGroupTargetAssignmentMemberValue",
            (_f("topic_partitions", STRUCT_ARRAY, struct=_TOPIC_PARTITIONS),),
        )
    },
    14: {
        "4.0+": Struct(
            "ShareGroupCurrentMemberAssignmentValue",
            (
                _f("member_epoch", INT32),
                _f("previous_member_epoch", INT32),
                _f("state", INT8),
                _f("assigned_partitions", STRUCT_ARRAY, struct=_TOPIC_PARTITIONS),
            ),
        )
    },
    15: {
        "4.1": Struct(
            "ShareGroupStatePartitionMetadataValue",
            (
                _f("initializing_topics", STRUCT_ARRAY, struct=_TOPIC_PARTITIONS_INFO),
                _f("initialized_topics", STRUCT_ARRAY, struct=_TOPIC_PARTITIONS_INFO),
                _f("deleting_topics", STRUCT_ARRAY, struct=_TOPIC_INFO),
            ),
        ),
        "4.0": Struct(
            "ShareGroupStatePartitionMetadataValue",
            (
                _f("initialized_topics", STRUCT_ARRAY, struct=_TOPIC_PARTITIONS_INFO),
                _f("deleting_topics", STRUCT_ARRAY, struct=_TOPIC_INFO),
            ),
        ),
    },
}
