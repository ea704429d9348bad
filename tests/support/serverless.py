"""A Spark Connect client that refuses caching and settings as Databricks serverless does.

Serverless compute answers `persist`/`cache` (and checkpoints) with
`[NOT_SUPPORTED_WITH_SERVERLESS]` and a `spark.conf.set` of all but a handful of settings
with `[CONFIG_NOT_AVAILABLE]`, both as Spark Connect `AnalysisException`s, before any work.
`refuse_like_serverless()` makes this process's Connect client answer those calls the same
way (the server is a plain local one), so that a run on it shows what the job does where it
cannot cache or set anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

#: Settings serverless lets a session set (the documented handful); the rest are refused.
ALLOWED: Final = frozenset(
    {
        "spark.sql.session.timeZone",
        "spark.sql.ansi.enabled",
        "spark.sql.legacy.timeParserPolicy",
        "spark.sql.shuffle.partitions",
        "spark.sql.files.maxPartitionBytes",
    }
)
#: Counts of the refusals made, by call: the tests check that the run met them.
REFUSED: dict[str, int] = {}


def _refusal(call: str, condition: str, message: str) -> Exception:
    from pyspark.errors.exceptions.connect import AnalysisException

    REFUSED[call] = REFUSED.get(call, 0) + 1
    return AnalysisException(
        message=f"[{condition}] {message} SQLSTATE: 0A000",
        errorClass=condition,
        messageParameters={},
        sql_state="0A000",
    )


def _refuse_caching(call: str) -> Callable[..., Any]:
    def refused(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise _refusal(
            call,
            "NOT_SUPPORTED_WITH_SERVERLESS",
            f"{call.upper()} TABLE is not supported on serverless compute.",
        )

    return refused


def refuse_like_serverless() -> None:
    """From now on in this process, Connect DataFrames refuse `persist`, `cache`,
    `localCheckpoint` and `checkpoint`, and the runtime config refuses to set or unset any
    setting outside ALLOWED."""
    from pyspark.sql.connect.conf import RuntimeConf
    from pyspark.sql.connect.dataframe import DataFrame

    for call in ("persist", "cache", "localCheckpoint", "checkpoint"):
        setattr(DataFrame, call, _refuse_caching(call))
    set_one, set_all, unset = RuntimeConf.set, RuntimeConf._set_all, RuntimeConf.unset

    def _check(key: str) -> None:
        if key not in ALLOWED:
            raise _refusal(
                "conf.set",
                "CONFIG_NOT_AVAILABLE",
                f"Configuration {key} is not available.",
            )

    def checked_set(self: Any, key: str, value: Any) -> None:
        _check(key)
        set_one(self, key, value)

    def checked_set_all(self: Any, configs: dict[str, Any], silent: bool) -> None:
        for key in configs:
            _check(key)
        set_all(self, configs, silent)

    def checked_unset(self: Any, key: str) -> None:
        _check(key)
        unset(self, key)

    RuntimeConf.set = checked_set  # type: ignore[method-assign]
    RuntimeConf._set_all = checked_set_all  # type: ignore[method-assign]
    RuntimeConf.unset = checked_unset  # type: ignore[method-assign]
