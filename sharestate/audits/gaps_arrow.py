"""The gaps of the `__share_group_state` export after an incremental run, in Arrow on the
driver: from the stored gaps, the exported extents before the run and the run's new
positions, never the stored positions. `findings.records.gap_ranges` finds them from every
position, as a full run has them. Pure pyarrow and numpy: no Spark."""

from __future__ import annotations

from typing import Final

import numpy as np
import pyarrow as pa

#: The gaps: per partition, the first and last missing offset (`gap_ranges`' columns).
GAPS_SCHEMA: Final = pa.schema(
    [
        pa.field("source_partition", pa.int32()),
        pa.field("_from", pa.int64()),
        pa.field("_to", pa.int64()),
    ]
)
#: Per partition, its exported positions' count and first and last offset.
EXTENTS_SCHEMA: Final = pa.schema(
    [
        pa.field("source_partition", pa.int32()),
        pa.field("rows", pa.int64()),
        pa.field("first_offset", pa.int64()),
        pa.field("last_offset", pa.int64()),
    ]
)

# Where a new position lies, as a number: below the stored extent, above it (or in a
# partition with none), in the stored gap numbered zone - _IN_GAP, or nowhere new.
_BELOW: Final = 0
_ABOVE: Final = 1
_IN_GAP: Final = 2
_NOWHERE: Final = -1


def position_extents(positions: pa.Table) -> pa.Table:
    """Per partition of `positions` (source_partition, source_offset): how many, the first
    and the last (what the checkpoint's extents and `consumer_offsets_gap` read)."""
    grouped = positions.group_by(["source_partition"], use_threads=False).aggregate(
        [("source_offset", "count"), ("source_offset", "min"), ("source_offset", "max")]
    )
    return pa.table(
        {
            "source_partition": grouped.column("source_partition"),
            "rows": grouped.column("source_offset_count"),
            "first_offset": grouped.column("source_offset_min"),
            "last_offset": grouped.column("source_offset_max"),
        }
    ).cast(EXTENTS_SCHEMA)


def gaps_after(stored_gaps: pa.Table, positions: pa.Table, extents: pa.Table) -> pa.Table:
    """The gaps once `positions` (source_partition, source_offset: a run's new and
    backfilled exported positions) join the stored ones, given by their `extents`
    (`EXTENTS_SCHEMA`) and `stored_gaps` (`GAPS_SCHEMA`).

    Every offset missing from a partition's widened extent lies in one zone: a stored gap
    (less what was backfilled into it), below the stored first offset, or above the stored
    last one. Each zone's gaps lie between its new positions and its borders (the stored
    offsets next to it), so no stored position is needed."""
    position_partitions = _column(positions, "source_partition")
    offsets = _column(positions, "source_offset")
    gap_partitions = _column(stored_gaps, "source_partition")
    extent_partitions = _column(extents, "source_partition")
    extent_at = {int(p): i for i, p in enumerate(extent_partitions)}
    firsts = _column(extents, "first_offset")
    lasts = _column(extents, "last_offset")
    order = np.argsort(position_partitions, kind="stable")
    sorted_partitions = position_partitions[order]
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for partition in np.unique(np.concatenate([position_partitions, gap_partitions])):
        lo, hi = (
            np.searchsorted(sorted_partitions, partition, side="left"),
            np.searchsorted(sorted_partitions, partition, side="right"),
        )
        mine = gap_partitions == partition
        gap_order = np.argsort(_column(stored_gaps, "_from")[mine], kind="stable")
        gap_from = _column(stored_gaps, "_from")[mine][gap_order]
        gap_to = _column(stored_gaps, "_to")[mine][gap_order]
        at = extent_at.get(int(partition))
        extent = None if at is None else (int(firsts[at]), int(lasts[at]))
        zones, points = _zones(offsets[order[lo:hi]], extent, gap_from, gap_to)
        starts, ends = _gaps_in_zones(zones, points)
        found.append((np.full(len(starts), partition), starts, ends))
    if not found:
        return GAPS_SCHEMA.empty_table()
    partitions, starts, ends = (np.concatenate(parts) for parts in zip(*found, strict=True))
    return pa.table({"source_partition": partitions, "_from": starts, "_to": ends}).cast(
        GAPS_SCHEMA
    )


def _column(table: pa.Table, name: str) -> np.ndarray:
    return np.asarray(table.column(name).to_numpy(), dtype=np.int64)


def _zones(
    offsets: np.ndarray,
    extent: tuple[int, int] | None,
    gap_from: np.ndarray,
    gap_to: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """One partition's new offsets and its zones' borders, each with its zone; new offsets
    in no zone (inside the extent, in no gap) are left out."""
    zones = np.full(len(offsets), _ABOVE if extent is None else _NOWHERE, dtype=np.int64)
    border_zones = [_IN_GAP + np.arange(len(gap_from))] * 2
    border_offsets = [gap_from - 1, gap_to + 1]
    if extent is not None:
        first, last = extent
        if len(gap_from):
            gap = np.searchsorted(gap_from, offsets, side="right") - 1
            inside = (gap >= 0) & (offsets <= gap_to[np.maximum(gap, 0)])
            zones[inside] = _IN_GAP + gap[inside]
        zones[offsets < first] = _BELOW
        zones[offsets > last] = _ABOVE
        border_zones += [np.array([_BELOW, _ABOVE])]
        border_offsets += [np.array([first, last])]
    placed = zones != _NOWHERE
    return (
        np.concatenate([zones[placed], *border_zones]),
        np.concatenate([offsets[placed], *border_offsets]),
    )


def _gaps_in_zones(zones: np.ndarray, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The runs of missing offsets between consecutive points of one zone."""
    order = np.lexsort((points, zones))
    zones, points = zones[order], points[order]
    apart = (zones[1:] == zones[:-1]) & (points[1:] - points[:-1] > 1)
    return points[:-1][apart] + 1, points[1:][apart] - 1
