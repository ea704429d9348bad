"""A sample export computed by the full pipeline: a realistic input for the tests of the
audit tables' incremental merges."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

from sharestate.job.config import JobConfig
from sharestate.job.pipeline import Results, compute
from sharestate.sample.exports import SampleSpec, write_sample


@contextmanager
def computed_sample(spark: SparkSession, root: Path, records: int = 3000) -> Iterator[Results]:
    """A sample export of `records` written under `root` and computed; its cached results
    released on exit."""
    write_sample(root, SampleSpec(records=records))
    results = compute(spark, JobConfig(share_state=str(root / "share_state")))
    try:
        yield results
    finally:
        results.unpersist()
