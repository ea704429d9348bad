"""The job users run: configuration, the computation, writing the tables, the command line.

* `config`: the typed configuration and every check of it; `options`: the command-line
  options parsed into one.
* `pipeline`: `compute(spark, config)`: every table as DataFrames (`Results`), nothing
  written; `cache`: what a computation keeps persisted, and its release.
* `run`: `main(spark, config)`: compute, write the tables in order, undo a failed run;
  `output_tables`: a full run's writes; `extents`: the checkpoint's exported extents.
* `summary`: `summarize(results)`, the run summary's counts, and its printed form;
  `summary_arrow`: the same counts of the tables a run brought to the driver.
* `cli`: the `sharestate` command; `session`: a local Spark session for it and the tests.

`compute`, `summarize`, `main`, `JobConfig` and `Results` are importable from here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sharestate.job.config import JobConfig

if TYPE_CHECKING:
    from sharestate.job.pipeline import Results, compute
    from sharestate.job.run import main
    from sharestate.job.summary import summarize

#: Names imported on first use: their modules load Spark's Python modules, which
#: `import sharestate` and the `sharestate sample` command do without.
_LAZY = {"Results": "pipeline", "compute": "pipeline", "main": "run", "summarize": "summary"}

__all__ = ["JobConfig", "Results", "compute", "main", "summarize"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
