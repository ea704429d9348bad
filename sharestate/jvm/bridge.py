"""Calling the jar's classes from Python: is the jar there, which engine runs a step, and
the JVM passes that hand rows over to a second output (`Tee`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from pyspark.sql import DataFrame, SparkSession

from sharestate.backend import backend
from sharestate.errors import InvalidConfigError, SparkSetupError
from sharestate.jvm import contract

#: Which implementation runs a step: "python" (the reference), "jvm" (the jar's, the same
#: columns faster) or "auto" (the JVM one when the session has the jar).
Engine = Literal["auto", "jvm", "python"]
ENGINES: Final = ("auto", "jvm", "python")
#: Why the JVM paths are not there, for messages.
MISSING: Final = (
    "the session has no sharestate JVM jar built from this code's row contract (version "
    f"{contract.VERSION}; build it with scripts/build_jvm.sh or `make setup`; on a cluster"
    " pass .jars/sharestate-jvm.jar with --jars), or runs on Spark Connect"
)


def _jvm(spark: SparkSession) -> Any:
    jvm = backend(spark).jvm
    if jvm is None:
        raise SparkSetupError(f"the JVM fast paths cannot run: {MISSING}")
    return jvm


def available(spark: SparkSession) -> bool:
    """True when the session's JVM has the jar, built from the contract this code speaks
    (`sharestate.jvm.contract`: its version and its columns)."""
    if backend(spark).jvm is None:  # Spark Connect: no JVM to call
        return False
    try:
        probe = _jvm(spark).sharestate.jvm.Probe
        return (
            int(probe.version()) == contract.VERSION
            and str(probe.fingerprint()) == contract.fingerprint()
        )
    except Exception:  # no JVM (Spark Connect), no jar, or py4j cannot find the class
        return False


@dataclass(frozen=True)
class EngineInUse:
    """Which implementation `engine="auto"` runs in a session, for the log and the summary."""

    name: Literal["jvm", "python"]
    detail: str


def engine_in_use(spark: SparkSession) -> EngineInUse:
    """The engine the decode and the replay's fold run on in `spark` (`engine="auto"`)."""
    if available(spark):
        return EngineInUse(
            "jvm",
            "JVM fast paths (sharestate-jvm.jar): decode and the replay's fold; rows the decode "
            "tier is not sure of go to the Python reference decoder",
        )
    return EngineInUse("python", f"Python paths only: {MISSING}")


def _target(spark: SparkSession, class_name: str, method: str) -> Any:
    return getattr(getattr(_jvm(spark).sharestate.jvm, class_name), method)


class Tee:
    """A JVM pass's hand-over of rows to a second output (`sharestate.jvm.Tee`): the second
    output reads what the first pass left in Spark's block manager instead of computing it
    again, and computes it itself where nothing was left. `unpersist()` drops those blocks,
    like unpersisting a cached DataFrame, once the tables reading them are computed."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    def cached_partitions(self) -> int:
        """Partitions of the second output Spark holds (left behind, or computed)."""
        return int(self._handle.cachedPartitions())

    def unpersist(self) -> None:
        self._handle.release()


def call_teed(
    spark: SparkSession, class_name: str, method: str, df: DataFrame, *args: Any
) -> tuple[list[DataFrame], Tee]:
    """`sharestate.jvm.<class_name>.<method>(df, *args)`, a method that returns {Dataset<Row>,
    ..., Tee}: the outputs (the first computes what the others read through the tee) and
    the tee."""
    *outputs, tee = _target(spark, class_name, method)(df._jdf, *args)
    return [DataFrame(out, spark) for out in outputs], Tee(tee)


def choose(engine: str, step: str, unavailable: str | None) -> bool:
    """True when `step` runs on the JVM: `engine` is "jvm" or "auto" and nothing makes it
    `unavailable` (a reason, or None). "jvm" with a reason is a setup error."""
    if engine not in ENGINES:
        raise InvalidConfigError(f"{step} engine {engine!r}: expected one of {', '.join(ENGINES)}")
    if engine == "python":
        return False
    if unavailable is not None and engine == "jvm":
        raise SparkSetupError(f"{step} engine 'jvm' cannot run: {unavailable}; or use 'python'")
    return unavailable is None
