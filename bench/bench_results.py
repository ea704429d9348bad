"""Benchmark results as data: one JSON file per run in bench/results/.

Each file holds the date, the commit (and whether the work tree had changes), the machine
(cores, memory, Python, Java, Spark, Delta, pyarrow), the settings (the benchmark's options
and the Spark settings that matter) and the numbers. The documentation's performance page
is generated from these files (scripts/docs_hooks.py), newest first; commit them with the
change they measure.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parent.parent
RESULTS: Final = ROOT / "bench" / "results"
#: Spark settings that change what the benchmarks measure (conf/spark-job.conf and
#: conf/spark-local.conf).
SPARK_SETTINGS: Final = (
    "spark.master",
    "spark.driver.memory",
    "spark.sql.shuffle.partitions",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes",
    "spark.sql.files.maxPartitionBytes",
    "spark.sql.execution.arrow.maxRecordsPerBatch",
    "spark.databricks.delta.snapshotPartitions",
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning",
)


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine(spark: Any) -> dict[str, Any]:
    """The machine and the versions a run used (Java as the session's JVM reports it)."""
    return {
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "python": platform.python_version(),
        "java": str(spark.sparkContext._jvm.java.lang.System.getProperty("java.version")),
        "spark": spark.version,
        "delta": _version("delta-spark"),
        "pyarrow": _version("pyarrow"),
        "platform": platform.platform(),
        "recorded_with_run": True,
    }


def machine_of_processes() -> dict[str, Any]:
    """`machine` for a benchmark whose runs are processes of their own (no session here):
    Java as `java -version` reports it, Spark as the installed pyspark."""
    java = None
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(
            ["java", "-version"], capture_output=True, text=True, check=False, timeout=60
        )
        quoted = [part for part in done.stderr.split('"') if part[:1].isdigit()]
        java = quoted[0] if quoted else None
    return {
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "python": platform.python_version(),
        "java": java,
        "spark": _version("pyspark"),
        "delta": _version("delta-spark"),
        "pyarrow": _version("pyarrow"),
        "platform": platform.platform(),
        "recorded_with_run": True,
    }


def spark_settings(spark: Any) -> dict[str, str | None]:
    """The values of SPARK_SETTINGS in the session (None: Spark's default)."""
    conf = spark.sparkContext.getConf()
    return {key: conf.get(key, None) for key in SPARK_SETTINGS}


def write_result(
    benchmark: str,
    settings: dict[str, Any],
    results: dict[str, Any],
    machine_info: dict[str, Any],
) -> Path:
    """Write bench/results/<time>-<benchmark>-<commit>.json and return its path."""
    now = datetime.now(UTC)
    commit = _git("rev-parse", "--short=7", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no")
    record = {
        "benchmark": benchmark,
        "date": now.isoformat(timespec="seconds"),
        "commit": commit,
        "dirty": None if status is None else bool(status),
        "source": f"bench/bench_{benchmark}.py",
        "machine": machine_info,
        "settings": settings,
        "results": results,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{now:%Y-%m-%dT%H%M%S}-{benchmark}-{commit or 'no-commit'}.json"
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"results: {path.relative_to(ROOT)}")
    return path
