"""What the input checks and the output's writes ask of a file system, and Spark's errors
about files.

`file_system(spark, path)` is the one way to a file system: `os` where the path is local to
this process and to Spark (`sharestate.backend.Backend.is_local`), Hadoop's FileSystem on a
classic session, and nothing on a Spark Connect session for a path only Spark reaches (the
callers then go through Spark's own sources, or refuse what needs renames before any work).
A path inside a Delta table is refused with the table's path; a file Spark cannot read
becomes one line naming the file, the option and the reason.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, Protocol
from urllib.parse import urlparse

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from sharestate.backend import backend, refused, say_once
from sharestate.errors import InputError, SparkSetupError

#: How many sub-folders a hint names.
_HINTED_FOLDERS: Final = 3

DELTA_MISSING: Final = (
    "Delta Lake is not available in this Spark session: add the jar "
    "io.delta:delta-spark_4.2_2.13:4.4.0 (spark-submit --jars/--packages; `make setup` puts it "
    "in .jars/ for local runs), or use parquet"
)


def is_missing_source(err: Exception, fmt: str) -> bool:
    """Whether `err` is Spark saying it has no data source `fmt` (e.g. no Delta jar)."""
    text = str(err)
    return "DATA_SOURCE_NOT_FOUND" in text or f"Failed to find the data source: {fmt}" in text


class FileSystem(Protocol):
    """The file operations the job needs beyond Spark's readers and writers."""

    def exists(self, path: str) -> bool: ...
    def is_file(self, path: str) -> bool: ...
    def delete(self, path: str) -> None: ...
    def rename(self, source: str, target: str) -> bool: ...
    def folders(self, path: str) -> list[str]: ...
    def files(self, path: str) -> list[str]: ...


class LocalFileSystem:
    """A local path, through `os`."""

    def exists(self, path: str) -> bool:
        return os.path.exists(local_path(path))

    def is_file(self, path: str) -> bool:
        return os.path.isfile(local_path(path))

    def delete(self, path: str) -> None:
        local = local_path(path)
        if os.path.isdir(local) and not os.path.islink(local):
            shutil.rmtree(local)
        elif os.path.lexists(local):
            os.remove(local)

    def rename(self, source: str, target: str) -> bool:
        try:
            os.rename(local_path(source), local_path(target))
        except OSError:
            return False
        return True

    def folders(self, path: str) -> list[str]:
        local = local_path(path)
        if not os.path.isdir(local):
            return []
        return sorted(
            os.path.join(path, name)
            for name in os.listdir(local)
            if os.path.isdir(os.path.join(local, name))
        )

    def files(self, path: str) -> list[str]:
        local = local_path(path)
        return [n for n in os.listdir(local) if os.path.isfile(os.path.join(local, n))]


class HadoopFileSystem:
    """A path of any Hadoop file system, through the classic session's JVM."""

    def __init__(self, fs: Any, make_path: Any) -> None:
        self._fs, self._path = fs, make_path

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(self._path(path)))

    def is_file(self, path: str) -> bool:
        return self.exists(path) and bool(self._fs.getFileStatus(self._path(path)).isFile())

    def delete(self, path: str) -> None:
        self._fs.delete(self._path(path), True)

    def rename(self, source: str, target: str) -> bool:
        return bool(self._fs.rename(self._path(source), self._path(target)))

    def folders(self, path: str) -> list[str]:
        statuses = self._fs.listStatus(self._path(path))
        return sorted(str(status.getPath()) for status in statuses if status.isDirectory())

    def files(self, path: str) -> list[str]:
        statuses = self._fs.listStatus(self._path(path))
        return [status.getPath().getName() for status in statuses if status.isFile()]

    def read_text(self, path: str) -> str:
        stream = self._fs.open(self._path(path))
        try:
            chunks = []
            buffer = bytearray(65536)
            while (count := stream.read(buffer)) > 0:
                chunks.append(bytes(buffer[:count]))
        finally:
            stream.close()
        return b"".join(chunks).decode("utf-8")


def file_system(spark: SparkSession, path: str) -> FileSystem | None:
    """The file system of `path` as this process can reach it: `os` for a local path
    Spark sees too, Hadoop's through a classic session's JVM, else None (Spark Connect and
    a path only the server reaches)."""
    reach = backend(spark)
    if reach.is_local(path):
        return LocalFileSystem()
    hadoop = reach.hadoop_file_system(path)
    return HadoopFileSystem(*hadoop) if hadoop is not None else None


def local_path(path: str) -> str:
    """A local path or `file:` URI as a path `os` takes."""
    parsed = urlparse(path)
    return parsed.path if parsed.scheme == "file" else path


class Folders:
    """What the input checks ask of a file system: whether a path exists, and a folder's
    entries (`file_system`); with none (Spark Connect and a path only the server reaches)
    `usable` is False."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        try:
            self._fs = file_system(spark, path)
        except Exception:  # no file system for the scheme: Spark says so when it reads
            self._fs = None

    @property
    def usable(self) -> bool:
        return self._fs is not None

    def _reach(self) -> FileSystem:
        assert self._fs is not None
        return self._fs

    def exists(self, path: str) -> bool:
        return self._reach().exists(path)

    def folders(self, path: str) -> list[str]:
        """The sub-folders of `path`, as paths, sorted."""
        return self._reach().folders(path)

    def files(self, path: str) -> list[str]:
        """The names of the files directly in `path`."""
        return self._reach().files(path)


def _parent(path: str) -> str | None:
    trimmed = path.rstrip("/")
    parsed = urlparse(trimmed)
    head, _, tail = trimmed.rpartition("/")
    if not tail or not head or (parsed.scheme and head.endswith(":/")) or head.endswith("//"):
        return None
    return head


def _enclosing_delta_table(folders: Folders, path: str) -> str | None:
    """The Delta table `path` lies inside (its data files or `_delta_log`), if any."""
    current = path.rstrip("/")
    if current.endswith("/_delta_log"):
        return _parent(current)
    parent = _parent(current)
    while parent is not None:
        if folders.exists(parent + "/_delta_log"):
            return parent
        parent = _parent(parent)
    return None


def detect_format(spark: SparkSession, path: str, what: str = "") -> str:
    """`delta` when the path holds a `_delta_log/`, else `parquet`. A path inside a Delta
    table is an `InputError` naming the table: its Parquet files include ones the table no
    longer holds, so read as a folder of Parquet they would give wrong rows."""
    named = f"{what} " if what else ""
    folders = Folders(spark, path)
    if folders.usable:
        if not folders.exists(path):
            raise InputError(f"{named}{path}: no such file or directory")
        if folders.exists(path.rstrip("/") + "/_delta_log"):
            return "delta"
        table = _enclosing_delta_table(folders, path)
        if table is not None:
            raise InputError(
                f"{named}{path} is inside the Delta table {table}: give the table's own path "
                f"({table}); its files alone include rows the table has removed"
            )
        return "parquet"
    try:  # No file-system handle: ask Delta itself.
        spark.read.format("delta").load(path).schema  # noqa: B018 - probe only
        return "delta"
    except AnalysisException:
        return "parquet"


def folder_hint(spark: SparkSession, path: str) -> str:
    """For a folder with no data of its own: the tables in its sub-folders, to point at (or
    that it is empty)."""
    folders = Folders(spark, path)
    if not folders.usable:
        return ""
    try:
        children = folders.folders(path)
        if not children and not folders.files(path):
            return ". The folder is empty: no export there"
        delta = [c for c in children if folders.exists(c + "/_delta_log")]
        parquet = [
            c
            for c in children
            if c not in delta and any(n.endswith(".parquet") for n in folders.files(c))
        ]
    except Exception:  # a hint only: never hide the error it explains
        return ""
    found = [f"{c} (Delta)" for c in delta] + [f"{c} (Parquet)" for c in parquet]
    if not found:
        return ""
    shown = ", ".join(found[:_HINTED_FOLDERS])
    more = f" and {len(found) - _HINTED_FOLDERS} more" if len(found) > _HINTED_FOLDERS else ""
    return f". Sub-folders hold tables: {shown}{more}; give the path of one of those"


#: Spark's error when a task, or the schema inference, cannot read one input file.
_FAILED_READ: Final = re.compile(
    r"\[FAILED_READ_FILE(?:\.\w+)?\] Encountered error while reading file (?P<file>\S+?)\.?(?:\s|$)"
)
_CAUSE: Final = re.compile(r"^Caused by: (?:[\w.$]+(?:Exception|Error): )?(?P<message>.*)$")


@dataclass(frozen=True)
class UnreadableFile:
    """An input file Spark failed to read, and why (the first underlying cause)."""

    file: str
    cause: str


def unreadable_file(err: BaseException) -> UnreadableFile | None:
    """The file named by Spark's FAILED_READ_FILE error in `err`, if that is what it is."""
    text = str(err)
    found = _FAILED_READ.search(text)
    if found is None:
        return None
    file = found.group("file")
    causes = [m.group("message").strip() for m in map(_CAUSE.match, text.splitlines()) if m]
    cause = causes[0] if causes else ""
    # Parquet's messages start with the file's name, which the error already gives.
    return UnreadableFile(file, "it" + cause[len(file) :] if cause.startswith(file) else cause)


def _comparable(path: str) -> str:
    return local_path(path).rstrip("/") + "/"


def unreadable_input_error(
    err: BaseException, inputs: Mapping[str, str | None]
) -> InputError | None:
    """`err` as a one-line `InputError` when Spark failed to read a file of one of `inputs`
    (option -> path; a file under none of them is named on its own)."""
    unreadable = unreadable_file(err)
    if unreadable is None:
        return None
    owner = next(
        (
            f"{what} {path}: "
            for what, path in inputs.items()
            if path and _comparable(unreadable.file).startswith(_comparable(path))
        ),
        "",
    )
    cause = f": {unreadable.cause}" if unreadable.cause else ""
    return InputError(
        f"{owner}cannot read the file {unreadable.file}{cause}. Every file under the path is "
        "read as part of it: re-export or remove that file, or give a folder that holds "
        "the export alone"
    )


@contextmanager
def unreadable_files_named(inputs: Mapping[str, str | None]) -> Iterator[None]:
    """Turn Spark's failure to read a file of one of `inputs` (option -> path), whichever
    action meets it, into a one-line `InputError` naming the file and the option."""
    try:
        yield
    except Exception as err:
        unreadable = unreadable_input_error(err, inputs)
        if unreadable is None:
            raise
        raise unreadable from None


@contextmanager
def session_settings(
    spark: SparkSession, settings: Mapping[str, str], *, required: str | None = None
) -> Iterator[None]:
    """Spark SQL `settings` for the block; the session's own values are back afterwards (a
    notebook's session is the caller's). A setting the session refuses (Databricks
    serverless allows a handful) is left as the session has it, and the log says so once:
    the job sizes its own plans where it matters. `required`: the settings are needed, and
    a refusal is a `SparkSetupError` that starts with this text."""
    before: dict[str, str | None] = {}
    for key, value in settings.items():
        try:
            earlier = spark.conf.get(key, None)
            spark.conf.set(key, value)
        except Exception as err:
            if not refused(err):
                raise
            if required is not None:
                raise SparkSetupError(
                    f"{required} {key}={value}, which this session refuses to set "
                    f"({first_line(err)})"
                ) from None
            say_once(
                f"setting {key}",
                "the session refuses the setting %s (%s): going on with its own value",
                key,
                first_line(err),
            )
            continue
        before[key] = earlier
    try:
        yield
    finally:
        for key, earlier in before.items():
            if earlier is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, earlier)


def first_line(err: BaseException) -> str:
    """The first line of `err`'s message (Spark's carry a JVM stack trace after it)."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
