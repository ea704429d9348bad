"""What the entry points set up around a run: Spark settings files, the session spark-submit
hands over, the console."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from sharestate.job import cli
from sharestate.job.config import build_config, read_config_file
from sharestate.job.launch import session_defaults
from sharestate.job.session import (
    CLASS_ARCHIVE,
    SHORT_RUN_JAVA_OPTIONS,
    local_settings,
    read_spark_defaults,
    spark_conf_files,
)
from sharestate.sample.exports import SampleSpec
from tests.support.cli import run_sharestate
from tests.support.documented import fenced_block, shell_commands
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


def test_version_and_help_say_what_a_user_needs(capsys: pytest.CaptureFixture[str]) -> None:
    from sharestate import __version__

    for argv in (["--version"], ["sample", "--help"], ["replay", "--help"]):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(argv)
        assert exit_info.value.code == 0
    printed = capsys.readouterr().out
    version, rest = printed.split("\n", 1)
    assert version == f"sharestate {__version__}"
    sample_help, replay_help = rest.split("usage: sharestate replay")
    # Every sample option says what it is, and those with a default show it.
    flat = " ".join(sample_help.split())
    defaults = SampleSpec()
    for option, default in (
        ("--records N", defaults.records),
        ("--share-partitions N", defaults.share_partitions),
        ("--skew S", defaults.skew),
        ("--seed N", defaults.seed),
    ):
        assert re.search(rf"{option} \w[^(]*(\([^d][^)]*\)[^(]*)*\(default: {default}\)", flat), (
            option
        )
    assert re.search(r"--output DIR \w", flat)
    flat = " ".join(replay_help.split())
    assert "incremental reads only what arrived since the last complete run's checkpoint" in flat
    assert "needs --output-format delta" in flat
    assert re.search(r"--show N print N rows of share_partition_state at the end \(default 0", flat)


def test_the_example_config_describes_what_exists() -> None:
    example = ROOT / "conf" / "sharestate.example.toml"
    text = example.read_text()
    assert "planned" not in text and "not yet available" not in text
    assert "incremental" in text
    config = build_config(read_config_file(example), {})
    assert config.mode == "full" and config.kafka_timeout_seconds == 60.0


def test_the_readmes_cluster_command_names_the_jars_set_up_puts_in_place() -> None:
    """The block `make test-cluster` runs as written: `make dist`, the sample, spark-submit
    with the job's settings file and jars that `make setup` puts in .jars/."""
    commands = shell_commands(fenced_block(ROOT / "README.md", "<!-- cluster-command:", "bash"))
    assert [c.split()[:2] for c in commands] == [
        ["make", "dist"],
        ["sharestate", "sample"],
        ["spark-submit", "--properties-file"],
    ]
    submit = commands[-1].split()
    assert submit[submit.index("--properties-file") + 1] == "conf/spark-job.conf"
    assert "--load-spark-defaults" in submit
    jars = submit[submit.index("--jars") + 1].split(",")
    assert [jar for jar in jars if not (ROOT / jar).is_file()] == []
    assert {"delta-spark_4.2_2.13-4.4.0.jar", "sharestate-jvm.jar"} <= {
        jar.rsplit("/", 1)[-1] for jar in jars
    }
    assert submit[submit.index("--py-files") + 1] == "dist/sharestate.zip"


_ENDS_THROUGH_EXIT_PROCESS = """
import atexit, sys
from sharestate.job import launch
atexit.register(lambda: print("exit handler ran"))
sys.stdout.write("not yet flushed; ")
launch.exit_process(3)
"""


def test_the_command_ends_with_its_code_after_its_handlers_and_its_output() -> None:
    # exit_process skips the interpreter's teardown (where native thread pools can abort a
    # finished run): what the teardown would have done for us must happen before it.
    ended = subprocess.run(
        [sys.executable, "-c", _ENDS_THROUGH_EXIT_PROCESS],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert ended.returncode == 3, ended.stderr
    assert ended.stdout == "not yet flushed; exit handler ran\n"


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["--version"], 0, "sharestate "),
        (["replay", "--no-such-option"], 2, "unrecognized arguments: --no-such-option"),
    ],
)
def test_python_dash_m_sharestate_exits_with_the_commands_code(
    argv: list[str], code: int, says: str
) -> None:
    ended = run_sharestate(*argv, timeout=60)
    assert ended.returncode == code, ended.stderr
    assert says in ended.stdout + ended.stderr


def test_a_local_driver_starts_from_the_class_archive_set_up_wrote(tmp_path: Path) -> None:
    jars = tmp_path / "jars"
    jars.mkdir()
    for name in ("delta-spark_4.2_2.13-4.4.0.jar", "sharestate-jvm.jar"):
        (jars / name).touch()
    class_path = f"{jars / 'delta-spark_4.2_2.13-4.4.0.jar'}:{jars / 'sharestate-jvm.jar'}"
    no_files: list[Path] = []

    def settings(**conf: str) -> dict[str, str]:
        return local_settings(conf=conf, conf_file=no_files, jars_dir=jars)

    # No archive yet: the jars are loaded as before, the driver's class path untouched.
    assert "spark.driver.extraClassPath" not in settings()
    assert "spark.driver.extraJavaOptions" not in settings()
    archive = jars / CLASS_ARCHIVE
    archive.touch()
    assert settings()["spark.driver.extraClassPath"] == class_path
    assert settings()["spark.driver.extraJavaOptions"] == f"-XX:SharedArchiveFile={archive}"
    # The caller's JVM options are kept, after the archive's.
    assert settings(**{"spark.driver.extraJavaOptions": "-Xss4m"})[
        "spark.driver.extraJavaOptions"
    ] == (f"-XX:SharedArchiveFile={archive} -Xss4m")
    # A class path of the caller's own is not the archive's: no archive then.
    own = settings(**{"spark.driver.extraClassPath": "/opt/extra.jar"})
    assert own["spark.driver.extraClassPath"] == "/opt/extra.jar"
    assert "spark.driver.extraJavaOptions" not in own
    without = local_settings(conf_file=no_files, jars_dir=jars, class_archive=False)
    assert "spark.driver.extraJavaOptions" not in without
    assert settings()["spark.jars"] == class_path.replace(":", ",")
    # Jars that are links to files elsewhere: the archive is the folder's own.
    linked = tmp_path / "linked"
    linked.mkdir()
    for jar in jars.glob("*.jar"):
        (linked / jar.name).symlink_to(jar)
    (linked / CLASS_ARCHIVE).touch()
    from_links = local_settings(conf_file=no_files, jars_dir=linked)
    assert from_links["spark.driver.extraJavaOptions"] == (
        f"-XX:SharedArchiveFile={linked / CLASS_ARCHIVE}"
    )


def test_a_local_driver_for_one_short_run_compiles_quickly(
    tmp_path: Path,
) -> None:
    no_files: list[Path] = []

    def options(**conf: str) -> str | None:
        settings = local_settings(conf=conf, conf_file=no_files, jars_dir=tmp_path, short_run=True)
        return settings.get("spark.driver.extraJavaOptions")

    assert options() == SHORT_RUN_JAVA_OPTIONS
    assert "spark.driver.extraJavaOptions" not in local_settings(
        conf_file=no_files, jars_dir=tmp_path
    )
    # JVM options of the caller's own are the caller's choice: none are added to them.
    assert options(**{"spark.driver.extraJavaOptions": "-Xss4m"}) == "-Xss4m"
    # With the class archive, its option comes first.
    (tmp_path / "sharestate-jvm.jar").touch()
    (tmp_path / CLASS_ARCHIVE).touch()
    assert options() == f"-XX:SharedArchiveFile={tmp_path / CLASS_ARCHIVE} {SHORT_RUN_JAVA_OPTIONS}"


@pytest.mark.parametrize(
    ("mode", "checkpoint", "short"),
    [("incremental", "stored", True), ("incremental", None, False), ("full", "stored", False)],
)
def test_the_command_starts_a_short_run_driver_for_an_increment_only(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    checkpoint: str | None,
    short: bool,
) -> None:
    from sharestate.io import checkpoint as checkpoints
    from sharestate.job import incremental, session

    class Started(Exception):
        pass

    def local_session(**kwargs: object) -> None:
        raise Started(kwargs["short_run"])

    monkeypatch.setattr(checkpoints, "read_checkpoint", lambda spark, output: checkpoint)
    monkeypatch.setattr(incremental, "nothing_new", lambda config, stored: False)
    monkeypatch.setattr(
        incremental,
        "why_not_incremental",
        lambda config, stored: None if stored else "there is no complete earlier run to go on from",
    )
    monkeypatch.setattr(session, "local_session", local_session)
    (tmp_path / "export").mkdir()
    args = cli._parser().parse_args(
        [
            "replay",
            "--share-state",
            str(tmp_path / "export"),
            "--output",
            str(tmp_path / "out"),
            "--mode",
            mode,
        ]
    )
    with pytest.raises(Started) as started:
        cli._replay(args)
    assert started.value.args == (short,)


def test_a_run_out_of_memory_ends_with_one_line_and_exit_code_1(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The driver's OutOfMemoryError, as Py4J hands it over (a Java trace in the message),
    becomes one line naming what ran out, the exports' size and the setting to raise; the
    trace goes to the file the line names."""
    from sharestate.job import launch, session
    from sharestate.job import run as run_module

    class Conf:
        def get(self, key: str, default: str | None = None) -> str | None:
            return "6g" if key == "spark.driver.memory" else default

    class Session:
        conf = Conf()

    java_trace = (
        "An error occurred while calling o412.save.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 3 in stage "
        "41.0 failed 1 times, most recent failure: Lost task 3.0: java.lang.OutOfMemoryError: "
        "Java heap space\n\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)\n"
    )

    def run_out(*args: object, **kwargs: object) -> None:
        try:
            raise RuntimeError(java_trace)
        except RuntimeError as err:
            raise RuntimeError("the increment failed") from err

    monkeypatch.setattr(session, "local_session", lambda **kwargs: Session())
    monkeypatch.setattr(launch, "quiet_console", lambda spark: None)
    monkeypatch.setattr(run_module, "main", run_out)
    export = tmp_path / "export"
    export.mkdir()
    (export / "part-0.parquet").write_bytes(b"x" * 3 * 2**20)
    code = cli.main(["replay", "--share-state", str(export), "--output", str(tmp_path / "out")])
    assert code == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(
        "sharestate: error: the run ran out of memory reading 3 MiB of exports: "
        "java.lang.OutOfMemoryError: Java heap space. Raise spark.driver.memory (now 6g): "
    ), line
    trace = Path(line.rsplit("(the trace: ", 1)[1].rstrip(")"))
    assert "o412.save" in trace.read_text() and "the increment failed" in trace.read_text()
    trace.unlink()


@pytest.mark.parametrize(
    ("failure", "cause"),
    [
        (ConnectionRefusedError(111, "Connection refused"), "stopped answering"),
        (RuntimeError("Answer from Java side is empty"), "stopped answering"),
        (RuntimeError("GC overhead limit exceeded"), "GC overhead limit exceeded"),
        (RuntimeError("[DELTA_CONCURRENT_APPEND] a concurrent writer"), None),
    ],
)
def test_only_failures_of_memory_are_said_as_such(failure: Exception, cause: str | None) -> None:
    from sharestate.job.launch import out_of_memory_cause

    found = out_of_memory_cause(failure)
    assert found is None if cause is None else cause in (found or "")
