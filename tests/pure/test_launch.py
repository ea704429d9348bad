"""What the entry points set up around a run: Spark settings files, the session spark-submit
hands over, the console."""

from __future__ import annotations

import re

from sharestate.job.launch import session_defaults
from sharestate.job.session import read_spark_defaults, spark_conf_files
from tests.support.paths import ROOT

#: Settings that place or size a run: a cluster's own, never the job's.
PLACES_OR_SIZES = re.compile(
    r"^spark\.(master|submit\.|driver\.(memory|cores|host|bindAddress)|executor\.(memory|cores"
    r"|instances)|cores\.max|ui\.enabled|sql\.shuffle\.partitions|sql\.files\.maxPartitionBytes)"
)


def test_job_settings_are_cluster_safe_and_local_ones_apart() -> None:
    job = read_spark_defaults(ROOT / "conf" / "spark-job.conf")
    local = read_spark_defaults(ROOT / "conf" / "spark-local.conf")
    assert [key for key in job if PLACES_OR_SIZES.match(key)] == []
    assert {"spark.master", "spark.driver.memory"} <= set(local)
    assert not set(job) & set(local), "each setting in one file"
    assert spark_conf_files(ROOT) == [
        ROOT / "conf" / "spark-job.conf",
        ROOT / "conf" / "spark-local.conf",
    ]


def test_an_entry_point_adds_only_what_the_submitter_left_unset() -> None:
    delta = {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    }
    assert session_defaults({}, delta_loadable=True) == {
        **delta,
        "spark.ui.showConsoleProgress": "false",
        "spark.log.level": "WARN",
    }
    assert session_defaults({}, delta_loadable=False) == {
        "spark.ui.showConsoleProgress": "false",
        "spark.log.level": "WARN",
    }
    submitted = {
        "spark.log.level": "INFO",
        "spark.ui.showConsoleProgress": "true",
        "spark.sql.extensions": "org.example.Extension",
    }
    assert session_defaults(submitted, delta_loadable=True) == {
        "spark.sql.extensions": "org.example.Extension,io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": delta["spark.sql.catalog.spark_catalog"],
    }
    assert session_defaults({**submitted, **delta}, delta_loadable=True) == {}
