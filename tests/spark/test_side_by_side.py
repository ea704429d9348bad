"""Steps run side by side (`sharestate.job.side_by_side`): at once, results in order, every
step ended before a failure is raised, the caller's Spark local properties kept."""

from __future__ import annotations

import threading
import time

import pytest
from pyspark.sql import SparkSession

from sharestate.job.side_by_side import run_side_by_side


def test_steps_run_at_once_and_return_in_their_order() -> None:
    both_waiting = threading.Barrier(2, timeout=30)  # broken unless both steps run at once

    def step(value: str) -> str:
        both_waiting.wait()
        return value

    assert run_side_by_side([lambda: step("first"), lambda: step("second")]) == [
        "first",
        "second",
    ]


def test_a_failure_is_raised_once_every_step_ended() -> None:
    ended: list[str] = []

    def slow() -> None:
        time.sleep(0.5)
        ended.append("slow")

    def fails(message: str) -> None:
        raise ValueError(message)

    with pytest.raises(ValueError, match="first failure"):
        run_side_by_side([lambda: fails("first failure"), slow, lambda: fails("second failure")])
    assert ended == ["slow"]


@pytest.mark.spark
def test_steps_keep_the_callers_spark_local_properties(spark: SparkSession) -> None:
    context = spark.sparkContext
    context.setLocalProperty("spark.scheduler.pool", "a-notebooks-pool")
    try:
        seen = run_side_by_side([lambda: context.getLocalProperty("spark.scheduler.pool")] * 2)
    finally:
        context.setLocalProperty("spark.scheduler.pool", None)  # type: ignore[arg-type]
    assert seen == ["a-notebooks-pool"] * 2
