"""The `sharestate` command (also `python -m sharestate`).

    sharestate replay --share-state PATH [--consumer-offsets PATH] --output DIR [options]
    sharestate sample --output DIR

Errors in options or inputs print one line and exit with code 2; a run whose records are
bad still succeeds (bad records are data, in `quarantine`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

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
        action="append",
        help="spark-defaults style file of settings for the local session; give it more than "
        "once for several files, applied in order (default: conf/spark-job.conf, then "
        "conf/spark-local.conf, those present)",
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
    from sharestate.job import launch

    launch.configure_logging()
    args = _parser().parse_args(argv)
    if args.command == "sample":
        return launch.run_guarded("sharestate", lambda: _sample(args))
    return launch.run_guarded("sharestate", lambda: _replay(args))


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


def _replay(args: argparse.Namespace) -> None:
    from sharestate.job import launch
    from sharestate.job.run import main as run_job
    from sharestate.job.session import local_session

    config = config_from_args(args)
    spark = local_session(conf_file=args.spark_conf)
    launch.quiet_console(spark)
    run_job(spark, config, show=args.show)


if __name__ == "__main__":
    sys.exit(main())
