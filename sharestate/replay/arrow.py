"""The replay over an Arrow table, on one machine: what `sharestate.replay.spark.replay` does
with a shuffle and `mapInArrow`, as one sort and one pass of the same fold
(`sharestate.replay.fold.fold_batches`), for inputs small enough for one process (an
incremental run's few thousand new records: `sharestate.job.driver_increment`). It gives
the same history and state rows as the Python fold in Spark."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from sharestate.arrow_keys import with_keys
from sharestate.decode.columns import KEY, LOG_ORDER, STATE_BATCHES_TYPE
from sharestate.replay.combiner import LATEST
from sharestate.replay.fold import (
    COUNT_COLUMNS,
    FOLD_INPUT_FIELDS,
    HISTORY_FIELDS,
    LATEST_TIMESTAMP,
    SEED,
    SEED_DELETED,
    SINCE,
    fold_batches,
)
from sharestate.replay.state import STATE_FIELDS

_FOLD_INPUT_SCHEMA: Final = pa.schema(FOLD_INPUT_FIELDS)
_HISTORY_SCHEMA: Final = pa.schema(HISTORY_FIELDS)
_SEED_COLUMNS: Final = ("seed_segment", "seed_last_snapshot_offset", "seed_since")
#: The columns of a share-partition's state row, in the order the Spark replay gives them.
STATE_COLUMNS: Final = (
    *KEY,
    "deleted",
    *STATE_FIELDS,
    "effective_start_offset",
    "state_batches",
    *COUNT_COLUMNS,
    "last_source_partition",
    "last_source_offset",
    "last_snapshot_offset",
    "replay_error",
    "segment",
    SINCE,
    LATEST_TIMESTAMP,
)
#: The fold's columns that the history does not keep.
_NOT_HISTORY: Final = ("state_batches", "last_of_share_partition", SINCE, LATEST_TIMESTAMP)


@dataclass(frozen=True)
class ReplayedTable:
    """`share_partition_history` and `share_partition_state` rows (of the share-partitions
    with records), as Arrow."""

    history: pa.Table
    state: pa.Table


def _fold_input(records: pa.Table) -> pa.Table:
    """The records as the fold takes them (no seed columns set)."""
    columns = {
        f.name: records.column(f.name).cast(f.type)
        if f.name in records.column_names and f.name not in _SEED_COLUMNS
        else pa.nulls(records.num_rows, f.type)
        for f in FOLD_INPUT_FIELDS
    }
    return pa.table(columns, schema=_FOLD_INPUT_SCHEMA)


def _seeds(prior_state: pa.Table, records: pa.Table) -> pa.Table:
    """`sharestate.replay.spark._seeds`: the stored state of each share-partition with
    records, as a row placed at its stored last record (sorting before the new ones)."""
    stored = with_keys(prior_state, records.select(list(KEY)), KEY)
    rows = stored.num_rows
    columns = set(stored.column_names)

    def column(name: str, field: pa.Field) -> pa.Array | pa.ChunkedArray:
        if name not in columns:  # a state written before the column existed
            return pa.nulls(rows, field.type)
        return stored.column(name).cast(field.type)

    fields = {f.name: f for f in FOLD_INPUT_FIELDS}
    seed = {
        **{name: column(name, fields[name]) for name in KEY},
        "source_partition": column("last_source_partition", fields["source_partition"]),
        "source_offset": column("last_source_offset", fields["source_offset"]),
        "source_timestamp": column(LATEST_TIMESTAMP, fields["source_timestamp"]),
        "record_type": pc.if_else(
            pc.fill_null(stored.column("deleted"), False), SEED_DELETED, SEED
        ),
        **{name: column(name, fields[name]) for name in STATE_FIELDS},
        "state_batches": column("state_batches", fields["state_batches"]),
        "seed_last_snapshot_offset": column(
            "last_snapshot_offset", fields["seed_last_snapshot_offset"]
        ),
        "seed_since": column(SINCE, fields["seed_since"]),
        "seed_segment": column("segment", fields["seed_segment"]),
    }
    return pa.table({f.name: seed[f.name] for f in FOLD_INPUT_FIELDS}, schema=_FOLD_INPUT_SCHEMA)


def replay_table(
    records: pa.Table, kafka: tuple[int, int] = LATEST, prior_state: pa.Table | None = None
) -> ReplayedTable:
    """`sharestate.replay.spark.replay` of decoded `records` (at least the fold's input
    columns), on this machine: with `prior_state` (`share_partition_state` rows whose
    records all come before `records`), share-partitions go on from their stored state."""
    inputs = _fold_input(records)
    if prior_state is not None:
        inputs = pa.concat_tables([inputs, _seeds(prior_state, records)])
    ordered = inputs.sort_by([(name, "ascending") for name in (*KEY, *LOG_ORDER)])
    folded = pa.Table.from_batches(
        list(fold_batches(iter(ordered.combine_chunks().to_batches()), kafka)),
        schema=_HISTORY_SCHEMA,
    )
    last = folded.filter(pc.fill_null(folded.column("last_of_share_partition"), False))
    renamed = {
        "last_source_partition": "source_partition",
        "last_source_offset": "source_offset",
    }
    empty_batches = pa.array([[]] * last.num_rows, STATE_BATCHES_TYPE)
    state = pa.table(
        {
            name: pc.coalesce(last.column(name), empty_batches)
            if name == "state_batches"
            else last.column(renamed.get(name, name))
            for name in STATE_COLUMNS
        }
    )
    seeds = pc.is_in(folded.column("record_type"), pa.array([SEED, SEED_DELETED]))
    history = folded.filter(pc.invert(pc.fill_null(seeds, False))).drop_columns(list(_NOT_HISTORY))
    return ReplayedTable(history, state)
