"""The README's spark-submit command, run as written on a real multi-process Spark: a
standalone master and two one-core workers on 127.0.0.1, started from pyspark's own
scripts, so the job runs on two executor processes besides the driver.

The package reaches driver and executors only through `dist/sharestate.zip`: their Python
(`PYSPARK_PYTHON`) runs without `site` processing, so the editable install of this
checkout is not importable there, while pyspark, pyarrow, numpy and pandas are (through
PYTHONPATH). Every table must equal a local run's, row for row.

Slow (a cluster start and two whole runs on it, about 8 minutes on 2 cores): `make
test-cluster` runs it (`SHARESTATE_CLUSTER=1`); `make test` skips it, saying so.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from sharestate.io.readers import OUTPUT_TABLES
from sharestate.job import JobConfig
from sharestate.job import main as job_main
from tests.support.documented import fenced_block, shell_commands
from tests.support.paths import ROOT

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(
        os.environ.get("SHARESTATE_CLUSTER") != "1",
        reason="a run on a standalone cluster: `make test-cluster` runs it",
    ),
]
README = ROOT / "README.md"
#: The README block the test runs (the marker comment is just above it).
COMMAND_MARKER = "<!-- cluster-command:"
HOST = "127.0.0.1"
#: Port 0: free ports, read back from the logs.
MASTER_ARGS = [
    "org.apache.spark.deploy.master.Master",
    "--host",
    HOST,
    "--port",
    "0",
    "--webui-port",
    "0",
]
WORKER_ARGS = [
    "org.apache.spark.deploy.worker.Worker",
    "--host",
    HOST,
    "--port",
    "0",
    "--webui-port",
    "0",
    "--cores",
    "1",
    "--memory",
    "1536m",
]
#: Every table the job writes on the sample (with --consumer-offsets, without
#: --end-offsets), but the summary (compared as JSON, less the run's time).
TABLES = tuple(t for t in OUTPUT_TABLES if t not in ("share_partition_lag", "run_summary"))


def documented_commands() -> list[str]:
    """The commands of the README's cluster block, as the test runs them."""
    return shell_commands(fenced_block(README, COMMAND_MARKER, "bash"))


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class Daemon:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def _start(name: str, args: list[str], root: Path, env: dict[str, str]) -> Daemon:
    log = root / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(_spark_home() / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group, stopped whole in teardown
        )
    return Daemon(name, process, log)


def _wait_for(daemon: Daemon, pattern: str, timeout: float, count: int = 1) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.findall(pattern, daemon.text())
        if len(found) >= count:
            return found
        if daemon.process.poll() is not None:
            break
        time.sleep(0.5)
    raise AssertionError(f"{daemon.name} did not log {pattern!r}:\n{daemon.text()[-3000:]}")


def _stop(daemons: list[Daemon]) -> None:
    for daemon in reversed(daemons):
        if daemon.process.poll() is None:
            os.killpg(daemon.process.pid, signal.SIGTERM)
    for daemon in reversed(daemons):
        try:
            daemon.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(daemon.process.pid, signal.SIGKILL)
            daemon.process.wait(timeout=30)


def _cluster_env() -> dict[str, str]:
    env = {**os.environ, "SPARK_HOME": str(_spark_home()), "SPARK_LOCAL_IP": HOST}
    for name in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET", "SPARK_CONF_DIR"):
        env.pop(name, None)
    return env


@dataclass(frozen=True)
class Cluster:
    url: str
    #: Each worker's work folder: one sub-folder per application, one per executor in it.
    work_dirs: tuple[Path, ...]

    def executor_logs(self) -> list[str]:
        """The executors' stderr logs, of every application the workers ran."""
        return [
            log.read_text(errors="replace")
            for w in self.work_dirs
            for log in w.glob("app-*/*/stderr")
        ]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A standalone master and two workers of one core each, bound to 127.0.0.1."""
    root = tmp_path_factory.mktemp("cluster")
    env = _cluster_env()
    daemons: list[Daemon] = []
    try:
        master = _start(
            "master",
            MASTER_ARGS,
            root,
            env,
        )
        daemons.append(master)
        (port,) = _wait_for(master, rf"Starting Spark master at spark://{HOST}:(\d+)", 120)
        url = f"spark://{HOST}:{port}"
        for index in (1, 2):
            daemons.append(
                _start(
                    f"worker{index}",
                    [*WORKER_ARGS, "--work-dir", str(root / f"work{index}"), url],
                    root,
                    env,
                )
            )
        _wait_for(master, r"Registering worker", 120, count=2)
        yield Cluster(url, (root / "work1", root / "work2"))
    finally:
        _stop(daemons)


def _python_without_site(folder: Path) -> Path:
    """A `python` for driver and executors that imports pyspark, pyarrow, numpy and pandas
    (site-packages on PYTHONPATH) but not this checkout (`-S`: no .pth files, so no
    editable install): `sharestate` comes from `--py-files dist/sharestate.zip` or nowhere."""
    site_packages = sysconfig.get_paths()["purelib"]
    script = folder / "python-without-site"
    script.write_text(
        "#!/bin/sh\n"
        f'export PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{site_packages}"\n'
        f'exec {shlex.quote(sys.executable)} -S "$@"\n'
    )
    script.chmod(0o755)
    probe = subprocess.run(
        [str(script), "-c", "import pyarrow, numpy, pandas, pyspark\nimport sharestate"],
        capture_output=True,
        text=True,
        check=False,
        cwd=folder,
        env=_cluster_env(),
    )
    assert "No module named 'sharestate'" in probe.stderr, probe.stderr
    return script


def _workdir(tmp_path: Path) -> Path:
    """A folder to run the commands in: the repository's conf/, jobs/, .jars/ and dist/
    where the commands name them; sample/ and out/ are written here, not in the checkout."""
    work = tmp_path / "work"
    work.mkdir()
    for name in ("conf", "jobs", ".jars", "dist"):
        (work / name).symlink_to(ROOT / name)
    return work


def _run(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        shlex.split(command),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )


def _rows(spark: SparkSession, path: Path) -> list[str]:
    return sorted(repr(row) for row in spark.read.format("delta").load(str(path)).collect())


def test_the_documented_spark_submit_command_runs_on_a_cluster(
    spark: SparkSession, cluster: Cluster, tmp_path: Path
) -> None:
    commands = documented_commands()
    assert [c.split()[:2] for c in commands] == [
        ["make", "dist"],
        ["sharestate", "sample"],
        ["spark-submit", "--properties-file"],
    ]
    work = _workdir(tmp_path)
    # The cluster's own defaults: they name the master (the command does not), and
    # `--load-spark-defaults` must keep them.
    cluster_conf = tmp_path / "cluster-conf"
    cluster_conf.mkdir()
    (cluster_conf / "spark-defaults.conf").write_text(
        f"spark.master {cluster.url}\n"
        f"spark.driver.host {HOST}\n"
        f"spark.driver.bindAddress {HOST}\n"
        "spark.ui.enabled false\n"
    )
    python = _python_without_site(tmp_path)
    env = {
        **_cluster_env(),
        "SPARK_CONF_DIR": str(cluster_conf),
        "PYSPARK_PYTHON": str(python),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    make, sample, submit = commands
    built = _run(make, ROOT, env)  # a make target: run in the repository
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    assert _run(sample, work, env).returncode == 0
    started = time.monotonic()
    result = _run(submit, work, env)
    seconds = time.monotonic() - started
    console = result.stdout + result.stderr
    assert result.returncode == 0, console[-6000:]
    print(f"spark-submit on the cluster: {seconds:.0f} s")
    # The tasks ran in the two workers' executors, not in the driver.
    executor_logs = cluster.executor_logs()
    assert len(executor_logs) == 2 and all("Finished task" in log for log in executor_logs)
    assert "sharestate run summary" in console
    assert re.search(r"sharestate wrote share_state_records: 2,99\d rows", console)
    assert "Traceback" not in console and "\tat " not in console

    local = tmp_path / "local-out"
    job_main(
        spark,
        JobConfig(
            share_state=str(work / "sample" / "share_state"),
            consumer_offsets=str(work / "sample" / "consumer_offsets"),
            output=str(local),
        ),
    )
    for table in TABLES:
        assert _rows(spark, work / "out" / table) == _rows(spark, local / table), table
    cluster_summary = _comparable_summary(work / "out")
    assert cluster_summary == _comparable_summary(local)
    assert cluster_summary["engine"]["name"] == "jvm"
    assert f"engine: {cluster_summary['engine']['detail']}" in console

    # The same command without the JVM jar: the Python paths, the same tables, and the
    # summary says why.
    without_jar = re.sub(
        r"--output out$", "--output out-python", submit.replace(",.jars/sharestate-jvm.jar", "")
    )
    assert without_jar.endswith("out-python") and "sharestate-jvm" not in without_jar
    result = _run(without_jar, work, env)
    console = result.stdout + result.stderr
    assert result.returncode == 0, console[-6000:]
    python_summary = _comparable_summary(work / "out-python")
    engine = python_summary.pop("engine")
    assert engine["name"] == "python"
    assert "no sharestate JVM jar" in engine["detail"] and "--jars" in engine["detail"]
    assert f"engine: {engine['detail']}" in console
    cluster_summary.pop("engine")
    assert python_summary == cluster_summary
    for table in TABLES:
        assert _rows(spark, work / "out-python" / table) == _rows(spark, local / table), table


def _comparable_summary(output: Path) -> dict[str, object]:
    """The run summary less what differs between two runs of the same input."""
    summary: dict[str, Any] = json.loads((output / "run_summary.json").read_text())
    summary.pop("run_at")
    for info in summary["inputs"].values():
        info.pop("path", None)
    return summary
