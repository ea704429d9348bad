"""The job users run: configuration, the computation, writing the tables, the command line.

* `config`: the typed configuration and every check of it.
* `pipeline`: `compute(spark, config)` (every table as DataFrames, nothing written) and
  `summarize(results)`.
* `run`: `main(spark, config)`: compute, write the tables in order, undo a failed run.
* `cli`: the `sharestate` command; `session`: a local Spark session for it and the tests.
"""
