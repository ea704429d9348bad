"""spark-submit entry point of the replay job.

    spark-submit --properties-file conf/spark-job.conf --load-spark-defaults \
        --jars DELTA_JARS,.jars/sharestate-jvm.jar --py-files dist/sharestate.zip \
        jobs/replay_share_state.py --share-state PATH [--consumer-offsets PATH] --output DIR

(the whole command, with the jars named: README, and docs/running.md). Master, packages and
jars come from spark-submit (`--master`, `--jars`, `--conf`), never from here. With
`--remote sc://HOST:PORT` (or the SPARK_REMOTE variable) the script runs on that Spark
Connect server instead, with plain `python` (no spark-submit). The session
gets Delta's two session settings when Delta's jar is there and they are not set, no
progress bar and Spark's log at WARN unless set (`sharestate.job.launch`). Option and input
errors print one line and exit with code 2.
"""

from __future__ import annotations

import sys

from sharestate.job import launch
from sharestate.job.options import parse_args_and_remote


def run(argv: list[str]) -> int:
    launch.configure_logging()

    def work() -> None:
        from sharestate.job import main

        config, remote = parse_args_and_remote(argv)
        url = launch.remote_url(remote)
        if url is not None:
            spark = launch.remote_session(url)
        else:
            spark = launch.submitted_session("sharestate-replay")
        launch.quiet_console(spark)
        main(spark, config)

    return launch.run_guarded("replay_share_state", work)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
