"""`CacheScope` frees what it kept: persisted frames and the blocks of local checkpoints."""

from __future__ import annotations

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
