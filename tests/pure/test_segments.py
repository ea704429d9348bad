"""`share_partition_segments`, `share_partition_placements` and the segment starts the
findings read (`segments_arrow`): on a hand-made history, with the rows
docs/output-tables.md gives; an incremental run's merge of stored and new segments, which
gives the segments of the whole history; empty inputs."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from sharestate.audits import segments_arrow
from sharestate.decode.columns import KEY
from sharestate.kafka.constants import SNAPSHOT, TOMBSTONE, UPDATE
from tests.support.state_tables import HISTORY_SCHEMA, at, random_history, rows

# (partition, segment, source_partition, source_offset, record_type) of group "g", topic "t".
HISTORY = [
    (0, 0, 1, 0, UPDATE),
    (0, 0, 1, 1, UPDATE),
    (0, 1, 1, 5, SNAPSHOT),
    # Segment 1 has records on a lower state-topic partition too, an update first there (a
    # share-partition whose records moved, or an export of a misconfigured cluster).
    (0, 1, 0, 3, UPDATE),
    (0, 1, 0, 4, UPDATE),
    (0, 1, 1, 7, UPDATE),
    (0, 2, 1, 10, TOMBSTONE),
    (1, 1, 2, 2, SNAPSHOT),
    (1, 1, 2, 3, UPDATE),
    (1, 2, 2, 6, SNAPSHOT),
]


def _history() -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "group_id": "g",
                "topic_id": "t",
                "partition": partition,
                "segment": segment,
                "source_partition": source,
                "source_offset": offset,
                "source_timestamp": at(offset),
                "record_type": kind,
            }
            for partition, segment, source, offset, kind in HISTORY
        ],
        schema=HISTORY_SCHEMA,
    )


def _record(offset: int, kind: str) -> dict[str, Any]:
    return {"source_offset": offset, "record_type": kind}


def _event(offset: int, kind: str) -> dict[str, Any]:
    return {"source_offset": offset, "source_timestamp": at(offset), "record_type": kind}


def _key(partition: int) -> dict[str, Any]:
    return {"group_id": "g", "topic_id": "t", "partition": partition}


def _segment(
    at_: tuple[int, int, int],
    counts: tuple[int, int],
    first: dict[str, Any],
    last: dict[str, Any],
    first_update: int | None,
    event: dict[str, Any] | None,
) -> dict[str, Any]:
    partition, segment, source = at_
    return {
        **_key(partition),
        "segment": segment,
        "source_partition": source,
        "records": counts[0],
        "updates": counts[1],
        "first_record": first,
        "last_record": last,
        "first_update_offset": first_update,
        "last_snapshot_or_tombstone": event,
    }


SEGMENTS = [
    # Segment 0: updates before the first snapshot, no snapshot or tombstone.
    _segment((0, 0, 1), (2, 2), _record(0, UPDATE), _record(1, UPDATE), 0, None),
    _segment((0, 1, 0), (2, 2), _record(3, UPDATE), _record(4, UPDATE), 3, None),
    _segment((0, 1, 1), (2, 1), _record(5, SNAPSHOT), _record(7, UPDATE), 7, _event(5, SNAPSHOT)),
    _segment(
        (0, 2, 1),
        (1, 0),
        _record(10, TOMBSTONE),
        _record(10, TOMBSTONE),
        None,
        _event(10, TOMBSTONE),
    ),
    _segment((1, 1, 2), (2, 1), _record(2, SNAPSHOT), _record(3, UPDATE), 3, _event(2, SNAPSHOT)),
    _segment(
        (1, 2, 2), (1, 0), _record(6, SNAPSHOT), _record(6, SNAPSHOT), None, _event(6, SNAPSHOT)
    ),
]


def test_segments_of_a_hand_made_history() -> None:
    found = segments_arrow.history_segments(_history())
    assert found.schema == segments_arrow.SEGMENTS_SCHEMA
    assert rows(found) == rows(pa.Table.from_pylist(SEGMENTS, schema=found.schema))


def test_placements_of_a_hand_made_history() -> None:
    found = segments_arrow.placements(segments_arrow.history_segments(_history()))
    assert found.schema == segments_arrow.PLACEMENTS_SCHEMA

    def placement(
        partition: int, source: int, records: int, first: int, last: Any, event: Any
    ) -> Any:
        return {
            **_key(partition),
            "source_partition": source,
            "records": records,
            "first_offset": first,
            "last_record": last,
            "last_snapshot_or_tombstone": event,
        }

    # Per share-partition and state-topic partition, over its segments: the records, the
    # first offset, the last record and the latest snapshot or tombstone.
    assert rows(found) == rows(
        pa.Table.from_pylist(
            [
                placement(0, 0, 2, 3, _record(4, UPDATE), None),
                placement(0, 1, 5, 0, _record(10, TOMBSTONE), _event(10, TOMBSTONE)),
                placement(1, 2, 3, 2, _record(6, SNAPSHOT), _event(6, SNAPSHOT)),
            ],
            schema=found.schema,
        )
    )


def test_segment_starts_of_a_hand_made_history() -> None:
    found = segments_arrow.segment_starts(segments_arrow.history_segments(_history()))
    assert found.schema == segments_arrow.SEGMENT_STARTS_SCHEMA

    def start(
        key: tuple[int, int],
        first: tuple[int, int, str],
        first_update: tuple[int, int] | None,
        updates: int,
        last_segment: int,
    ) -> dict[str, Any]:
        return {
            **_key(key[0]),
            "segment": key[1],
            "_first": dict(
                zip(("source_partition", "source_offset", "record_type"), first, strict=True)
            ),
            "_first_update": None
            if first_update is None
            else dict(zip(("source_partition", "source_offset"), first_update, strict=True)),
            "_updates": updates,
            "_last_segment": last_segment,
        }

    # Per share-partition and segment, over its state-topic partitions: the first record
    # and first update on the lowest partition that has one, the updates of all, and the
    # share-partition's last segment.
    assert rows(found) == rows(
        pa.Table.from_pylist(
            [
                start((0, 0), (1, 0, UPDATE), (1, 0), 2, 2),
                start((0, 1), (0, 3, UPDATE), (0, 3), 3, 2),
                start((0, 2), (1, 10, TOMBSTONE), None, 0, 2),
                start((1, 1), (2, 2, SNAPSHOT), (2, 3), 1, 2),
                start((1, 2), (2, 6, SNAPSHOT), None, 0, 2),
            ],
            schema=found.schema,
        )
    )


def _split(history: pa.Table, rng: random.Random) -> tuple[pa.Table, pa.Table]:
    """Each share-partition's rows cut at a random offset: (before, from it on)."""
    keys = history.select(list(KEY)).to_pylist()
    offsets = history.column("source_offset").to_pylist()
    by_key: dict[tuple[Any, ...], list[int]] = {}
    for key, offset in zip(keys, offsets, strict=True):
        by_key.setdefault(tuple(key.values()), []).append(offset)
    cuts = {key: rng.choice([*sorted(each), max(each) + 1]) for key, each in by_key.items()}
    later = [offset >= cuts[tuple(key.values())] for key, offset in zip(keys, offsets, strict=True)]
    mask = pa.array(later, pa.bool_())
    return history.filter(pc.invert(mask)), history.filter(mask)


@pytest.mark.parametrize("seed", range(40))
def test_merged_segments_give_the_segments_of_the_whole_history(seed: int) -> None:
    rng = random.Random(seed)
    history = random_history(rng)
    before, after = _split(history, rng)
    found = segments_arrow.merge_segments(
        segments_arrow.history_segments(before), segments_arrow.history_segments(after)
    )
    whole = segments_arrow.history_segments(history)
    assert found.schema == segments_arrow.SEGMENTS_SCHEMA
    assert rows(found) == rows(whole)
    assert rows(segments_arrow.placements(found)) == rows(segments_arrow.placements(whole))


def test_empty_inputs_give_empty_tables_of_the_delta_schema() -> None:
    empty = segments_arrow.SEGMENTS_SCHEMA.empty_table()
    assert segments_arrow.history_segments(HISTORY_SCHEMA.empty_table()).schema == (
        segments_arrow.SEGMENTS_SCHEMA
    )
    assert segments_arrow.merge_segments(empty, empty).num_rows == 0
    assert segments_arrow.merge_segments(empty, empty).schema == segments_arrow.SEGMENTS_SCHEMA
    assert segments_arrow.placements(empty).schema == segments_arrow.PLACEMENTS_SCHEMA
    starts = segments_arrow.segment_starts(empty)
    assert starts.schema == segments_arrow.SEGMENT_STARTS_SCHEMA
    assert starts.num_rows == 0
