"""Numbers and names Kafka defines for share state, used by every part.

Delivery states are Kafka's `RecordState` ids as written in a state batch's DeliveryState
field. Record types are the names this project gives the three kinds of
`__share_group_state` record (Kafka's ShareSnapshot, ShareUpdate, and a tombstone).
"""

from __future__ import annotations

from typing import Final

AVAILABLE: Final = 0
ACQUIRED: Final = 1
ACKNOWLEDGED: Final = 2
#: Kafka 4.3.1+ (KIP-1191, dead-letter queues): on the way to Archived, not terminal.
ARCHIVING: Final = 3
ARCHIVED: Final = 4
#: States a record does not leave: delivered to completion.
TERMINAL: Final = (ACKNOWLEDGED, ARCHIVED)
DELIVERY_STATE_NAMES: Final = {
    AVAILABLE: "Available",
    ACQUIRED: "Acquired",
    ACKNOWLEDGED: "Acknowledged",
    ARCHIVING: "Archiving",
    ARCHIVED: "Archived",
}

SNAPSHOT: Final = "snapshot"
UPDATE: Final = "update"
TOMBSTONE: Final = "tombstone"

#: The Kafka releases (major, minor) whose share records this project decodes, each checked
#: against records Kafka's own serializers wrote (tests/kafka/golden/). A later release may
#: change a layout inside value version 0, as 4.1 and 4.2 did: it is refused, not guessed.
KNOWN_KAFKA_RELEASES: Final = ((4, 0), (4, 1), (4, 2), (4, 3), (4, 4))

#: Java's `Long.MAX_VALUE`: offsets and counts are Java longs in Kafka.
LONG_MAX: Final = 2**63 - 1


def as_java_long(exact: int) -> int:
    """An exact integer as Java's long arithmetic wraps it (offset counts of impossible
    batches near `Long.MAX_VALUE`, which Kafka's own classes wrap, as the replay must)."""
    if -LONG_MAX - 1 <= exact <= LONG_MAX:
        return exact
    return (exact + LONG_MAX + 1) % (1 << 64) - LONG_MAX - 1
