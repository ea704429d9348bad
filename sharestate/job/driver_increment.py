"""An increment read, decoded and replayed on the driver.

An incremental run's new rows are few (a scheduled run's thousands), and as Spark jobs each
step over them costs more to plan and start than it computes. What the inputs' streams
delivered (at most `incremental.LARGE_INCREMENT_ROWS` rows: a bigger increment is a full
run) is taken to the driver: the batch files are read there (with pyarrow where the output
is local, else with one Spark query each), placed against the checkpoint
(`arrivals.place_rows`), decoded by the pure decoder (`sharestate.decode.tables`) and
replayed by the pure fold (`sharestate.replay.arrow`), the same code Spark runs in a full
run's tasks. The tables' steps then read the results as Arrow.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sharestate.audits.findings.records import exported_positions
from sharestate.audits.findings.registry import Source
from sharestate.decode.columns import LOG_ORDER
from sharestate.decode.tables import (
    DecodedTable,
    decode_consumer_offsets_table,
    decode_share_state_table,
)
from sharestate.io.checkpoint import Checkpoint
from sharestate.io.exports import REQUIRED_COLUMNS
from sharestate.io.files import local_path
from sharestate.io.store import TableStore, rows_on_driver
from sharestate.job.arrivals import PlacedRows, place_rows
from sharestate.job.config import JobConfig
from sharestate.job.increment import DriverRows, Increment, replay_keys, split_keys
from sharestate.job.increment_audits import known_gaps
from sharestate.job.new_rows import Delivered, NewInputs
from sharestate.sample.exports import KAFKA_EXPORT_SCHEMA

SHARE_STATE: Final = Source.SHARE_STATE.value
CONSUMER_OFFSETS: Final = Source.CONSUMER_OFFSETS.value
#: The Kafka-record columns the streams deliver (`REQUIRED_COLUMNS`), as Arrow.
KAFKA_ROW_SCHEMA: Final = pa.schema([KAFKA_EXPORT_SCHEMA.field(name) for name in REQUIRED_COLUMNS])


def _kafka_rows(table: pa.Table) -> pa.Table:
    """`table` in KAFKA_ROW_SCHEMA. A timestamp without a zone is one Spark wrote as INT96
    (an instant in UTC)."""
    timestamp = table.column("timestamp")
    if pa.types.is_timestamp(timestamp.type) and timestamp.type.tz is None:
        timestamp = timestamp.cast(pa.timestamp("us")).cast(pa.timestamp("us", tz="UTC"))
    table = table.set_column(table.schema.get_field_index("timestamp"), "timestamp", timestamp)
    return table.select(KAFKA_ROW_SCHEMA.names).cast(KAFKA_ROW_SCHEMA)


def _batch_files(folders: tuple[str, ...]) -> list[str]:
    """The Parquet files of the local batch folders (not Spark's `_SUCCESS` and `.crc`)."""
    files = []
    for folder in folders:
        path = local_path(folder)
        names = sorted(n for n in os.listdir(path) if not n.startswith(("_", ".")))
        files += [os.path.join(path, n) for n in names if n.endswith(".parquet")]
    return files


def delivered_tables(
    store: TableStore, delivered: Delivered, limit: int
) -> dict[str, pa.Table | None] | None:
    """What each input's stream delivered, on the driver, if it is at most `limit` rows in
    all (else None, having read no more than the files' footers or `limit` + 1 rows). The
    batches are under the output: where it is local they are read with pyarrow, elsewhere
    through Spark."""
    tables: dict[str, pa.Table | None] = {}
    left = limit
    for source, rows in delivered.rows.items():
        folders = delivered.folders.get(source, ())
        if rows is None:
            tables[source] = None
            continue
        if folders and store.local:
            files = _batch_files(folders)
            count = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
            if count > left:
                return None
            read = [pq.read_table(f, coerce_int96_timestamp_unit="us") for f in files]
            table = pa.concat_tables(read, promote_options="permissive") if read else None
        else:
            table = rows_on_driver(rows, left)
            if table is None:
                return None
        if table is None or table.num_rows == 0:
            tables[source] = _kafka_rows(KAFKA_ROW_SCHEMA.empty_table())
            continue
        left -= table.num_rows
        tables[source] = _kafka_rows(table)
    return tables


@dataclass(frozen=True)
class ReadOnDriver:
    """One input's new rows placed and decoded on the driver."""

    placed: PlacedRows
    decoded: DecodedTable


def _stored_group_positions(store: TableStore) -> Callable[[pa.Table], pa.Table]:
    """Of (partition, offset) positions: those the stored tables hold a `__consumer_offsets`
    row of (decoded or quarantined)."""

    def held(positions: pa.Table) -> pa.Table:
        keys = positions.rename_columns(["source_partition", "source_offset"])
        on = ["source_partition", "source_offset"]
        records = store.read_arrow_joined("share_group_records", keys, on)
        quarantined = store.read_arrow_joined("quarantine", keys, on)
        quarantined = quarantined.filter(pc.equal(quarantined.column("source"), CONSUMER_OFFSETS))
        found = [t.select(on).cast(keys.schema) for t in (records, quarantined)]
        return pa.concat_tables(found).rename_columns(["partition", "offset"])

    return held


def _place_and_decode(
    config: JobConfig,
    store: TableStore,
    checkpoint: Checkpoint,
    tables: dict[str, pa.Table | None],
    read_whole: frozenset[str],
) -> dict[str, ReadOnDriver]:
    """Per input: its delivered rows (`delivered_tables`) placed against the checkpoint and
    decoded (the `__share_group_state` rows against the gaps the stored findings list)."""
    gaps = known_gaps(store.read_arrow("findings"))
    out: dict[str, ReadOnDriver] = {}
    for source, rows in tables.items():
        if rows is None:
            rows = KAFKA_ROW_SCHEMA.empty_table()
        extents = checkpoint.extents.get(source, {})
        if source == SHARE_STATE:
            placed = place_rows(rows, extents, gaps=gaps)
            decoded = decode_share_state_table(placed.rows, config.kafka_version)
        else:
            # An export read whole takes its rows inside the extents as processed.
            stored = None if source in read_whole else _stored_group_positions(store)
            placed = place_rows(rows, extents, stored=stored)
            decoded = decode_consumer_offsets_table(placed.rows, config.kafka_version)
        out[source] = ReadOnDriver(placed, decoded)
    return out


def read_on_driver(
    config: JobConfig,
    store: TableStore,
    checkpoint: Checkpoint,
    delivered: Delivered,
    tables: dict[str, pa.Table | None],
) -> tuple[NewInputs, DriverRows]:
    """The delivered rows (`delivered_tables`) placed and decoded on the driver: what each
    input brought, counted (`NewInputs`), and the rows as Arrow."""
    read = _place_and_decode(config, store, checkpoint, tables, delivered.read_whole)
    paths = {SHARE_STATE: config.share_state, CONSUMER_OFFSETS: config.consumer_offsets or ""}
    arrivals = {
        source: each.placed.arrivals(
            delivered.formats[source], paths[source], source not in delivered.read_whole
        )
        for source, each in read.items()
    }
    groups = read.get(CONSUMER_OFFSETS)
    new = NewInputs(arrivals[SHARE_STATE], arrivals.get(CONSUMER_OFFSETS))
    quarantined = [each.decoded.quarantine for each in read.values()]
    rows = DriverRows(
        records=read[SHARE_STATE].decoded.records,
        group_records=groups.decoded.records if groups is not None else None,
        quarantine=pa.concat_tables([q.cast(quarantined[0].schema) for q in quarantined]),
        backfilled=_backfilled(read),
    )
    return new, rows


def _backfilled(read: dict[str, ReadOnDriver]) -> pa.Table:
    """source, source_partition, source_offset of the rows that arrived below the
    checkpoint."""
    return pa.concat_tables(
        [
            pa.table(
                {
                    "source": pa.array(
                        [source] * each.placed.backfill_positions.num_rows, pa.string()
                    ),
                    "source_partition": each.placed.backfill_positions.column("partition"),
                    "source_offset": each.placed.backfill_positions.column("offset"),
                }
            )
            for source, each in read.items()
        ]
    )


def replay_new_rows(increment: Increment) -> None:
    """The touched keys split and replayed on the driver (`split_keys`, `replay_keys`),
    from the new rows as Arrow (`Increment.rows`) and the whole stored state (the state-sized
    findings read the whole state after the run)."""
    rows = increment.rows
    backfilled = rows.backfilled.filter(pc.equal(rows.backfilled.column("source"), SHARE_STATE))
    split_keys(increment, backfilled.select(list(LOG_ORDER)))
    replay_keys(increment, increment.store.read_arrow("share_partition_state"))
    increment.share_state_positions = exported_positions(rows.records, rows.quarantine, SHARE_STATE)
