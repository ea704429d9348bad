"""`CacheScope` frees what it kept: persisted frames and the blocks of local checkpoints."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from py4j.java_gateway import JavaObject
from pyspark import StorageLevel
from pyspark.sql import SparkSession

from sharestate.job.cache import CacheScope

pytestmark = pytest.mark.spark


def _persistent_rdds(spark: SparkSession) -> set[int]:
    return {int(key) for key in spark.sparkContext._jsc.getPersistentRDDs().keySet()}


def test_release_frees_persisted_frames_and_checkpoint_blocks(spark: SparkSession) -> None:
    before = _persistent_rdds(spark)
    with CacheScope() as cache:
        kept = cache.keep(spark.range(100), StorageLevel.MEMORY_AND_DISK)
        assert kept.count() == 100
        checkpointed = cache.checkpoint(spark.range(50).selectExpr("id * 2 AS doubled"))
        assert checkpointed.count() == 50
        assert len(_persistent_rdds(spark) - before) >= 2
    assert _persistent_rdds(spark) - before == set()


def test_release_rebuilds_no_kept_plan_over_a_table_changed_since(
    spark: SparkSession, tmp_path: Path
) -> None:
    # A kept result computed from an earlier one and never read itself: Spark rebuilds its
    # plan when the earlier one is unpersisted first, and the rebuild fails on a table whose
    # schema the run changed since (DELTA_SCHEMA_CHANGE_SINCE_ANALYSIS).
    table = str(tmp_path / "table")
    spark.createDataFrame([(1, "a"), (2, "b")], "k int, v string").write.format("delta").save(table)
    cache = CacheScope()
    earlier = cache.keep(spark.read.format("delta").load(table), StorageLevel.MEMORY_AND_DISK)
    assert earlier.count() == 2
    cache.keep(earlier.groupBy("v").count(), StorageLevel.MEMORY_AND_DISK)
    changed = spark.createDataFrame([(1.0,)], "x double")
    changed.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(table)
    cache.release()
    assert spark._jsparkSession.sharedState().cacheManager().isEmpty()


def _java_objects(target_id: str) -> list[JavaObject]:
    return [o for o in gc.get_objects() if isinstance(o, JavaObject) and o._target_id == target_id]


def test_release_lets_the_jvm_free_objects_python_holds_only_in_cycles(
    spark: SparkSession,
) -> None:
    cache = CacheScope()
    kept = cache.checkpoint(spark.range(10).selectExpr("id + 1 AS n"))
    plan = kept._jdf.queryExecution()
    assert plan.toString()  # a method called: py4j's JavaObject now keeps a JavaMember
    target = plan._target_id
    # A run's objects outlive Python's young generations (as they do over a whole run).
    gc.collect()
    del kept, plan
    assert _java_objects(target), "the cycle outlives its last reference until collected"
    cache.release()
    # Collected: py4j's finalizer told the JVM to drop the object, and its plan with it.
    assert _java_objects(target) == []
