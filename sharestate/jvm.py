"""The JVM fast paths (jar built from jvm/ by scripts/build_jvm.sh) and how to call them.

The Python modules are the reference; the JVM classes compute the same columns faster and
are tested equal to them (and to Kafka's own corpus). A session without the jar, or one
that cannot reach the JVM (Spark Connect), runs the Python paths.
"""

from __future__ import annotations

from typing import Any, Final

from pyspark.sql import DataFrame, SparkSession

#: The `Probe.version()` this Python code speaks to.
CONTRACT_VERSION: Final = 1
_PACKAGE: Final = "sharestate.jvm"


def _jvm(spark: SparkSession) -> Any:
    return getattr(spark, "_jvm", None) or spark.sparkContext._jvm


def available(spark: SparkSession) -> bool:
    """True when the session's JVM has the jar, at the contract version this code expects."""
    try:
        jvm = _jvm(spark)
        return int(jvm.sharestate.jvm.Probe.version()) == CONTRACT_VERSION
    except Exception:  # no JVM (Spark Connect), no jar, or py4j cannot find the class
        return False


def call(spark: SparkSession, class_name: str, method: str, df: DataFrame, *args: Any) -> DataFrame:
    """`sharestate.jvm.<class_name>.<method>(df, *args)`: a Dataset<Row> in, one out."""
    target = getattr(getattr(_jvm(spark).sharestate.jvm, class_name), method)
    return DataFrame(target(df._jdf, *args), spark)
