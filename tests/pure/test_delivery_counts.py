"""`counts_arrow.delivery_counts` on hand-made states: sums near the ends of a long, null
batches and fields, delivery states Kafka does not name, deleted share-partitions, no
batches and an empty state, with the rows docs/output-tables.md (`delivery_counts`) gives."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from sharestate.audits import counts_arrow
from sharestate.kafka.constants import ACKNOWLEDGED, ARCHIVED, AVAILABLE
from tests.support.state_tables import BATCHES, KEY_FIELDS, LONG_MAX, LONG_MIN, batch, rows

LIMIT = 3
STATE_SCHEMA = pa.schema([*KEY_FIELDS, ("deleted", pa.bool_()), ("state_batches", BATCHES)])


def _share_partition(
    partition: int | None,
    deleted: bool | None,
    batches: list[dict[str, Any] | None] | None,
    group: str | None = "g",
) -> dict[str, Any]:
    return {
        "group_id": group,
        "topic_id": "t",
        "partition": partition,
        "deleted": deleted,
        "state_batches": batches,
    }


def _state() -> pa.Table:
    share_partitions = [
        # The ends of a long: sizes of 2**64 and 2**63 wrap as Java's long arithmetic does.
        _share_partition(
            0,
            False,
            [
                batch(LONG_MIN, LONG_MAX, AVAILABLE, 1),
                batch(LONG_MIN, LONG_MAX, AVAILABLE, 1),
                batch(0, LONG_MAX, AVAILABLE, 1),
                batch(LONG_MAX, LONG_MAX, AVAILABLE, 2),
                batch(LONG_MIN, LONG_MIN, AVAILABLE, 2),
                batch(LONG_MAX, LONG_MIN, ARCHIVED, 5),
                batch(5, 4, ARCHIVED, 5),
                batch(LONG_MIN, -1, ACKNOWLEDGED, 3),
                batch(LONG_MIN, -1, ACKNOWLEDGED, 3),
                batch(LONG_MIN, -1, ACKNOWLEDGED, 3),
            ],
        ),
        # Deleted unknown: live. A null batch, null fields, states Kafka does not name.
        _share_partition(
            1,
            None,
            [
                None,
                None,
                batch(None, 10, ARCHIVED, 1),
                batch(3, None, ARCHIVED, 1),
                batch(1, 2, None, 1),
                batch(1, 4, ARCHIVED, None),
                batch(1, 4, 9, 0),
                batch(7, 8, -1, 0),
                batch(0, 0, ARCHIVED, 1),
            ],
        ),
        _share_partition(2, True, [batch(0, 9, ARCHIVED, 7)]),
        _share_partition(3, False, None),
        _share_partition(4, False, []),
        # A null key, and a key given twice (its rows group together).
        _share_partition(None, False, [batch(1, 1, ARCHIVED, 4)], group=None),
        _share_partition(0, False, [batch(1, 5, ARCHIVED, 3)], group="h"),
        _share_partition(
            0, False, [batch(8, 9, ARCHIVED, 3), batch(20, 29, ARCHIVED, 4)], group="h"
        ),
    ]
    return pa.Table.from_pylist(share_partitions, schema=STATE_SCHEMA)


def _count(
    key: tuple[str | None, int | None],
    state: tuple[int | None, str | None],
    count: int | None,
    offsets: int,
    batches: int,
    bounds: tuple[int | None, int | None],
    at_limit: bool | None,
) -> dict[str, Any]:
    return {
        "group_id": key[0],
        "topic_id": "t",
        "partition": key[1],
        "delivery_state": state[0],
        "delivery_state_name": state[1],
        "delivery_count": count,
        "offsets": offsets,
        "batches": batches,
        "first_offset": bounds[0],
        "last_offset": bounds[1],
        "at_delivery_limit": at_limit,
    }


AVAILABLE_ = (AVAILABLE, "Available")
ARCHIVED_ = (ARCHIVED, "Archived")


def test_delivery_counts_of_hand_made_state() -> None:
    found = counts_arrow.delivery_counts(_state(), LIMIT)
    assert found.schema == counts_arrow.DELIVERY_COUNTS_SCHEMA
    g0, g1 = ("g", 0), ("g", 1)
    assert rows(found) == rows(
        pa.Table.from_pylist(
            [
                # 2**64 + 2**64 + 2**63 wraps to Long.MIN_VALUE.
                _count(g0, AVAILABLE_, 1, LONG_MIN, 3, (LONG_MIN, LONG_MAX), False),
                _count(g0, AVAILABLE_, 2, 2, 2, (LONG_MIN, LONG_MAX), False),
                # Batches that end before they start count 0 offsets, their bounds still
                # the lowest first and highest last offset.
                _count(g0, ARCHIVED_, 5, 0, 2, (5, 4), True),
                # 3 * 2**63 wraps to Long.MIN_VALUE too.
                _count(g0, (ACKNOWLEDGED, "Acknowledged"), 3, LONG_MIN, 3, (LONG_MIN, -1), True),
                # Null batches: a row of null state and count, no offsets, no bounds.
                _count(g1, (None, None), None, 0, 2, (None, None), None),
                # A null bound counts 0 and is skipped by the bounds: only [0, 0] counts.
                _count(g1, ARCHIVED_, 1, 1, 3, (0, 10), False),
                _count(g1, (None, None), 1, 2, 1, (1, 2), False),
                _count(g1, ARCHIVED_, None, 4, 1, (1, 4), None),
                _count(g1, (9, "Unknown(9)"), 0, 4, 1, (1, 4), False),
                _count(g1, (-1, "Unknown(-1)"), 0, 2, 1, (7, 8), False),
                # Partition 2 is deleted, 3 and 4 have no batches: no rows.
                _count((None, None), ARCHIVED_, 4, 1, 1, (1, 1), True),
                _count(("h", 0), ARCHIVED_, 3, 7, 2, (1, 9), True),
                _count(("h", 0), ARCHIVED_, 4, 10, 1, (20, 29), True),
            ],
            schema=counts_arrow.DELIVERY_COUNTS_SCHEMA,
        )
    )


def test_an_empty_or_deleted_state_gives_an_empty_table() -> None:
    for state in (STATE_SCHEMA.empty_table(), _state().slice(2, 1), _state().slice(3, 2)):
        found = counts_arrow.delivery_counts(state, LIMIT)
        assert found.num_rows == 0
        assert found.schema == counts_arrow.DELIVERY_COUNTS_SCHEMA
