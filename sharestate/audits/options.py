"""The settings of one audit run (the job's --delivery-count-limit, --stall-span and
--state-topic-partitions)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AuditOptions:
    #: Kafka's `group.share.delivery.count.limit`: archived at this count = poison message.
    delivery_count_limit: int = 5
    #: A share-partition whose SPSO has not moved for this long while records wait is stalled;
    #: a partition listed as initializing (a topic as deleting) this long is stuck.
    stall_span_seconds: float = 86400.0
    #: Partitions of `__share_group_state`; None: Kafka's default 50 or the highest exported
    #: partition + 1, whichever fits the export (the check is skipped when neither fits).
    state_topic_partitions: int | None = None
