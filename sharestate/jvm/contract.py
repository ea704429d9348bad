"""The row contract between the Python paths and the JVM fast paths, defined once, here.

Python is the single source. Each table below is an Arrow field list the Python paths
already use (`sharestate.replay.fold`, `sharestate.decode.columns`); nothing is restated.
scripts/build_jvm.sh renders the tables into `Contract.java` (`python -m sharestate.jvm
OUT.java`), generated at every build and never committed: one nested
class per table, with the table's Spark schema (JSON), its width and one position constant
per column (`Contract.History.REPLAY_ERROR`). The Java classes take every schema and column
position from there, so a column added, moved or retyped here reaches them at the next
build (the Makefile rebuilds the jar when these sources change).

The jar says what it was built from (`Probe.version()`, `Probe.fingerprint()`,
`Probe.contract()`): `sharestate.jvm.available` takes a jar only at this `VERSION` and
`fingerprint()`, so a stale jar is never used (the session runs the Python paths), and
tests/spark/test_jvm_contract.py fails when the jar on the session is stale.

Adding a column: add its field to the Python list (and compute it in the Python path);
`make setup` rebuilds the jar; the Java class that fills the table writes it by its
constant. Until it does, the tests comparing both engines (tests/spark/test_jvm_*.py) fail.
Bump `VERSION` only when a column changes meaning with its name and type unchanged.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema

#: Bumped when a column's meaning changes without a change of name or type (those change
#: the fingerprint by themselves).
VERSION: Final = 4
#: The generated Java class (package sharestate.jvm).
JAVA_CLASS: Final = "Contract"
_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RESERVED: Final = frozenset({"SCHEMA", "WIDTH"})


@dataclass(frozen=True)
class Table:
    """A row layout both sides use."""

    #: Its class inside `Contract.java`.
    java_name: str
    #: Where the Python side defines it, and what it is.
    doc: str
    fields: Sequence[pa.Field]
    #: Named subsets of the columns, rendered as arrays of their positions.
    groups: Mapping[str, Sequence[str]] = field(default_factory=dict)

    def spark_json(self) -> dict[str, Any]:
        """The table's Spark schema (as `from_arrow_schema` converts it), as JSON data."""
        value: dict[str, Any] = json.loads(from_arrow_schema(pa.schema(self.fields)).json())
        return value


@cache
def tables() -> tuple[Table, ...]:
    """Every table of the contract, from the field lists of the Python paths."""
    # Imported here rather than at the top: decode and replay import the bridge
    # (sharestate.jvm), which imports this module for VERSION and the fingerprint.
    from sharestate.decode.columns import (
        DECODE_INPUT_FIELDS,
        NEEDS_REFERENCE_FIELD,
        SHARE_STATE_RESULT_FIELDS,
        STATE_BATCH_TYPE,
        decoded_output_fields,
    )
    from sharestate.replay.fold import FOLD_INPUT_FIELDS, HISTORY_FIELDS, MOVED_AT_TYPE

    return (
        Table(
            "FoldInput",
            "sharestate.replay.fold.FOLD_INPUT_FIELDS: the fold's input (Fold.fold checks the"
            " names and types; the order may differ)",
            FOLD_INPUT_FIELDS,
        ),
        Table(
            "History",
            "sharestate.replay.fold.HISTORY_FIELDS: the fold's output, one row per input row",
            HISTORY_FIELDS,
        ),
        Table(
            "StateBatch",
            "sharestate.decode.columns.STATE_BATCH_TYPE: an element of state_batches",
            list(STATE_BATCH_TYPE),
        ),
        Table(
            "MovedAt",
            "sharestate.replay.fold.MOVED_AT_TYPE: effective_start_offset_since, seed_since",
            list(MOVED_AT_TYPE),
        ),
        Table(
            "DecodeInput",
            "sharestate.decode.columns.DECODE_INPUT_FIELDS: DecodeShareState's input, in order",
            DECODE_INPUT_FIELDS,
        ),
        Table(
            "DecodeOutput",
            "sharestate.decode.columns.decoded_output_fields(SHARE_STATE_RESULT_FIELDS) and"
            " NEEDS_REFERENCE_FIELD: DecodeShareState's output; RESULT holds the decoder's"
            " fields, null on a row left to the Python decoder",
            [*decoded_output_fields(SHARE_STATE_RESULT_FIELDS), NEEDS_REFERENCE_FIELD],
            groups={"RESULT": [f.name for f in SHARE_STATE_RESULT_FIELDS]},
        ),
    )


@cache
def values() -> dict[str, dict[str, int | str]]:
    """Values that columns hold and both sides test for: record types (`record_type`,
    with the fold's seed rows) and Kafka's delivery states (`delivery_state`)."""
    from sharestate.kafka import constants
    from sharestate.replay.fold import SEED, SEED_DELETED

    return {
        "RecordType": {
            "SNAPSHOT": constants.SNAPSHOT,
            "UPDATE": constants.UPDATE,
            "TOMBSTONE": constants.TOMBSTONE,
            "SEED": SEED,
            "SEED_DELETED": SEED_DELETED,
        },
        "DeliveryState": {
            "AVAILABLE": constants.AVAILABLE,
            "ACQUIRED": constants.ACQUIRED,
            "ACKNOWLEDGED": constants.ACKNOWLEDGED,
            "ARCHIVING": constants.ARCHIVING,
            "ARCHIVED": constants.ARCHIVED,
        },
    }


def as_json() -> dict[str, Any]:
    """The contract as data: what `Probe.contract()` of a jar built from it returns."""
    return {
        "version": VERSION,
        "tables": {t.java_name: t.spark_json() for t in tables()},
        "values": values(),
    }


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@cache
def fingerprint() -> str:
    """A digest of every table's columns and types and of the values: a jar built from
    others has another."""
    contract = as_json()
    canonical = _compact({"tables": contract["tables"], "values": contract["values"]})
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def _constant(name: str, where: str) -> str:
    constant = name.upper()
    if not _IDENTIFIER.fullmatch(constant) or constant in _RESERVED:
        raise ValueError(f"{where}: column {name!r} cannot be a Java constant ({constant})")
    return constant


def _java_table(table: Table) -> list[str]:
    names = [f.name for f in table.fields]
    constants = [_constant(name, table.java_name) for name in names]
    if len(set(constants)) != len(constants):
        raise ValueError(f"{table.java_name}: two columns give the same Java constant")
    schema = _compact(table.spark_json())
    lines = [
        f"  /** {table.doc}. */",
        f"  static final class {table.java_name} {{",
        f"    private {table.java_name}() {{}}",
        "",
        "    /** Spark's JSON of the schema (DataType.fromJson). */",
        f"    static final String SCHEMA = {json.dumps(schema)};",
        f"    static final int WIDTH = {len(names)};",
    ]
    lines += [f"    static final int {c} = {i};" for i, c in enumerate(constants)]
    for group, members in table.groups.items():
        constant = _constant(group, table.java_name)
        if constant in constants:
            raise ValueError(f"{table.java_name}: group {group!r} has a column's name")
        positions = ", ".join(str(names.index(m)) for m in members)
        lines.append(f"    static final int[] {constant} = {{{positions}}};")
    lines.append("  }")
    return lines


def _java_values(name: str, constants: Mapping[str, int | str]) -> list[str]:
    lines = [
        f"  /** Values of the contract (sharestate.jvm.contract.values()[{json.dumps(name)}]). */",
        f"  static final class {name} {{",
        f"    private {name}() {{}}",
        "",
    ]
    for constant, value in constants.items():
        kind = "String" if isinstance(value, str) else "int"
        lines.append(f"    static final {kind} {constant} = {json.dumps(value)};")
    return [*lines, "  }"]


def render_java() -> str:
    """`Contract.java`: the contract as Java constants (package sharestate.jvm)."""
    lines = [
        "// Generated from sharestate/jvm/contract.py by scripts/build_jvm.sh: do not edit, do not",
        "// commit. Column positions and schemas of the rows the JVM paths exchange with Python.",
        "package sharestate.jvm;",
        "",
        "/** The row contract with the Python side (sharestate.jvm.contract). */",
        f"final class {JAVA_CLASS} {{",
        f"  private {JAVA_CLASS}() {{}}",
        "",
        f"  static final int VERSION = {VERSION};",
        f"  static final String FINGERPRINT = {json.dumps(fingerprint())};",
        "  /** Every table as {name, schema JSON}, for Probe.contract(). */",
        "  static final String[][] TABLES = {",
        *(f"    {{{json.dumps(t.java_name)}, {t.java_name}.SCHEMA}}," for t in tables()),
        "  };",
        "  /** Every value class as JSON, for Probe.contract(). */",
        f"  static final String VALUES = {json.dumps(_compact(values()))};",
    ]
    for table in tables():
        lines += ["", *_java_table(table)]
    for name, constants in values().items():
        lines += ["", *_java_values(name, constants)]
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str]) -> int:
    """`python -m sharestate.jvm OUT.java` writes the Java class; `--json` prints the
    contract."""
    if list(argv) == ["--json"]:
        print(json.dumps({**as_json(), "fingerprint": fingerprint()}, indent=2))
        return 0
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python -m sharestate.jvm OUT.java | --json", file=sys.stderr)
        return 2
    Path(argv[0]).write_text(render_java(), encoding="utf-8")
    return 0
