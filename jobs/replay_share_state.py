"""spark-submit entry point of the replay job.

    spark-submit --py-files dist/sharestate.zip jobs/replay_share_state.py \
        --share-state PATH [--consumer-offsets PATH] --output DIR [options]

Master, packages and jars come from spark-submit (`--master`, `--jars`, `--conf`), never
from here. Option errors print one line and exit with code 2.
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession

from sharestate.errors import UsageError
from sharestate.job import main
from sharestate.job.options import parse_args


def run(argv: list[str]) -> int:
    try:
        config = parse_args(argv)
        main(SparkSession.builder.appName("sharestate-replay").getOrCreate(), config)
    except UsageError as err:
        print(f"replay_share_state: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
