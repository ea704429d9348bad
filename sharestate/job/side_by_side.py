"""Steps of a run that do not depend on each other, run side by side.

Many of a run's steps wait mostly on I/O or on Spark's fixed cost per job and stage
(scheduling, planning), not on the cores: an increment's commits and its few Spark queries,
the inputs' streams, a full run's small jobs. Steps that read what earlier steps computed
and change tables of their own can start at once: their commits overlap, and Spark runs
their jobs together (its scheduler takes jobs from several threads).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from pyspark import InheritableThread
from pyspark.sql import SparkSession, is_remote


def run_side_by_side(steps: Sequence[Callable[[], Any]], at_most: int | None = None) -> list[Any]:
    """Run each step in its own thread and return their results, in the steps' order, once
    all have ended; with `at_most`, no more than that many at once (the next starts when
    one ends). When steps fail, the first one's error is raised, after every step ended
    (so a run that puts back what it wrote sees every commit made). The threads inherit the
    caller's Spark local properties (a notebook's job group, its pool)."""
    results: list[Any] = [None] * len(steps)
    errors: list[BaseException | None] = [None] * len(steps)
    slots = threading.BoundedSemaphore(at_most or max(1, len(steps)))

    def runner(index: int) -> Callable[[], None]:
        def run() -> None:
            try:
                results[index] = steps[index]()
            except BaseException as error:  # re-raised in the caller's thread below
                errors[index] = error
            finally:
                slots.release()

        return run

    # Spark Connect's threads take the session whose job tags they inherit (in a thread of
    # its own a step has no active session: the process's default one then).
    session = SparkSession.getActiveSession()
    if session is None and is_remote():
        session = SparkSession.active()
    threads = []
    for index in range(len(steps)):
        slots.acquire()
        thread = InheritableThread(runner(index), session=session)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    for error in errors:
        if error is not None:
            raise error
    return results
