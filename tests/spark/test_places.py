"""Where a run works (`sharestate.places`): the same steps on the driver and in Spark's tasks,
each call given every row of the keys it holds."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import SparkSession

from sharestate.places import DRIVER_ROWS, Step, arrow_frame, by_key, place_for


def _steps() -> dict[str, Step]:
    """Steps defined here, not at the module's top level: Spark's Python workers get them
    by value (they cannot import a test module)."""

    def per_key_totals(rows: pa.Table) -> pa.Table:
        """Right only when it sees every row of a key: its sum and row count."""
        return rows.group_by(["key"]).aggregate([("value", "sum"), ([], "count_all")])

    def keys_seen(rows: pa.Table) -> pa.Table:
        return pa.table({"keys": [pc.count_distinct(rows.column("key")).as_py()]})

    return {"totals": per_key_totals, "keys": keys_seen}


def test_a_run_works_on_the_driver_up_to_its_bound() -> None:
    assert place_for(DRIVER_ROWS) == "driver"
    assert place_for(DRIVER_ROWS + 1) == "spark"
    assert place_for(None) == "spark"  # an export not counted may be any size


@pytest.mark.spark
@pytest.mark.connect  # the steps travel to a Connect server's workers too
def test_spark_tasks_give_each_step_the_rows_of_whole_keys(spark: SparkSession) -> None:
    rows = pa.table({"key": [f"k{n % 37}" for n in range(5_000)], "value": list(range(5_000))})
    # Many partitions, rows of a key spread over all of them: only the repartition by key
    # gives a step every row of a key.
    frame = arrow_frame(spark, rows).repartition(8)
    steps = _steps()
    on_driver = by_key(rows, ["key"], steps, "driver")
    in_spark = by_key(frame, ["key"], steps, "spark")
    assert in_spark["totals"].sort_by("key").to_pylist() == (
        on_driver["totals"].sort_by("key").to_pylist()
    )
    assert on_driver["keys"].column("keys").to_pylist() == [37]
    # Each task saw some keys, together all of them, none twice.
    assert sum(in_spark["keys"].column("keys").to_pylist()) == 37


@pytest.mark.spark
def test_a_step_over_no_rows_gives_its_empty_result(spark: SparkSession) -> None:
    empty = arrow_frame(
        spark, pa.table({"key": pa.array([], pa.string()), "value": pa.array([], pa.int64())})
    )
    totals = by_key(empty, ["key"], _steps(), "spark")["totals"]
    assert totals.num_rows == 0
    assert totals.column_names == ["key", "value_sum", "count_all"]
