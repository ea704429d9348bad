"""One run at a time per output folder: `output_lock` holds `<output>/_lock` while a run
writes there.

Delta makes each table's commit atomic, but a run commits a dozen tables one after another;
two runs at once would interleave them (and both append the same new records). So a run
takes the folder's lock before it reads anything, and a second run stops at once with one
line naming the holder (exit 2).

Within one process the lock is re-entrant (the command line takes it before starting Spark,
and the job takes it again). On the local file system the lock is `flock` on the file:
exclusive between processes, and released by the kernel when its holder dies, so a killed
run (SIGKILL, out of memory) leaves no stale lock behind. Elsewhere the lock is the file's
existence, created through Hadoop's `create(overwrite=false)`, which HDFS makes atomic;
object stores do not (their file systems check, then create), so there two runs started
within the same moment can both get it, and a killed run leaves the file: the message names
it, with the holder's host, process and start time, for the operator to remove.
"""

from __future__ import annotations

import errno
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import IO, Any, Final

from sharestate.errors import UsageError
from sharestate.io.files import local_path

LOCK_FILE: Final = "_lock"
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
    is not on the local file system (Hadoop's FileSystem makes the lock file there)."""
    from sharestate.io.store import is_local

    if is_local(output):
        with _local_lock(local_path(output)):
            yield
        return
    if spark is None:
        raise ValueError(f"{output}: a lock outside the local file system needs the session")
    with _hadoop_lock(spark, output):
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
def _hadoop_lock(spark: Any, output: str) -> Iterator[None]:
    from sharestate.io.files import hadoop_file_system

    path = f"{output.rstrip('/')}/{LOCK_FILE}"
    fs, make_path = hadoop_file_system(spark, path)
    lock = make_path(path)
    try:
        stream = fs.create(lock, False)
    except Exception as err:
        if "FileAlreadyExists" not in str(err) and not fs.exists(lock):
            raise
        holder = None
        try:
            reader = fs.open(lock)
            holder = json.loads(
                spark.sparkContext._jvm.org.apache.commons.io.IOUtils.toString(reader, "UTF-8")
            )
            reader.close()
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
