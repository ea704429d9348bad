"""Where a run's per-key work runs: on the driver, or in Spark's tasks. The same functions
either way.

A step is a pure Arrow function over rows that hold every row of each key they hold (all of
a share-partition's records, all of a state-topic partition's positions): it returns the
rows of a result, of one or more keys. On the driver a step is called on the whole table.
In Spark the rows are repartitioned by the key and each task calls the step on the rows of
its partition (`mapInArrow`, on classic and Connect sessions alike); the steps' results are
small (a row per range, segment or state-topic partition, not per record), so each task
sends them back as Arrow IPC, and they are put together on the driver. A step's rows are
then the same whichever place ran it, but for their order.

Where a run works (`Place`) is decided once, from what it reads (`place_for`), and recorded
in its summary.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Final, Literal, TypeAlias

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

#: Where a run's per-key work runs.
Place: TypeAlias = Literal["driver", "spark"]
#: Rows on the driver (Arrow) or in Spark (a DataFrame).
Frame: TypeAlias = "DataFrame | pa.Table"
#: A pure function over rows holding whole keys.
Step: TypeAlias = Callable[[pa.Table], pa.Table]

#: Rows read from the exports up to which a run works on the driver: its tables then fit in
#: the driver's memory, and each Spark job over them costs more to plan and start than to
#: run.
DRIVER_ROWS: Final = 1_000_000
_RESULTS: Final = "step string, rows binary"


def arrow_frame(spark: SparkSession, table: pa.Table) -> DataFrame:
    """A DataFrame of the Arrow `table` (a local relation: queries over it plan on the
    driver, and a filter or projection of it runs no Spark job). Its chunks are combined
    first: PySpark 4.2.0's `createDataFrame` of an Arrow table drops every row after two
    consecutive empty record batches (batches of 0, 0 and 3 rows gave no row), and
    concatenated, filtered or partition-read tables have such batches. An empty table is
    given its schema (Spark Connect cannot infer one from no rows)."""
    if table.num_rows == 0:
        from pyspark.sql.pandas.types import from_arrow_schema

        return spark.createDataFrame([], from_arrow_schema(table.schema))
    return spark.createDataFrame(table.combine_chunks())


def place_for(rows_read: int | None) -> Place:
    """Where a run that read `rows_read` rows (None: not counted) works."""
    return "driver" if rows_read is not None and rows_read <= DRIVER_ROWS else "spark"


def arrow_of(frame: Frame, columns: Sequence[str] | None = None) -> pa.Table:
    """`frame`'s rows (its `columns`, or all) on the driver."""
    if isinstance(frame, pa.Table):
        return frame.select(list(columns)) if columns is not None else frame
    return (frame.select(*columns) if columns is not None else frame).toArrow()


def by_key(
    frame: Frame, key: Sequence[str] | None, steps: Mapping[str, Step], place: Place
) -> dict[str, pa.Table]:
    """Each of `steps` over `frame`'s rows, every row of a `key` given to the same call (no
    key: any rows together), its results on the driver: step name -> its rows."""
    if isinstance(frame, pa.Table) or place == "driver":
        table = arrow_of(frame)
        return {name: step(table) for name, step in steps.items()}
    parts = frame.repartition(*key) if key else frame
    sent = parts.mapInArrow(functools.partial(_run_steps, dict(steps)), _RESULTS).toArrow()
    pieces: dict[str, list[pa.Table]] = {name: [] for name in steps}
    for name, blob in zip(
        sent.column("step").to_pylist(), sent.column("rows").to_pylist(), strict=True
    ):
        pieces[name].append(pa.ipc.open_stream(blob).read_all())
    out: dict[str, pa.Table] = {}
    empty: pa.Table | None = None
    for name, step in steps.items():
        if not pieces[name]:  # no task had rows: the step's result over none
            empty = empty if empty is not None else frame.limit(0).toArrow()
            out[name] = step(empty)
        else:
            out[name] = pa.concat_tables(pieces[name], promote_options="permissive")
    return out


def _run_steps(
    steps: dict[str, Step], batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """In a task: each step over the partition's rows, each result as one Arrow IPC blob."""
    read = [batch for batch in batches if batch.num_rows]
    if not read:
        return
    table = pa.Table.from_batches(read)
    for name, step in steps.items():
        rows = step(table)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, rows.schema) as writer:
            writer.write_table(rows)
        yield pa.record_batch(
            [pa.array([name], pa.string()), pa.array([sink.getvalue().to_pybytes()], pa.binary())],
            names=["step", "rows"],
        )
