"""The `sharestate` command (also `python -m sharestate`).

    sharestate replay --share-state PATH [--consumer-offsets PATH] --output DIR [options]
    sharestate sample --output DIR

Errors in options or inputs print one line and exit with code 2; a run whose records are
bad still succeeds (bad records are data, in `quarantine`).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from sharestate.errors import UsageError
from sharestate.job.options import add_replay_arguments, config_from_args


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sharestate", description="Decode and audit exported Kafka share-group state."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    replay = commands.add_parser("replay", help="decode the exports and write the tables")
    add_replay_arguments(replay)
    replay.add_argument(
        "--spark-conf",
        metavar="FILE",
        help="spark-defaults style file for the local session "
        "(default: conf/spark-defaults.conf if present)",
    )
    sample = commands.add_parser("sample", help="write sample exports to try the job on")
    sample.add_argument("--output", required=True, metavar="DIR")
    sample.add_argument(
        "--records", type=int, default=3_000, help="about this many share-state records"
    )
    sample.add_argument("--share-partitions", type=int, default=48)
    sample.add_argument(
        "--skew", type=float, default=1.0, help="Zipf exponent of log length (0: all equal)"
    )
    sample.add_argument("--seed", type=int, default=7)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    args = _parser().parse_args(argv)
    try:
        if args.command == "sample":
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
            return 0
        return _replay(args)
    except UsageError as err:
        print(f"sharestate: error: {err}", file=sys.stderr)
        return 2


def _replay(args: argparse.Namespace) -> int:
    """The replay command: the output's lock, then (incremental) whether anything is new,
    both before Spark starts; then the job."""
    from sharestate.io.lock import output_lock

    config = config_from_args(args)
    output = config.validate_for_run()
    with output_lock(output) if _local(output) else _no_lock():
        if config.mode == "incremental" and _local(output):
            from sharestate.io.checkpoint import read_checkpoint
            from sharestate.job.incremental import nothing_new

            checkpoint = read_checkpoint(None, output)
            if nothing_new(config, checkpoint):
                assert checkpoint is not None
                when = (
                    checkpoint.written_at.isoformat() if checkpoint.written_at else "the last run"
                )
                print(f"sharestate: nothing new in the exports since {when}: no table written")
                return 0
        from sharestate.job.run import main as run_job
        from sharestate.job.session import local_session

        spark = local_session(conf_file=args.spark_conf)
        run_job(spark, config, show=args.show)
    return 0


def _local(path: str) -> bool:
    from sharestate.io.store import is_local

    return is_local(path)


@contextmanager
def _no_lock() -> Iterator[None]:
    # Outside the local file system the lock needs Hadoop's file system: the job takes it.
    yield


if __name__ == "__main__":
    sys.exit(main())
