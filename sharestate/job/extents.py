"""The exported extents a run's checkpoint carries: per input and `__share_group_state`
partition, the first and last exported offset the run processed and how many rows
(`sharestate.io.checkpoint.Extent`), found on the driver where the rows are there."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sharestate.audits import exported_positions, gaps_arrow
from sharestate.io.checkpoint import Extent
from sharestate.job.pipeline import Results


def full_run_extents(
    results: Results, on_driver: Mapping[str, pa.Table]
) -> dict[str, dict[int, Extent]]:
    """Per input and partition: the exported positions the run processed. Those of
    `__share_group_state` are the pruning cut-off's exported counts and offsets (computed
    from the same positions) when that table came to the driver (`on_driver`), and those of
    `__consumer_offsets` are found there when its records and the quarantine did."""
    extents = {}
    if "pruning_cutoff" in on_driver:
        extents["share_state"] = _cutoff_extents(on_driver["pruning_cutoff"])
    else:
        extents["share_state"] = position_extents_of(
            results.share_state_records, results.quarantine, "share_state"
        )
    if results.share_group_records is not None:
        if "share_group_records" in on_driver and "quarantine" in on_driver:
            extents["consumer_offsets"] = arrow_extents(
                _arrow_positions(
                    on_driver["share_group_records"], on_driver["quarantine"], "consumer_offsets"
                )
            )
        else:
            extents["consumer_offsets"] = position_extents_of(
                results.share_group_records, results.quarantine, "consumer_offsets"
            )
    return extents


def _cutoff_extents(pruning: pa.Table) -> dict[int, Extent]:
    """The extents of `__share_group_state` from `pruning_cutoff`'s rows on the driver."""
    return {
        int(row["source_partition"]): Extent(
            int(row["first_exported_offset"]),
            int(row["last_exported_offset"]),
            int(row["exported_records"]),
        )
        for row in pruning.to_pylist()
        if row["exported_records"]
    }


def _arrow_positions(records: pa.Table, quarantine: pa.Table, source: str) -> pa.Table:
    """`exported_positions` of tables on the driver: the records' positions and those of
    the quarantined rows of `source` (not of another topic)."""
    columns = ["source_partition", "source_offset"]
    kept = pc.and_(
        pc.equal(quarantine.column("source"), source),
        pc.not_equal(quarantine.column("reason_kind"), "wrong topic"),
    )
    quarantined = quarantine.filter(pc.fill_null(kept, False)).select(columns)
    return pa.concat_tables(
        [records.select(columns), quarantined.cast(records.select(columns).schema)]
    )


def position_extents_of(
    records: DataFrame, quarantine: DataFrame, source: str
) -> dict[int, Extent]:
    """Per partition of input `source`: the extent of its exported positions among
    `records` and `quarantine`."""
    # `gaps_arrow.position_extents` in Spark: the positions of a big export stay there.
    extents = (
        exported_positions(records, quarantine, source)
        .groupBy("source_partition")
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.min("source_offset").alias("first_offset"),
            F.max("source_offset").alias("last_offset"),
        )
    )
    return {
        int(row["source_partition"]): Extent(
            int(row["first_offset"]), int(row["last_offset"]), int(row["rows"])
        )
        for row in extents.collect()
    }


def arrow_extents(positions: pa.Table) -> dict[int, Extent]:
    """Per partition of `positions` on the driver: the extent of its positions."""
    return {
        int(row["source_partition"]): Extent(
            int(row["first_offset"]), int(row["last_offset"]), int(row["rows"])
        )
        for row in gaps_arrow.position_extents(positions).to_pylist()
    }
