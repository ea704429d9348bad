"""A session set up wrong, or an input that cannot be read, is refused in one line (exit
code 2, nothing written), and that line is the last thing on the console, not buried under
Spark's stack traces and retry warnings."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from sharestate.errors import SparkSetupError
from sharestate.job import cli
from sharestate.job.preflight import check_executor_python
from sharestate.sample.exports import SampleSpec, write_sample
from tests.support.paths import ROOT

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sample")
    write_sample(root, SampleSpec(records=200))
    return root


def _refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert cli.main(["replay", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("sharestate: error: "), err
    return err


def _python_path(folder: Path) -> str:
    """A PYTHONPATH folder with pyspark and py4j, for the system's Python, which has no
    pyarrow, numpy or pandas."""
    import py4j
    import pyspark

    folder.mkdir()
    for module in (pyspark, py4j):
        (folder / module.__name__).symlink_to(Path(module.__file__).parent)
    return str(folder)


def test_executors_without_pyarrow_numpy_pandas_are_named(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    sample: Path,
) -> None:
    """The executors' Python here is the system's (no pyarrow, numpy or pandas): the first
    tiny task says so, and the run writes nothing."""
    bare = shutil.which("python3", path="/usr/bin:/bin")
    assert bare is not None
    probe = subprocess.run([bare, "-c", "import pyarrow"], capture_output=True, check=False)
    assert probe.returncode != 0, f"{bare} has pyarrow: pick a Python without it"
    context = spark.sparkContext
    monkeypatch.setattr(context, "pythonExec", bare)
    monkeypatch.setitem(context.environment, "PYTHONPATH", _python_path(tmp_path / "path"))
    with pytest.raises(SparkSetupError) as err:
        check_executor_python(spark)
    message = str(err.value)
    assert f"the executors' Python {bare}" in message
    # (The workers' folder is the checkout's: they find this package there.)
    assert "cannot import pyarrow, numpy, pandas:" in message
    assert "spark.pyspark.python" in message
    out = tmp_path / "out"
    err_line = _refused(capsys, "--share-state", str(sample / "share_state"), "--output", str(out))
    assert "cannot import pyarrow, numpy, pandas" in err_line
    assert not out.exists() or list(out.iterdir()) == [out / "_lock"]


def test_a_kafka_address_without_a_broker_is_refused_after_the_wait(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Spark's Kafka source would retry the address without end; the run waits
    --kafka-timeout for a broker, then names the address."""
    out = tmp_path / "out"
    started = time.monotonic()
    err = _refused(
        capsys,
        *("--share-state", "kafka://127.0.0.1:1", "--output", str(out)),
        *("--kafka-timeout", "4s"),
    )
    waited = time.monotonic() - started
    assert "kafka://127.0.0.1:1: no Kafka broker answered at 127.0.0.1:1 within 4 s" in err
    assert "(--kafka-timeout)" in err
    assert 4 <= waited < 40, waited
    assert not out.exists() or list(out.iterdir()) == [out / "_lock"]


#: Run in a child process: the console is the child's, Spark's JVM included.
_CONSOLE_DRIVER = """
import sys
from sharestate.job import cli

for export, output in zip(sys.argv[1::2], sys.argv[2::2]):
    print(f"=== {export}", file=sys.stderr, flush=True)
    args = ["replay", "--share-state", export, "--output", output, "--kafka-timeout", "4s"]
    print(f"=== exit {cli.main(args)}", file=sys.stderr, flush=True)
"""


def test_bad_inputs_end_the_console_with_their_one_line(sample: Path, tmp_path: Path) -> None:
    """A CSV file, a truncated Parquet file, an empty folder and a Kafka address without a
    broker, each given to `sharestate replay`: no executor stack traces or retry warnings,
    and the one-line error is the last thing printed."""
    csv = tmp_path / "export.csv"
    csv.write_text("key,value\n1,2\n")
    truncated = tmp_path / "truncated"
    truncated.mkdir()
    table = pq.read_table(sample / "share_state")
    half = table.num_rows // 2
    pq.write_table(table.slice(0, half), truncated / "part-0.parquet")
    pq.write_table(table.slice(half), truncated / "part-1.parquet")
    damaged = (truncated / "part-1.parquet").read_bytes()
    (truncated / "part-1.parquet").write_bytes(damaged[: len(damaged) // 2])
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = {
        str(csv): "it is not a Parquet file",
        str(truncated): "part-1.parquet",
        str(empty): "The folder is empty: no export there",
        "kafka://127.0.0.1:1": "no Kafka broker answered at 127.0.0.1:1",
    }
    outputs = [tmp_path / f"out{i}" for i in range(len(cases))]
    args = [arg for case, out in zip(cases, outputs, strict=True) for arg in (case, str(out))]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    result = subprocess.run(
        [sys.executable, "-c", _CONSOLE_DRIVER, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    sections = result.stderr.split("=== ")[1:]
    assert len(sections) == 2 * len(cases), result.stderr[-3000:]
    for (export, expected), console, ending in zip(
        cases.items(), sections[0::2], sections[1::2], strict=True
    ):
        assert ending.strip() == "exit 2", console
        lines = [line for line in console.splitlines() if line.strip()]
        assert lines[0] == export
        assert lines[-1].startswith("sharestate: error: ") and expected in lines[-1], console
        # From the run's start (Spark's own start-up lines come before, in the first case).
        run = lines[next(i for i, line in enumerate(lines) if " sharestate engine: " in line) :]
        noise = [line for line in run if line.startswith("\tat ") or "Exception" in line]
        assert noise == [] or noise == [lines[-1]], noise[:5]
        assert not any(" WARN " in line for line in run), console
        # The engine, the streams' start, the read, the error (and Spark's one ERROR line).
        assert len(run) <= 5, console
    for out in outputs:  # nothing written (the output's lock file aside)
        assert not out.exists() or [p.name for p in out.iterdir()] == ["_lock"], out
