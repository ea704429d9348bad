"""The `sharestate` command (also `python -m sharestate`).

    sharestate replay --share-state PATH [--consumer-offsets PATH] --output DIR [options]
    sharestate follow --share-state PATH --output DIR [--every SPAN | --once] [options]
    sharestate sample --output DIR

Errors in options or inputs print one line and exit with code 2; a run whose records are
bad still succeeds (bad records are data, in `quarantine`).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn

from sharestate.job.options import add_replay_arguments, config_from_args

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sharestate.job.config import JobConfig
    from sharestate.sample.exports import SampleSpec


def _parser() -> argparse.ArgumentParser:
    from sharestate import __version__
    from sharestate.sample.exports import SampleSpec

    parser = argparse.ArgumentParser(
        prog="sharestate", description="Decode and audit exported Kafka share-group state."
    )
    parser.add_argument("--version", action="version", version=f"sharestate {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    replay = commands.add_parser(
        "replay",
        help="decode the exports and write the tables",
        description="Decode exported Kafka share-group state, replay it as Kafka's share "
        "coordinator does, and write the tables under --output. Options can also come from "
        "a TOML file (--config); the command line wins.",
    )
    add_replay_arguments(replay)
    replay.add_argument(
        "--spark-conf",
        metavar="FILE",
        action="append",
        help="spark-defaults style file of settings for the local session; give it more than "
        "once for several files, applied in order (default: conf/spark-job.conf, then "
        "conf/spark-local.conf, those present)",
    )
    _add_follow_command(commands)
    _add_sample_command(commands, SampleSpec())
    return parser


def _add_follow_command(commands: Any) -> None:
    """`sharestate follow`: the replay's options, each round an incremental run."""
    follow = commands.add_parser(
        "follow",
        help="keep the tables up to date: an incremental run every interval, until stopped",
        description="Run `replay --mode incremental` every --every on one session until "
        "stopped (SIGTERM or Ctrl-C: the round in progress ends, no other starts; again: "
        "the round stops and puts back what it wrote). Each round reads what the inputs' "
        "streams deliver: a Parquet folder's or Delta table's new files, or a kafka:// "
        "topic's new records, which the output then keeps after Kafka prunes them.",
    )
    add_replay_arguments(follow)
    follow.add_argument(
        "--every",
        default="1m",
        metavar="SPAN",
        help="how often a round starts, e.g. 30s, 5m (default: %(default)s)",
    )
    follow.add_argument(
        "--once",
        action="store_true",
        help="one round, then stop: what a scheduler starts",
    )
    follow.add_argument(
        "--spark-conf",
        metavar="FILE",
        action="append",
        help="spark-defaults style file of settings for the local session (as for replay)",
    )


def _add_sample_command(commands: Any, defaults: SampleSpec) -> None:
    """`sharestate sample`: every option explained, with its default (`SampleSpec`'s)."""
    sample = commands.add_parser(
        "sample",
        help="write sample exports to try the job on",
        description="Write sample exports of __share_group_state (DIR/share_state) and "
        "__consumer_offsets (DIR/consumer_offsets) as Parquet, with the schema of Spark's "
        "Kafka source: simulated share groups fetching, acknowledging, releasing and "
        "rejecting records, plus one duplicated and two damaged rows.",
    )
    sample.add_argument(
        "--output", required=True, metavar="DIR", help="folder to write the two exports in"
    )
    sample.add_argument(
        "--records",
        type=int,
        default=defaults.records,
        metavar="N",
        help="about this many __share_group_state records (default: %(default)s)",
    )
    sample.add_argument(
        "--share-partitions",
        type=int,
        default=defaults.share_partitions,
        metavar="N",
        help="share-partitions (group, topic, partition) the records are spread over "
        "(default: %(default)s)",
    )
    sample.add_argument(
        "--skew",
        type=float,
        default=defaults.skew,
        metavar="S",
        help="Zipf exponent of how records spread over share-partitions: a few hot ones get "
        "most; 0: all equal (default: %(default)s)",
    )
    sample.add_argument(
        "--seed",
        type=int,
        default=defaults.seed,
        metavar="N",
        help="random seed: the same seed and options give the same exports (default: %(default)s)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    from sharestate.job import launch

    launch.configure_logging()
    args = _parser().parse_args(argv)
    if args.command == "sample":
        return launch.run_guarded("sharestate", lambda: _sample(args))
    if args.command == "follow":
        return launch.run_guarded("sharestate", lambda: _follow(args))
    return launch.run_guarded("sharestate", lambda: _replay(args))


def run() -> NoReturn:
    """The `sharestate` command as a process (the console script, `python -m sharestate`):
    `main`, then the process ends through `launch.exit_process`. On a Databricks runtime
    (a Python wheel task calls this entry point inside the driver's own Python) the
    process is not ended: `SystemExit` with the code, as the task expects."""
    from sharestate.job import launch

    try:
        code = main()
    except SystemExit as stop:  # argparse's --help, --version and usage errors
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr)
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except Exception:
        traceback.print_exc()
        code = 1
    if launch.platform_session_expected():
        sys.exit(code)
    launch.exit_process(code)


def _sample(args: argparse.Namespace) -> None:
    from sharestate.sample.exports import SampleSpec, write_sample

    counts = write_sample(
        args.output,
        SampleSpec(
            records=args.records,
            share_partitions=args.share_partitions,
            skew=args.skew,
            seed=args.seed,
        ),
    )
    print(
        f"sample exports written under {args.output}: "
        + ", ".join(f"{name} {rows} rows" for name, rows in counts.items())
    )


def _replay(args: argparse.Namespace) -> int:
    """The replay command: the output's lock, then (incremental) whether anything is new,
    both before Spark starts; then the job."""
    from sharestate.io.lock import output_lock
    from sharestate.job import launch

    config = config_from_args(args)
    output = config.validate_for_run()
    remote = launch.remote_url(args.remote)
    if remote is not None or launch.platform_session_expected():
        # A session this process does not build: the job takes the output's lock and
        # tells what is new through it.
        from sharestate.job.run import main as run_job

        spark = launch.remote_session(remote)
        launch.quiet_console(spark)
        with _memory_failures_said(config, _driver_memory(spark)):
            run_job(spark, config, show=args.show)
        return 0
    increment = False
    with output_lock(output) if _local(output) else _no_lock():
        if config.mode == "incremental" and _local(output):
            from sharestate.io.checkpoint import read_checkpoint
            from sharestate.job.incremental import nothing_new, why_not_incremental

            checkpoint = read_checkpoint(None, output)
            if nothing_new(config, checkpoint):
                assert checkpoint is not None
                when = (
                    checkpoint.written_at.isoformat() if checkpoint.written_at else "the last run"
                )
                print(f"sharestate: nothing new in the exports since {when}: no table written")
                return 0
            increment = why_not_incremental(config, checkpoint) is None
        from sharestate.job.run import main as run_job
        from sharestate.job.session import local_session

        # An increment on a stored output is the one short run of its process: its driver
        # JVM is started for that (docs/running.md).
        spark = local_session(conf_file=args.spark_conf, short_run=increment)
        launch.quiet_console(spark)
        with _memory_failures_said(config, _driver_memory(spark)):
            run_job(spark, config, show=args.show)
    return 0


def _follow(args: argparse.Namespace) -> int:
    """The follow command: incremental rounds on one session until stopped
    (`sharestate.job.follow`)."""
    import threading

    from sharestate.errors import UsageError
    from sharestate.job import launch
    from sharestate.job.config import parse_span
    from sharestate.job.follow import follow, stop_between_rounds, waiting_for_topics
    from sharestate.job.run import main as run_job

    if args.mode not in (None, "incremental"):
        raise UsageError(f"--mode {args.mode}: follow runs incremental rounds only")
    args.mode = "incremental"
    config = config_from_args(args)
    every = parse_span(args.every, "--every")
    remote = launch.remote_url(args.remote)
    if remote is not None or launch.platform_session_expected():
        spark = launch.remote_session(remote)
    else:
        from sharestate.job.session import local_session

        spark = local_session(conf_file=args.spark_conf)
    launch.quiet_console(spark)
    stop = threading.Event()
    with stop_between_rounds(stop), _memory_failures_said(config, _driver_memory(spark)):
        round_ = waiting_for_topics(lambda: run_job(spark, config, show=args.show))
        follow(round_, every, once=args.once, stop=stop)
    return 0


@contextmanager
def _memory_failures_said(config: JobConfig, driver_memory: str | None) -> Iterator[None]:
    """A run that fails because the driver ran out of memory ends with one line saying so
    (`RunFailed`); any other failure goes on as it is."""
    from sharestate.errors import RunFailed, UsageError
    from sharestate.job import launch

    try:
        yield
    except UsageError:
        raise
    except Exception as err:
        cause = launch.out_of_memory_cause(err)
        if cause is None:
            raise
        inputs = [path for path in (config.share_state, config.consumer_offsets) if path]
        raise RunFailed(launch.out_of_memory_message(cause, inputs, driver_memory)) from err


def _driver_memory(spark: SparkSession) -> str | None:
    """spark.driver.memory as the session has it, read while its driver answers."""
    try:
        return spark.conf.get("spark.driver.memory", None)
    except Exception:  # a session that will not say
        return None


def _local(path: str) -> bool:
    from sharestate.io.store import is_local

    return is_local(path)


@contextmanager
def _no_lock() -> Iterator[None]:
    # Outside the local file system the lock needs Hadoop's file system: the job takes it.
    yield


if __name__ == "__main__":
    run()
