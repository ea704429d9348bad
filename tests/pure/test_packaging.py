"""The wheel installs next to the Spark an environment already has.

A Databricks runtime, a pyspark 4.x install, `pyspark-client` or `databricks-connect` brings
its own Spark: the wheel's base dependencies must not name one, or installing it replaces
that Spark (or fails to resolve). The extras bring Spark where there is none (`spark`,
`connect`) and this repository's tested pair (`local`).

The wheel is built from a copy of the sources, offline, with the virtualenv's setuptools
(`pip wheel --no-deps --no-build-isolation`), and its metadata read as an installer reads it.
"""

from __future__ import annotations

import configparser
import zipfile
from collections.abc import Iterator
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests.support.paths import ROOT
from tests.support.wheel import build_wheel

#: Distributions that bring a Spark of their own: none may be a base dependency.
SPARK_DISTRIBUTIONS = {"pyspark", "pyspark-client", "databricks-connect", "delta-spark"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield build_wheel(ROOT, tmp_path_factory.mktemp("wheel"))


def _dist_info(wheel: Path, name: str) -> str:
    with zipfile.ZipFile(wheel) as archive:
        (member,) = [m for m in archive.namelist() if m.endswith(f".dist-info/{name}")]
        return archive.read(member).decode("utf-8")


@pytest.fixture(scope="module")
def metadata(wheel: Path) -> Message:
    return Parser().parsestr(_dist_info(wheel, "METADATA"))


@pytest.fixture(scope="module")
def requirements(metadata: Message) -> list[Requirement]:
    return [Requirement(line) for line in metadata.get_all("Requires-Dist") or []]


def _unconditional(requirement: Requirement) -> bool:
    """Whether an installer takes `requirement` without any extra being asked for."""
    return requirement.marker is None or requirement.marker.evaluate({"extra": ""})


def _in_extra(requirements: list[Requirement], extra: str, name: str) -> Requirement:
    (found,) = [
        r
        for r in requirements
        if r.name == name
        and r.marker is not None
        and r.marker.evaluate({"extra": extra})
        and not _unconditional(r)
    ]
    return found


def test_no_base_dependency_brings_a_spark(requirements: list[Requirement]) -> None:
    base = [r for r in requirements if _unconditional(r)]
    assert [str(r) for r in base if r.name in SPARK_DISTRIBUTIONS] == []
    # what the package itself imports stays a base dependency, as a range rather than a pin
    assert {r.name for r in base} >= {"pyarrow", "numpy", "deltalake"}
    assert [str(r) for r in base if any(s.operator == "==" for s in r.specifier)] == []


@pytest.mark.parametrize("extra", ["spark", "connect"])
def test_the_spark_extras_admit_any_pyspark_4(requirements: list[Requirement], extra: str) -> None:
    pyspark = _in_extra(requirements, extra, "pyspark")
    assert {"spark": "sql", "connect": "connect"}[extra] in pyspark.extras
    for admitted in ("4.0.0", "4.1.1", "4.2.0", "4.9.0"):
        assert pyspark.specifier.contains(Version(admitted)), admitted
    for refused in ("3.5.3", "5.0.0"):
        assert not pyspark.specifier.contains(Version(refused)), refused


def test_the_local_extra_pins_the_matched_pair(requirements: list[Requirement]) -> None:
    pins = {
        name: str(_in_extra(requirements, "local", name).specifier)
        for name in ("pyspark", "delta-spark", "deltalake")
    }
    assert pins == {"pyspark": "==4.2.0", "delta-spark": "==4.4.0", "deltalake": "==1.6.6"}
    assert _in_extra(requirements, "local", "pyspark").extras == {"sql", "connect"}


def test_the_console_script_is_declared(wheel: Path) -> None:
    entry_points = configparser.ConfigParser()
    entry_points.read_string(_dist_info(wheel, "entry_points.txt"))
    assert entry_points["console_scripts"]["sharestate"] == "sharestate.job.cli:run"
