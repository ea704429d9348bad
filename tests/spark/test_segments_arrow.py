"""The segments and placements computed in Arrow (`sharestate.audits.segments_arrow`, what an
incremental run does on the driver) give the rows of their DataFrame twins
(`sharestate.audits.segments`, what a full run does), on a sample export's history and on
that history split, per share-partition, at seeded random points into a stored and a new
part; and the segment starts the snapshot findings read, against a reference in Python."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import DataFrame, SparkSession

from sharestate import audits
from sharestate.audits import segments_arrow
from sharestate.decode.columns import KEY
from tests.support.computed import computed_sample


@dataclass(frozen=True)
class History:
    frame: DataFrame
    arrow: pa.Table


@pytest.fixture(scope="module")
def history(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[History]:
    with computed_sample(spark, tmp_path_factory.mktemp("segments-sample")) as results:
        columns = list(segments_arrow.HISTORY_COLUMNS)
        arrow = results.share_partition_history.select(*columns).toArrow()
        frame = spark.createDataFrame(arrow)
        yield History(frame.cache(), arrow)
        frame.unpersist()


def _rows(table: pa.Table, schema: pa.Schema, key: tuple[str, ...]) -> list[dict[str, object]]:
    ordered = table.cast(schema).sort_by([(c, "ascending") for c in key])
    return ordered.to_pylist()


def _split(history: pa.Table, seed: int) -> tuple[pa.Table, pa.Table]:
    """Each share-partition's rows cut at a random offset: (before, from it on)."""
    rng = random.Random(seed)
    keys = history.select(list(KEY)).to_pylist()
    offsets = history.column("source_offset").to_pylist()
    by_key: dict[tuple[object, ...], list[int]] = {}
    for key, offset in zip(keys, offsets, strict=True):
        by_key.setdefault(tuple(key.values()), []).append(offset)
    cuts = {key: rng.choice([*sorted(each), max(each) + 1]) for key, each in by_key.items()}
    later = [offset >= cuts[tuple(key.values())] for key, offset in zip(keys, offsets, strict=True)]
    mask = pa.array(later)
    return history.filter(pc.invert(mask)), history.filter(mask)


@pytest.mark.spark
def test_segments_of_a_history_equal_the_dataframe_ones(history: History) -> None:
    expected = audits.share_partition_segments(history.frame).toArrow()
    found = segments_arrow.history_segments(history.arrow)
    assert found.num_rows == expected.num_rows > 100
    # Segments with no update are there (segments with no snapshot or tombstone: below).
    assert found.column("first_update_offset").null_count > 0
    schema, key = segments_arrow.SEGMENTS_SCHEMA, segments_arrow.SEGMENT_KEY
    assert _rows(found, schema, key) == _rows(expected, schema, key)


@pytest.mark.spark
@pytest.mark.parametrize("seed", [1, 2])
def test_merged_segments_and_placements_equal_the_dataframe_ones(
    spark: SparkSession, history: History, seed: int
) -> None:
    before, after = _split(history.arrow, seed)
    assert before.num_rows and after.num_rows
    stored = audits.share_partition_segments(spark.createDataFrame(before))
    new = audits.share_partition_segments(spark.createDataFrame(after))
    expected = audits.merge_segments(stored, new).toArrow()
    new_found = segments_arrow.history_segments(after)
    # Segments cut after their snapshot: in the new part they have none.
    assert new_found.column("last_snapshot_or_tombstone").null_count > 0
    found = segments_arrow.merge_segments(segments_arrow.history_segments(before), new_found)
    schema, key = segments_arrow.SEGMENTS_SCHEMA, segments_arrow.SEGMENT_KEY
    assert _rows(found, schema, key) == _rows(expected, schema, key)
    # A segment split between the two parts is one row again.
    assert found.num_rows < segments_arrow.history_segments(before).num_rows + new.count()

    expected_placements = audits.share_partition_placements(spark.createDataFrame(found))
    schema, key = segments_arrow.PLACEMENTS_SCHEMA, segments_arrow.PLACEMENT_KEY
    assert _rows(segments_arrow.placements(found), schema, key) == _rows(
        expected_placements.toArrow(), schema, key
    )


def test_empty_inputs_give_empty_tables_of_the_delta_schema() -> None:
    empty = segments_arrow.SEGMENTS_SCHEMA.empty_table()
    history = pa.schema(
        [segments_arrow.SEGMENTS_SCHEMA.field(c) for c in segments_arrow.SEGMENT_KEY]
        + [
            pa.field("source_offset", pa.int64()),
            pa.field("source_timestamp", pa.timestamp("us", tz="UTC")),
            pa.field("record_type", pa.string()),
        ]
    ).empty_table()
    assert segments_arrow.history_segments(history).schema == segments_arrow.SEGMENTS_SCHEMA
    assert segments_arrow.merge_segments(empty, empty).num_rows == 0
    assert segments_arrow.placements(empty).schema == segments_arrow.PLACEMENTS_SCHEMA
    starts = segments_arrow.segment_starts(empty)
    assert starts.schema == segments_arrow.SEGMENT_STARTS_SCHEMA


def _null_first(values: tuple[Any, ...]) -> tuple[tuple[bool, Any], ...]:
    """A sort key ordering nulls first, field by field (as a minimum of a struct)."""
    return tuple((value is not None, value) for value in values)


def _reference_segment_starts(segments: pa.Table) -> list[dict[str, Any]]:
    """Per share-partition and segment, over its state-topic partitions' rows: the first
    record by (partition, offset, type) and the first update by (partition, offset), nulls
    first; the updates summed; and the share-partition's last segment."""
    per_segment: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    last: dict[tuple[Any, ...], int] = {}
    for row in segments.to_pylist():
        key = tuple(row[c] for c in KEY)
        per_segment.setdefault((*key, row["segment"]), []).append(row)
        last[key] = max(row["segment"], last.get(key, row["segment"]))
    out = []
    for (*key, segment), rows in per_segment.items():
        firsts = [(r["source_partition"], r["first_record"]) for r in rows]
        record = min(
            ((p, first["source_offset"], first["record_type"]) for p, first in firsts),
            key=_null_first,
        )
        updates = [
            (r["source_partition"], r["first_update_offset"])
            for r in rows
            if r["first_update_offset"] is not None
        ]
        update = min(updates, key=_null_first) if updates else None
        counts = [r["updates"] for r in rows if r["updates"] is not None]
        out.append(
            {
                **dict(zip(KEY, key, strict=True)),
                "segment": segment,
                "_first": dict(
                    zip(("source_partition", "source_offset", "record_type"), record, strict=True)
                ),
                "_first_update": None
                if update is None
                else dict(zip(("source_partition", "source_offset"), update, strict=True)),
                "_updates": sum(counts) if counts else None,
                "_last_segment": last[tuple(key)],
            }
        )
    return out


@pytest.mark.spark
@pytest.mark.parametrize("seed", [3])
def test_segment_starts_are_the_first_records_and_updates_of_each_segment(
    history: History, seed: int
) -> None:
    # Segments merged from two parts, as an incremental run has them.
    before, after = _split(history.arrow, seed)
    segments = segments_arrow.merge_segments(
        segments_arrow.history_segments(before), segments_arrow.history_segments(after)
    )
    # Some segments also on a lower state-topic partition, with an update first there
    # (a share-partition whose records moved, or an export of a misconfigured cluster).
    moved = segments.filter(pc.equal(pc.bit_wise_and(segments.column("segment"), 3), 1))
    moved = moved.set_column(
        moved.schema.get_field_index("source_partition"),
        "source_partition",
        pc.subtract(moved.column("source_partition"), 1).cast(pa.int32()),
    )
    segments = pa.concat_tables([segments, moved])
    expected = pa.Table.from_pylist(
        _reference_segment_starts(segments), schema=segments_arrow.SEGMENT_STARTS_SCHEMA
    )
    found = segments_arrow.segment_starts(segments)
    key = (*KEY, "segment")
    schema = segments_arrow.SEGMENT_STARTS_SCHEMA
    assert found.num_rows == expected.num_rows > 100
    assert found.column("_first_update").null_count > 0
    assert _rows(found, schema, key) == _rows(expected, schema, key)
