"""An incremental run's merges of the audit tables, on a sample export decoded and replayed
by the full pipeline (a realistic history: many share-partitions, repeated and overlapping
Archived batches, moved and deleted share-partitions): each table's rows from a stored part
(as an earlier run wrote them) and the new records, cut per share-partition or partition at
seeded random points, equal the rows computed from everything at once, and those equal the
full run's audit tables. Spark only makes the sample; the audits are Arrow."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import SparkSession

from sharestate import audits
from sharestate.audits import pruning_arrow, ranges_arrow, segments_arrow
from sharestate.audits.findings.records import exported_positions, gap_ranges
from sharestate.decode.columns import KEY
from tests.support.computed import computed_sample
from tests.support.state_tables import rows

#: Low, so that the sample's records reach it and every reason has ranges.
LIMIT = 3


@dataclass(frozen=True)
class Sample:
    records: pa.Table
    state: pa.Table
    history: pa.Table
    positions: pa.Table
    audits: audits.AuditTables


@pytest.fixture(scope="module")
def sample(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sample]:
    root = tmp_path_factory.mktemp("audit-merges-sample")
    with computed_sample(spark, root) as results:
        records = results.share_state_records.select(*audits.RECORD_COLUMNS).toArrow()
        quarantine = results.quarantine.select(*audits.QUARANTINE_COLUMNS).toArrow()
        yield Sample(
            records,
            results.share_partition_state.toArrow(),
            results.share_partition_history.select(*segments_arrow.HISTORY_COLUMNS).toArrow(),
            exported_positions(records, quarantine, "share_state"),
            audits.audit(
                records,
                results.share_partition_state,
                results.share_partition_history,
                quarantine,
                audits.AuditOptions(delivery_count_limit=LIMIT),
            ),
        )


def _cut(table: pa.Table, by: list[str], seed: int) -> tuple[pa.Table, pa.Table]:
    """`table`'s rows of each value of `by` cut at a random source offset (one of theirs, or
    past the last): (before, from it on)."""
    rng = random.Random(seed)
    keys = [tuple(row.values()) for row in table.select(by).to_pylist()]
    offsets = table.column("source_offset").to_pylist()
    each: dict[tuple[Any, ...], list[int]] = {}
    for key, offset in zip(keys, offsets, strict=True):
        each.setdefault(key, []).append(offset)
    cuts = {key: rng.choice([*sorted(mine), max(mine) + 1]) for key, mine in each.items()}
    later = pa.array([o >= cuts[k] for k, o in zip(keys, offsets, strict=True)], pa.bool_())
    before, after = table.filter(pc.invert(later)), table.filter(later)
    assert before.num_rows and after.num_rows
    return before, after


def _ranges(table: pa.Table) -> list[dict[str, Any]]:
    return rows(table.select(ranges_arrow.RANGES_SCHEMA.names).cast(ranges_arrow.RANGES_SCHEMA))


@pytest.mark.spark
@pytest.mark.parametrize("seed", [1, 2])
def test_new_intervals_merged_with_stored_ranges_give_the_ranges_of_every_record(
    sample: Sample, seed: int
) -> None:
    final = ranges_arrow.final_state_columns(sample.state)
    whole = ranges_arrow.archived_ranges(
        ranges_arrow.reasoned_intervals(sample.records, LIMIT), final
    )
    # The sample has what the merge must get right: ranges of several intervals, settled
    # ones, ones still in the state, of two reasons at least.
    assert whole.num_rows > 100
    assert max(whole.column("sightings").to_pylist()) > 1
    assert set(whole.column("settled").to_pylist()) == {True, False}
    assert any(whole.column("still_in_state").to_pylist())
    assert set(whole.column("reason").to_pylist()) >= {
        ranges_arrow.REASON_DELIVERY_LIMIT,
        ranges_arrow.REASON_BELOW_LIMIT,
    }
    # The full run's tables (merged per key, then the final state) are these ranges.
    assert _ranges(sample.audits.archived_ranges) == _ranges(whole)

    older, newer = _cut(sample.records, list(KEY), seed)
    stored = ranges_arrow.archived_ranges(ranges_arrow.reasoned_intervals(older, LIMIT), final)
    found = ranges_arrow.archived_ranges(
        ranges_arrow.reasoned_intervals(newer, LIMIT), final, stored=stored
    )
    assert _ranges(found) == _ranges(whole)


@pytest.mark.spark
@pytest.mark.parametrize("seed", [1, 2])
def test_merged_segments_give_the_segments_and_placements_of_the_whole_history(
    sample: Sample, seed: int
) -> None:
    whole = segments_arrow.history_segments(sample.history)
    assert whole.num_rows > 100
    # Segments with no update, and (below) segments cut after their snapshot.
    assert whole.column("first_update_offset").null_count > 0
    assert rows(sample.audits.segments) == rows(whole)

    before, after = _cut(sample.history, list(KEY), seed)
    stored, new = segments_arrow.history_segments(before), segments_arrow.history_segments(after)
    assert new.column("last_snapshot_or_tombstone").null_count > 0
    found = segments_arrow.merge_segments(stored, new)
    # A segment split between the two parts is one row again.
    assert found.num_rows < stored.num_rows + new.num_rows
    assert rows(found) == rows(whole)
    assert rows(segments_arrow.placements(found)) == rows(sample.audits.placements)
    assert rows(segments_arrow.segment_starts(found)) == rows(segments_arrow.segment_starts(whole))


@pytest.mark.spark
@pytest.mark.parametrize("seed", [1, 2])
def test_carried_cutoff_from_stored_extents_is_the_cutoff_of_every_position(
    sample: Sample, seed: int
) -> None:
    placements = sample.audits.placements
    whole = pruning_arrow.pruning_cutoff(placements, sample.positions)
    # The sample holds partitions Kafka can prune, held by a tracked share-partition.
    assert whole.num_rows > 1
    assert any(r["prunable"] and r["held_by_group_id"] for r in whole.to_pylist())
    assert any(whole.column("records_before_cutoff").to_pylist())
    assert rows(sample.audits.pruning_cutoff) == rows(whole)

    older, newer = _cut(sample.positions, ["source_partition"], seed)
    # Only the stored table's extents carry on: its cut-offs are computed again.
    stored = pruning_arrow.pruning_cutoff(placements, older)
    found = pruning_arrow.carried_pruning_cutoff(
        placements, stored, newer, gap_ranges(sample.positions)
    )
    assert rows(found) == rows(whole)
