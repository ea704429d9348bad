"""A small increment read, decoded and replayed on the driver.

An incremental run's new rows are few (a scheduled run's thousands), and as Spark jobs each
step over them costs more to plan and start than it computes. When what the inputs' streams
delivered is at most `DRIVER_INCREMENT_ROWS` rows, the run takes it to the driver: the batch
files are read there (with pyarrow where the output is local, else with one Spark query
each), placed against the checkpoint (`arrivals.place_rows`), decoded by the pure decoder
(`sharestate.decode.tables`) and replayed by the pure fold (`sharestate.replay.arrow`),
the same code Spark runs in its tasks. The tables' steps then read local relations of the
results. A bigger increment keeps Spark's distributed steps (`incremental.read_new_inputs`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from sharestate.audits.findings.registry import Source
from sharestate.decode import spark as spark_decode
from sharestate.decode.tables import (
    DecodedTable,
    decode_consumer_offsets_table,
    decode_share_state_table,
)
from sharestate.io.checkpoint import Checkpoint
from sharestate.io.files import local_path
from sharestate.io.store import TableStore, arrow_frame, rows_on_driver
from sharestate.job.arrivals import PlacedRows, place_rows
from sharestate.job.config import JobConfig

if TYPE_CHECKING:
    from sharestate.job.incremental import Delivered

SHARE_STATE: Final = Source.SHARE_STATE.value
CONSUMER_OFFSETS: Final = Source.CONSUMER_OFFSETS.value
#: An increment of at most this many delivered rows (of all inputs) is read, decoded and
#: replayed on the driver.
DRIVER_INCREMENT_ROWS: Final = 100_000
#: The Kafka-record columns the streams deliver, as Arrow.
KAFKA_ROW_SCHEMA: Final = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    ]
)


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
    store: TableStore, delivered: Delivered, limit: int = DRIVER_INCREMENT_ROWS
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

    def spark_decoded(self, spark: SparkSession) -> spark_decode.Decoded:
        """The decoded rows as `Decoded` (local relations)."""
        records = arrow_frame(spark, self.decoded.records)
        return spark_decode.Decoded(records, arrow_frame(spark, self.decoded.quarantine), records)


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


def read_on_driver(
    config: JobConfig,
    store: TableStore,
    checkpoint: Checkpoint,
    tables: dict[str, pa.Table | None],
    gaps: pa.Table,
    read_whole: frozenset[str],
) -> dict[str, ReadOnDriver]:
    """Per input: its delivered rows (`delivered_tables`) placed against the checkpoint
    and decoded. `gaps`: the known `__share_group_state` gaps (source_partition, _from, _to)."""
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
