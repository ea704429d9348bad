"""Steps of a run that do not depend on each other, run side by side.

An increment's Spark jobs (its steps, its summary's counts) are small: each waits mostly
on Spark's fixed cost per job and stage (scheduling, planning, a commit), not on the cores.
Steps that read what earlier steps computed and change tables of their own can submit their
jobs at once, and Spark runs them together (its scheduler takes jobs from several threads).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pyspark import InheritableThread


def run_side_by_side(steps: Sequence[Callable[[], Any]]) -> list[Any]:
    """Run each step in its own thread and return their results, in the steps' order, once
    all have ended. When steps fail, the first one's error is raised, after every step
    ended (so a run that puts back what it wrote sees every commit made). The threads
    inherit the caller's Spark local properties (a notebook's job group, its pool)."""
    results: list[Any] = [None] * len(steps)
    errors: list[BaseException | None] = [None] * len(steps)

    def runner(index: int) -> Callable[[], None]:
        def run() -> None:
            try:
                results[index] = steps[index]()
            except BaseException as error:  # re-raised in the caller's thread below
                errors[index] = error

        return run

    threads = [InheritableThread(runner(index)) for index in range(len(steps))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for error in errors:
        if error is not None:
            raise error
    return results
