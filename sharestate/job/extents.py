"""The exported extents a run's checkpoint carries: per input and `__share_group_state`
partition, the first and last exported offset the run processed and how many rows
(`sharestate.io.checkpoint.Extent`), found on the driver where the rows are there."""

from __future__ import annotations

import pyarrow as pa

from sharestate.audits import AuditTables, gaps_arrow
from sharestate.io.checkpoint import Extent


def full_run_extents(audits: AuditTables) -> dict[str, dict[int, Extent]]:
    """Per input and partition: the exported positions a full run processed. Those of
    `__share_group_state` are the pruning cut-off's exported counts and offsets (computed
    from the same positions), those of `__consumer_offsets` the extents its findings read."""
    extents = {"share_state": _cutoff_extents(audits.pruning_cutoff)}
    if audits.consumer_offsets_extents is not None:
        extents["consumer_offsets"] = _extents(audits.consumer_offsets_extents)
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


def arrow_extents(positions: pa.Table) -> dict[int, Extent]:
    """Per partition of `positions` on the driver: the extent of its positions."""
    return _extents(gaps_arrow.position_extents(positions))


def _extents(extents: pa.Table) -> dict[int, Extent]:
    """`position_extents` rows as the checkpoint's extents."""
    return {
        int(row["source_partition"]): Extent(
            int(row["first_offset"]), int(row["last_offset"]), int(row["rows"])
        )
        for row in extents.to_pylist()
    }
