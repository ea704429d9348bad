"""A small increment's steps on the driver give the rows of their Spark versions: the table
decoder (`decode.tables`) those of `decode.spark` (records and quarantine, wrong topics and
damaged rows included), the Arrow replay (`replay.arrow`) those of `replay.spark` (from no
state and from a stored one), and the placing of delivered rows (`arrivals.place_rows`) that
of `arrivals.place_arrivals` (new, backfilled, inside a known gap, processed, duplicated,
null positions, and rows looked up among the stored ones)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import DataFrame, SparkSession

from sharestate.decode import spark as spark_decode
from sharestate.decode.columns import KEY, LOG_ORDER
from sharestate.decode.tables import (
    DecodedTable,
    decode_consumer_offsets_table,
    decode_share_state_table,
)
from sharestate.io.checkpoint import Checkpoint, Extent
from sharestate.io.store import arrow_frame
from sharestate.job.arrivals import place_arrivals, place_rows
from sharestate.job.cache import CacheScope
from sharestate.job.driver_increment import KAFKA_ROW_SCHEMA
from sharestate.kafka.schemas import SHARE_STATE_TOPIC
from sharestate.replay.arrow import replay_table
from sharestate.replay.spark import replay
from sharestate.sample.exports import SampleSpec, generate

pytestmark = pytest.mark.spark

_WHEN = datetime(2026, 11, 1, tzinfo=UTC)


def _rows(table: pa.Table | DataFrame, order: Sequence[str]) -> list[dict[str, Any]]:
    """The rows of `table` in the order of the `order` columns."""
    arrow = table if isinstance(table, pa.Table) else table.toArrow()
    rows: list[dict[str, Any]] = arrow.to_pylist()
    return sorted(rows, key=lambda row: tuple((row[c] is not None, row[c]) for c in order))


def _assert_same(got: pa.Table, want: DataFrame, order: Sequence[str]) -> None:
    assert got.column_names == want.columns
    assert _rows(got, order) == _rows(want, order)


def _kafka_row(topic: str | None, partition: int, offset: int, value: bytes) -> dict[str, Any]:
    return {
        "key": b"\x00\x02" + b"\x00" * 4,
        "value": value,
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "timestamp": _WHEN,
    }


def _export() -> tuple[pa.Table, pa.Table]:
    """A sample's two exports, the share-state one with rows of another topic, of none, and
    one cut short, besides the sample's own damaged rows."""
    state, offsets = generate(
        SampleSpec(records=1_200, share_partitions=24, records_per_snapshot=4, seed=5)
    )
    state = state.select(KAFKA_ROW_SCHEMA.names).cast(KAFKA_ROW_SCHEMA)
    extra = pa.Table.from_pylist(
        [
            _kafka_row("__consumer_offsets", 90, 1, b"\x00"),
            _kafka_row(None, 90, 2, b"\x00"),
            {**state.slice(0, 1).to_pylist()[0], "partition": 90, "offset": 3, "value": b"\x00"},
        ],
        schema=KAFKA_ROW_SCHEMA,
    )
    offsets = offsets.select(KAFKA_ROW_SCHEMA.names).cast(KAFKA_ROW_SCHEMA)
    return pa.concat_tables([state, extra]), offsets


def test_the_table_decoder_gives_the_spark_decoders_rows(spark: SparkSession) -> None:
    state, offsets = _export()
    cases: list[tuple[DecodedTable, spark_decode.Decoded]] = [
        (
            decode_share_state_table(state),
            spark_decode.decode_share_state(arrow_frame(spark, state)),
        ),
        (
            decode_share_state_table(state),
            spark_decode.decode_share_state(arrow_frame(spark, state), engine="python"),
        ),
        (
            decode_consumer_offsets_table(offsets),
            spark_decode.decode_consumer_offsets(arrow_frame(spark, offsets)),
        ),
    ]
    for got, want in cases:
        _assert_same(got.records, want.records, LOG_ORDER)
        _assert_same(got.quarantine, want.quarantine, LOG_ORDER)
    quarantined = decode_share_state_table(state).quarantine
    kinds = set(quarantined.column("reason_kind").to_pylist())
    assert {"wrong topic", "truncated"} <= kinds, kinds


def _halves(records: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Each state-topic partition's records cut in two at its middle offset."""
    middle = {
        p: sorted(
            records.filter(pc.equal(records.column("source_partition"), p))
            .column("source_offset")
            .to_pylist()
        )
        for p in set(records.column("source_partition").to_pylist())
    }
    first = pa.array(
        [
            offset < middle[p][len(middle[p]) // 2]
            for p, offset in zip(
                records.column("source_partition").to_pylist(),
                records.column("source_offset").to_pylist(),
                strict=True,
            )
        ]
    )
    return records.filter(first), records.filter(pc.invert(first))


@pytest.mark.parametrize("kafka", [(4, 1), (4, 4)], ids=str)
def test_the_arrow_replay_gives_the_spark_replays_rows(
    spark: SparkSession, kafka: tuple[int, int]
) -> None:
    state, _ = _export()
    records = decode_share_state_table(state).records
    earlier, later = _halves(records)
    order = (*KEY, *LOG_ORDER)
    whole = replay(arrow_frame(spark, records), kafka, engine="python")
    got = replay_table(records, kafka)
    _assert_same(got.history, whole.history, order)
    _assert_same(got.state, whole.state, KEY)
    # Going on from a stored state, as an increment does: the earlier half's state.
    stored = replay_table(earlier, kafka).state
    on = replay(arrow_frame(spark, later), kafka, arrow_frame(spark, stored), engine="python")
    got_on = replay_table(later, kafka, stored)
    _assert_same(got_on.history, on.history, order)
    _assert_same(got_on.state, on.state, KEY)
    # ... which ends where the replay of everything ends, for the keys it touched.
    touched = {tuple(row[c] for c in KEY) for row in got_on.state.select(list(KEY)).to_pylist()}
    ended = [r for r in _rows(got.state, KEY) if tuple(r[c] for c in KEY) in touched]
    assert [{k: v for k, v in r.items() if k != "segment"} for r in _rows(got_on.state, KEY)] == [
        {k: v for k, v in r.items() if k != "segment"} for r in ended
    ]


def _delivered() -> tuple[pa.Table, dict[int, Extent], pa.Table]:
    """Delivered rows of every kind, the extents processed, and a gap the findings know."""
    rows = [
        _kafka_row(SHARE_STATE_TOPIC, 0, offset, b"x")
        for offset in (5, 9, 10, 12, 13, 14, 15, 16, 20, 21, 21, 30)
    ]
    rows += [_kafka_row(SHARE_STATE_TOPIC, 1, offset, b"x") for offset in (0, 3, 4, 4, 7)]
    rows += [_kafka_row(SHARE_STATE_TOPIC, 2, offset, b"x") for offset in (1, 2)]  # not seen
    rows += [
        {**_kafka_row(SHARE_STATE_TOPIC, 0, 11, b"x"), "offset": None},
        {**_kafka_row(SHARE_STATE_TOPIC, 0, 11, b"x"), "partition": None},
    ]
    extents = {0: Extent(first=10, last=20, rows=9), 1: Extent(first=0, last=5, rows=6)}
    gaps = pa.table(
        {
            "source_partition": pa.array([0], pa.int32()),
            "_from": pa.array([13], pa.int64()),
            "_to": pa.array([15], pa.int64()),
        }
    )
    return pa.Table.from_pylist(rows, schema=KAFKA_ROW_SCHEMA), extents, gaps


@pytest.mark.parametrize("with_lookup", [False, True], ids=["gaps", "stored-rows"])
def test_placing_delivered_rows_on_the_driver_is_as_spark_places_them(
    spark: SparkSession, with_lookup: bool
) -> None:
    rows, extents, gaps = _delivered()
    # Of the rows inside the extents, the stored tables hold these (the others are missing).
    held = pa.table({"partition": pa.array([0, 1], pa.int32()), "offset": pa.array([12, 3])})
    checkpoint = Checkpoint(extents={"share_state": extents}, table_versions={})
    with CacheScope() as cache:
        want = place_arrivals(
            spark,
            source="share_state",
            rows=arrow_frame(spark, rows),
            fmt="parquet",
            path="unused",
            read_whole=False,
            checkpoint=checkpoint,
            cache=cache,
            gaps=None
            if with_lookup
            else arrow_frame(spark, gaps.rename_columns(["partition", "_from", "_to"])),
            stored_positions=(lambda: arrow_frame(spark, held)) if with_lookup else None,
        )
        got = place_rows(
            rows,
            extents,
            gaps=None if with_lookup else gaps,
            stored=(lambda positions: held) if with_lookup else None,
        )
        assert (got.read, got.processed, got.backfill) == (want.read, want.processed, want.backfill)
        assert got.counts == want.counts
        assert got.counts.duplicates > 0 and got.backfill > 0 and got.processed > 0
        order = ("partition", "offset")
        assert _rows(got.backfill_positions, order) == _rows(want.backfill_positions, order)
        assert _rows(got.rows, order) == _rows(want.deduplicated(), order)
