"""The row contract between Python and the jar (`sharestate.jvm.contract`): defined once in
Python, rendered into the jar's `Contract.java` at build time, and the jar on the session
built from exactly this one.

The rendering and derivation tests need no jar; the jar tests skip only when the session
has no sharestate jar at all: a jar built from another contract fails them.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from sharestate import jvm
from sharestate.decode import spark as spark_decode
from sharestate.decode.columns import NEEDS_REFERENCE_FIELD, SHARE_STATE_RESULT_FIELDS
from sharestate.decode.tables import output_schema
from sharestate.jvm import contract
from sharestate.kafka import constants
from sharestate.replay.fold import FOLD_INPUT, HISTORY_FIELDS, SEED, SEED_DELETED

pytestmark = pytest.mark.spark

REBUILD = "the jar on the session is stale: rebuild it (`make setup` or scripts/build_jvm.sh)"


def _table(name: str) -> contract.Table:
    return next(t for t in contract.tables() if t.java_name == name)


def _probe(spark: SparkSession) -> Any:
    probe = spark._jvm.sharestate.jvm.Probe  # type: ignore[union-attr]
    try:
        probe.version()
    except Exception:  # py4j: no such class, i.e. no sharestate jar at all
        pytest.skip("no sharestate JVM jar on the session (scripts/build_jvm.sh)")
    return probe


# --- the contract is the Python lists ------------------------------------------------------


def test_tables_are_the_python_field_lists() -> None:
    assert [f.name for f in _table("FoldInput").fields] == list(FOLD_INPUT)
    assert _table("History").spark_json() == json.loads(
        from_arrow_schema(pa.schema(HISTORY_FIELDS)).json()
    )
    # What the decode step passes to DecodeShareState.tiers as its output schema.
    output = output_schema(SHARE_STATE_RESULT_FIELDS)
    tiered = from_arrow_schema(output.append(NEEDS_REFERENCE_FIELD))
    assert _table("DecodeOutput").spark_json() == json.loads(tiered.json())
    assert [f.name for f in _table("DecodeInput").fields] == list(spark_decode._INPUT_COLUMNS)
    assert contract.values()["RecordType"]["SEED"] == SEED
    assert contract.values()["RecordType"]["SEED_DELETED"] == SEED_DELETED
    assert contract.values()["DeliveryState"]["ARCHIVED"] == constants.ARCHIVED


def test_java_has_a_position_for_every_column() -> None:
    java = contract.render_java()
    for table in contract.tables():
        body = java.split(f"static final class {table.java_name} {{", 1)[1].split("\n  }", 1)[0]
        positions = dict(re.findall(r"static final int (\w+) = (\d+);", body))
        assert positions.pop("WIDTH") == str(len(table.fields))
        assert positions == {f.name.upper(): str(i) for i, f in enumerate(table.fields)}
    assert "static final int[] RESULT = {3, 4, 5, " in java
    assert f"static final String FINGERPRINT = {json.dumps(contract.fingerprint())};" in java


def test_fingerprint_follows_the_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    before = contract.fingerprint()
    history = _table("History")
    renamed = [*history.fields[:-1], history.fields[-1].with_name("renamed")]
    tables = tuple(
        contract.Table(t.java_name, t.doc, renamed) if t is history else t
        for t in contract.tables()
    )
    monkeypatch.setattr(contract, "tables", lambda: tables)
    contract.fingerprint.cache_clear()
    try:
        assert contract.fingerprint() != before
    finally:
        monkeypatch.undo()
        contract.fingerprint.cache_clear()
    assert contract.fingerprint() == before


def test_a_column_name_java_cannot_hold_is_refused() -> None:
    table = contract.Table("Odd", "a test table", [pa.field("not a name", pa.int32())])
    with pytest.raises(ValueError, match="cannot be a Java constant"):
        contract._java_table(table)


# --- the jar on the session was built from it ------------------------------------------------


def test_jar_speaks_this_contract(spark: SparkSession) -> None:
    probe = _probe(spark)
    assert int(probe.version()) == contract.VERSION, REBUILD
    assert str(probe.fingerprint()) == contract.fingerprint(), REBUILD
    jar = json.loads(str(probe.contract()))
    python = contract.as_json()
    assert jar["values"] == python["values"], REBUILD
    assert jar["tables"].keys() == python["tables"].keys(), REBUILD
    for name, schema in python["tables"].items():
        assert jar["tables"][name] == schema, f"{name}: {REBUILD}"
    assert jvm.available(spark)


def test_stale_jar_is_not_available(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    _probe(spark)
    assert jvm.available(spark)
    monkeypatch.setattr(contract, "fingerprint", lambda: "built-from-other-columns")
    assert not jvm.available(spark)
    monkeypatch.setattr(contract, "VERSION", contract.VERSION + 1)
    assert not jvm.available(spark)
