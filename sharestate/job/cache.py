"""What a run keeps in Spark until it is done, in one place, and its release.

Caching is an accelerator: a session that refuses it (Databricks serverless refuses
`persist`, `cache` and checkpoints) gets the DataFrame back as it was, which Spark computes
again where it is read again, and the log says so once.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from types import TracebackType
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame

from sharestate import jvm
from sharestate.backend import backend, refused, say_once
from sharestate.io.files import first_line


class CacheScope:
    """The DataFrames a run persisted and the JVM passes' tees (`jvm.Tee`), held until
    `release()`: the job releases them when its tables are written, a notebook when it is
    done with `compute`'s results. As a context manager it releases on leaving."""

    def __init__(self) -> None:
        self._held: list[DataFrame | jvm.Tee | _CheckpointBlocks] = []

    def keep(self, df: DataFrame, level: StorageLevel) -> DataFrame:
        """Persist `df` at `level` until the release, and return it (as it was, where the
        session refuses to cache)."""
        try:
            persisted = df.persist(level)
        except Exception as err:
            if not refused(err):
                raise
            say_once(
                "persist",
                "the session refuses to cache results (%s): they are computed again where "
                "they are read again",
                first_line(err),
            )
            return df
        self._held.append(persisted)
        return persisted

    def checkpoint(
        self, df: DataFrame, instead: Callable[[], DataFrame] | None = None
    ) -> DataFrame:
        """`df` computed now and kept in Spark's block manager, with its lineage cut
        (`localCheckpoint`): for a small result that later plans read many times. Kept until
        the release. Where the session refuses checkpoints, `instead()` (the same rows read
        from where they were written), else `df` itself."""
        try:
            checkpointed = df.localCheckpoint(eager=True)
        except Exception as err:
            if not refused(err):
                raise
            say_once(
                "localCheckpoint",
                "the session refuses local checkpoints (%s): their results are computed "
                "again where they are read again, or read where they were written",
                first_line(err),
            )
            return instead() if instead is not None else df
        self._held.append(_CheckpointBlocks(checkpointed))
        return checkpointed

    def hold(self, tee: jvm.Tee | None) -> None:
        """Keep a JVM pass's hand-over (if there is one) until the release."""
        if tee is not None:
            self._held.append(tee)

    def release(self) -> None:
        """Unpersist everything kept, the latest kept first, then let the JVM free what
        Python no longer uses.

        A kept result is often computed from an earlier one; Spark rebuilds the plan of
        every cached result that contains one being unpersisted and has not been computed
        (evicted, or never read), and that rebuild analyses its tables again, which fails
        where the run changed a table's schema since. Latest first, no result kept here is
        left to be rebuilt.

        Every Java object Python has called a method on is in a reference cycle (py4j's
        `JavaObject` keeps its `JavaMember`s, which point back at it), so the JVM keeps it,
        a DataFrame's whole query plan included, until Python's cycle collector runs; a
        run's objects live long enough to reach the oldest generation, which Python collects
        rarely. Collected at each release, a session that runs the job again and again (a
        notebook, the tests) does not pile up the plans of every earlier run."""
        held, self._held = self._held, []
        for each in reversed(held):
            each.unpersist()
        del held
        gc.collect()

    def __enter__(self) -> CacheScope:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()


class _CheckpointBlocks:
    """The blocks of a `localCheckpoint`: on a classic session `DataFrame.unpersist` does
    not free them (they belong to the RDD under the checkpointed plan), so a run that did
    not free them would leave them in the driver's memory until the session ends. A Spark
    Connect server frees them itself once the client drops the DataFrame."""

    def __init__(self, checkpointed: DataFrame) -> None:
        self._rdd: Any = None
        if backend(checkpointed.sparkSession).jvm is not None:
            self._rdd = checkpointed._jdf.logicalPlan().rdd()

    def unpersist(self) -> None:
        if self._rdd is not None:
            self._rdd.unpersist(False)
