"""Writes the local driver JVM's class-data-sharing archive (`.jars/driver-classes.jsa`).

A new `sharestate replay` process spends seconds of its two cores loading, parsing and
verifying the 20,000 classes of Spark, Delta and the job. Java 17 can map them from an
archive instead (class-data sharing). This script, run once at set-up, runs the job on a
small generated export, a full run and then an incremental one, with the driver JVM listing
every class it loads, and has Java write the archive from that list. `local_session` then
starts its driver JVM with the archive, and with the jars folder on the driver's class path,
where the archive can hold their classes.

The JVM checks the archive against its own build and the class path's jars (sizes, times)
and, where they differ (another Java, pyspark reinstalled, a jar rebuilt), runs without it,
silently: the archive only saves time. `make setup` rebuilds it when a jar changes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sharestate.job import JobConfig
from sharestate.job import main as run_job
from sharestate.job.session import CLASS_ARCHIVE, jars_class_path, local_session
from sharestate.sample.exports import SampleSpec, generate


def _split(table: pa.Table, folder: Path, later: Path) -> None:
    """The older four fifths of `table` into `folder`, the rest into the file `later`."""
    cut = pc.max(table.column("offset")).as_py() * 4 // 5
    new = pc.greater(table.column("offset"), cut)
    folder.mkdir()
    pq.write_table(table.filter(pc.invert(new)), folder / "part-00000.parquet")
    pq.write_table(table.filter(new), later)


def _list_classes(jars_dir: Path, work: Path, class_list: Path) -> tuple[str, str]:
    """Run the job on a small export with the driver listing its classes into `class_list`;
    the driver's java command and its class path."""
    state, offsets = generate(SampleSpec(records=3_000))
    exports = {"share_state": state, "consumer_offsets": offsets}
    for name, table in exports.items():
        _split(table, work / name, work / f"{name}.later.parquet")
    settings = jars_class_path(jars_dir)
    settings["spark.driver.extraJavaOptions"] = f"-XX:DumpLoadedClassList={class_list}"
    spark = local_session(conf=settings, jars_dir=jars_dir, class_archive=False)

    def config(mode: str) -> JobConfig:
        return JobConfig(
            share_state=str(work / "share_state"),
            consumer_offsets=str(work / "consumer_offsets"),
            output=str(work / "out"),
            mode=mode,
        )

    spark.sparkContext.setLogLevel("ERROR")
    run_job(spark, config("full"))
    for name in exports:
        os.replace(work / f"{name}.later.parquet", work / name / "part-00001.parquet")
    run_job(spark, config("incremental"))
    system = spark.sparkContext._jvm.System  # type: ignore[union-attr]
    java = str(Path(system.getProperty("java.home"), "bin", "java"))
    class_path = str(system.getProperty("java.class.path"))
    spark.stop()
    return java, class_path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jars_dir", type=Path, help="the jars folder (.jars)")
    jars_dir = parser.parse_args().jars_dir.resolve()
    archive = jars_dir / CLASS_ARCHIVE
    archive.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="sharestate-classes-") as tmp:
        class_list = Path(tmp, "classes.lst")
        java, class_path = _list_classes(jars_dir, Path(tmp), class_list)
        # Written to a temporary name first: a half-written archive is never picked up.
        partial = archive.with_suffix(".partial")
        done = subprocess.run(
            [
                java,
                "-Xshare:dump",
                f"-XX:SharedClassListFile={class_list}",
                f"-XX:SharedArchiveFile={partial}",
                "-cp",
                class_path,
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0 or not partial.is_file():
            print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
            print(f"could not write {archive} (java exit {done.returncode})", file=sys.stderr)
            return 1
        partial.replace(archive)
        listed = len(class_list.read_text(encoding="utf-8").splitlines())
    print(f"wrote {archive} ({listed} classes listed, {archive.stat().st_size >> 20} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
