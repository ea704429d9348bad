"""A local Spark Connect server for tests and the benchmark, in a process of its own.

`python -m tests.support.connect_server --port N` starts a `local[2]` Spark driver with the
Spark Connect plugin (the server jar ships in the pyspark wheel), Delta's and the Kafka
source's jars from `.jars/` (not the job's JVM jar: a Connect user has none), and Spark's
default settings otherwise, then serves until its stdin closes or it is stopped.
`ConnectServer` starts one and says where (`url`). A separate process, because PySpark
chooses between its classic and Connect functions by a process-wide variable: a process
that holds a classic session cannot also be a Connect client.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[2]
#: The jars a Connect server gets from .jars/: Delta and Spark's Kafka source with what it
#: needs. Not sharestate-jvm.jar: the JVM fast paths are a classic session's accelerator.
SERVER_JARS: Final = (
    "delta-spark_",
    "delta-storage-",
    "spark-sql-kafka-",
    "spark-token-provider-kafka-",
    "kafka-clients-",
    "commons-pool2-",
)
START_TIMEOUT_S: Final = 120.0


def server_jars(jars_dir: Path) -> list[Path]:
    return sorted(j for j in jars_dir.glob("*.jar") if j.name.startswith(SERVER_JARS))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _serve(port: int, jars_dir: Path, driver_memory: str) -> None:
    from pyspark.sql import SparkSession

    jars = ",".join(str(j) for j in server_jars(jars_dir))
    session = (
        SparkSession.builder.master("local[2]")
        .appName("sharestate-connect-server")
        .config("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
        .config("spark.connect.grpc.binding.port", str(port))
        .config("spark.jars", jars)
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
        .config("spark.driver.memory", driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    print(f"serving on {port}", flush=True)
    try:
        sys.stdin.read()  # until the parent closes it (or dies)
    finally:
        session.stop()


class ConnectServer:
    """A Connect server process on a free loopback port; `stop()` ends it."""

    def __init__(
        self,
        *,
        jars_dir: Path = ROOT / ".jars",
        driver_memory: str = "2g",
        log: Path | None = None,
        environment: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.log = log or Path(os.environ.get("TMPDIR", "/tmp")) / f"connect-{self.port}.log"
        env = {**os.environ, **(environment or {})}
        env["PYSPARK_PYTHON"] = sys.executable
        env.pop("SPARK_REMOTE", None)
        env.pop("SPARK_CONNECT_MODE_ENABLED", None)
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.support.connect_server",
                    "--port",
                    str(self.port),
                    "--jars-dir",
                    str(jars_dir),
                    "--driver-memory",
                    driver_memory,
                ],
                cwd=ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self._wait_until_serving()

    @property
    def url(self) -> str:
        return f"sc://localhost:{self.port}"

    def _wait_until_serving(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the Connect server exited: see {self.log}")
            if f"serving on {self.port}" in self.log.read_text(errors="replace"):
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the Connect server did not start in {START_TIMEOUT_S:g} s: {self.log}")

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--jars-dir", type=Path, default=ROOT / ".jars")
    parser.add_argument("--driver-memory", default="2g")
    args = parser.parse_args()
    _serve(args.port, args.jars_dir, args.driver_memory)


if __name__ == "__main__":
    main()
