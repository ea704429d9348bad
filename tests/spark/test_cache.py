"""`CacheScope` frees what it kept: persisted frames and the blocks of local checkpoints."""

from __future__ import annotations

from pathlib import Path

import pytest
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
