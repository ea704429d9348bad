"""One run at a time per output folder: `output_lock` holds `<output>/_lock` while a run
writes there.

Delta makes each table's commit atomic, but a run commits a dozen tables one after another;
two runs at once would interleave them (and both append the same new records). So a run
takes the folder's lock before it reads anything, and a second run stops at once with one
line naming the holder (exit 2).

Within one process the lock is re-entrant (the command line takes it before starting Spark,
and the job takes it again). On the local file system the lock is `flock` on the file:
exclusive between processes, and released by the kernel when its holder dies, so a killed
run (SIGKILL, out of memory) leaves no stale lock behind. Elsewhere, on a classic session,
the lock is the file's existence, created through Hadoop's `create(overwrite=false)`, which
HDFS makes atomic; object stores do not (their file systems check, then create), so there
two runs started within the same moment can both get it. A Spark Connect session reaches no
file system of its own: there the lock is a row of the Delta table `<output>/_run_lock`,
inserted by a MERGE that Delta's conflict checks make atomic (of two runs, the second to
commit fails). Either way a killed run leaves its lock behind: the message names it, with
the holder's host, process and start time, for the operator to remove.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import IO, Any, Final

from sharestate.errors import UsageError
from sharestate.io.files import local_path

LOCK_FILE: Final = "_lock"
#: The lock of a session that reaches no file system (Spark Connect): a Delta table.
LOCK_TABLE: Final = "_run_lock"
#: The locks this process holds (folder -> how many `with` blocks hold it): the command line
#: takes the lock before starting Spark, and the job it then runs takes it again.
_HELD: dict[str, int] = {}


class OutputLockedError(UsageError):
    """Another run holds the output folder's lock."""


def _holder() -> dict[str, Any]:
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _describe(holder: dict[str, Any] | None) -> str:
    if not holder:
        return "another run"
    return (
        f"another run (process {holder.get('pid')} on {holder.get('host')}, started"
        f" {holder.get('started_at')})"
    )


@contextmanager
def output_lock(output: str, spark: Any = None) -> Iterator[None]:
    """Hold the lock of the output folder `output` for the `with` block; raise
    `OutputLockedError` if another run holds it. `spark`: the session, for an output that
    is not on the local file system (Hadoop's FileSystem makes the lock file there, or
    Delta the lock row)."""
    from sharestate.io.store import is_local

    if is_local(output, spark):
        with _local_lock(local_path(output)):
            yield
        return
    if spark is None:
        raise ValueError(f"{output}: a lock outside the local file system needs the session")
    from sharestate.backend import backend

    hadoop = backend(spark).hadoop_file_system(output)
    if hadoop is not None:
        with _hadoop_lock(hadoop, output):
            yield
        return
    with _delta_lock(spark, output):
        yield


@contextmanager
def _local_lock(folder: str) -> Iterator[None]:
    import fcntl

    os.makedirs(folder, exist_ok=True)
    path = os.path.join(os.path.realpath(folder), LOCK_FILE)
    if _HELD.get(path):
        _HELD[path] += 1
        try:
            yield
        finally:
            _HELD[path] -= 1
        return
    handle: IO[str] = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held across the yield
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            raise OutputLockedError(
                f"--output {folder}: {_describe(_read_holder(path))} is writing there; wait"
                " for it to end (two runs at once would mix their tables)"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(_holder()))
        handle.flush()
        _HELD[path] = 1
        yield
    finally:
        _HELD.pop(path, None)
        handle.close()  # closing releases the flock


def _read_holder(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        holder = json.loads(text) if text.strip() else None
        return holder if isinstance(holder, dict) else None
    except (OSError, ValueError):
        return None


@contextmanager
def _hadoop_lock(hadoop: tuple[Any, Any], output: str) -> Iterator[None]:
    from sharestate.io.files import HadoopFileSystem

    fs, make_path = hadoop
    path = f"{output.rstrip('/')}/{LOCK_FILE}"
    lock = make_path(path)
    try:
        stream = fs.create(lock, False)
    except Exception as err:
        if "FileAlreadyExists" not in str(err) and not fs.exists(lock):
            raise
        holder = None
        try:
            holder = json.loads(HadoopFileSystem(fs, make_path).read_text(path))
        except Exception:  # the message is what matters; the holder is a detail
            holder = None
        raise OutputLockedError(
            f"--output {output}: {_describe(holder)} is writing there, or was killed and left"
            f" {path} behind; wait for it, or remove that file if no run is writing there"
        ) from None
    try:
        stream.write(bytearray(json.dumps(_holder()).encode("utf-8")))
        stream.close()
        yield
    finally:
        fs.delete(lock, False)


@contextmanager
def _delta_lock(spark: Any, output: str) -> Iterator[None]:
    """The lock as a row of the Delta table `<output>/_run_lock` (one row while held)."""
    from sharestate.io.tables import delta_table_sql

    held = delta_table_sql(f"{output.rstrip('/')}/{LOCK_TABLE}")
    mine = json.dumps({**_holder(), "token": uuid.uuid4().hex})
    spark.sql(f"CREATE TABLE IF NOT EXISTS {held} (lock STRING, holder STRING) USING delta")
    claim = spark.createDataFrame([("run", mine)], "lock string, holder string")
    try:
        spark.sql(
            f"MERGE INTO {held} t USING {{claim}} s ON t.lock = s.lock"
            " WHEN NOT MATCHED THEN INSERT (lock, holder) VALUES (s.lock, s.holder)",
            claim=claim,
        )
    except Exception as err:  # another run's MERGE committed first
        if "Concurrent" not in str(err):
            raise
    rows = spark.sql(f"SELECT holder FROM {held}").collect()
    holders = [str(row["holder"]) for row in rows]
    if holders != [mine]:
        other = next((h for h in holders if h != mine), None)
        holder = json.loads(other) if other else None
        raise OutputLockedError(
            f"--output {output}: {_describe(holder)} is writing there, or was killed and left"
            f" its lock in {held}; wait for it, or run `DELETE FROM {held}` if no run is"
            " writing there"
        )
    try:
        yield
    finally:
        # A literal: Delta's commands take no bound parameters.
        spark.sql(f"DELETE FROM {held} WHERE holder = {_sql_string(mine)}")


def _sql_string(text: str) -> str:
    """`text` as a Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
