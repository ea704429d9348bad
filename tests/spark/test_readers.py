"""Readers see one run: after a killed run, every table read at the versions the last
complete run's checkpoint names is that run's, from Python and from the docs' SQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from sharestate.io.checkpoint import PLACEMENTS_TABLE
from sharestate.io.readers import OUTPUT_TABLES, checkpointed_versions, read_output
from sharestate.job import JobConfig
from sharestate.job import main as job_main
from sharestate.sample.exports import SampleSpec, write_sample
from tests.conftest import SESSION
from tests.support.documented import fenced_block, sql_statements
from tests.support.paths import ROOT

pytestmark = [pytest.mark.spark, pytest.mark.connect]
PAGE = ROOT / "docs" / "writes-and-failures.md"
SQL_MARKER = "<!-- checkpoint-sql:"
#: The output path the page's SQL names.
PAGE_OUTPUT = "/lake/sharestate"


def _rows(df: DataFrame) -> list[str]:
    return sorted(repr(row) for row in df.collect())


def _documented_sql() -> list[str]:
    return sql_statements(fenced_block(PAGE, SQL_MARKER, "sql"))


# On the Connect server in `make test` (Spark's Delta reader there); on the classic session in
# `make test-slow`.
@pytest.mark.slow if SESSION == "classic" else pytest.mark.connect
def test_after_a_killed_run_readers_see_the_last_complete_run(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_sample(tmp_path / "sample", SampleSpec(records=300))
    output = tmp_path / "out"
    config = JobConfig(
        share_state=str(tmp_path / "sample" / "share_state"),
        consumer_offsets=str(tmp_path / "sample" / "consumer_offsets"),
        output=str(output),
    )
    job_main(spark, config)
    complete = {name: _rows(df) for name, df in read_output(spark, str(output)).items()}
    versions = checkpointed_versions(spark, str(output))
    assert versions is not None
    # The checkpoint names the internal placements too (a killed run's are put back).
    assert set(versions) - {PLACEMENTS_TABLE} == set(complete)
    assert set(complete) == set(OUTPUT_TABLES) - {"share_partition_lag"}

    # A later run that dies after its first tables, without putting them back (as SIGKILL
    # would leave it): replayed only part-way (--as-of), so its state differs.
    def killed(*args: object, **kwargs: object) -> None:
        raise RuntimeError("killed (injected)")

    monkeypatch.setattr("sharestate.job.run.audit_written", killed)
    monkeypatch.setattr("sharestate.job.output_tables.OutputTables.put_back", lambda self: None)
    with pytest.raises(RuntimeError, match="killed"):
        job_main(spark, JobConfig(**{**config.__dict__, "as_of": "40"}))
    monkeypatch.undo()
    latest = read_output(spark, str(output), at_checkpoint=False)
    assert _rows(latest["share_partition_state"]) != complete["share_partition_state"]
    assert _rows(latest["run_summary"]) == complete["run_summary"]  # a mix of two runs

    assert {n: _rows(df) for n, df in read_output(spark, str(output)).items()} == complete
    assert checkpointed_versions(spark, str(output)) == versions

    # The docs' SQL, on this output, reads the same state.
    statements = [s.replace(PAGE_OUTPUT, str(output)) for s in _documented_sql()]
    listed = spark.sql(statements[0]).collect()
    assert {row["table_name"]: row["version"] for row in listed} == versions
    for statement in statements[1:-1]:
        spark.sql(statement)
    assert statements[-1].startswith("EXECUTE IMMEDIATE")
    assert _rows(spark.sql(statements[-1])) == complete["share_partition_state"]
