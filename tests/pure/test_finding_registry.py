"""The finding registry's checks at registration, and what it declares per rule."""

from __future__ import annotations

import ast
from pathlib import Path

import pyarrow as pa
import pytest

import sharestate.audits.findings as findings_package
from sharestate.audits.findings import (
    FINDINGS_SCHEMA,
    PER_RECORD_RULES,
    PER_SHARE_PARTITION_RULES,
    PLACEMENT_RULES,
    RULES,
    STATE_SIZED_RULES,
    findings_table,
)
from sharestate.audits.findings.registry import (
    INPUT_NAMES,
    PER_SHARE_PARTITION_INPUTS,
    FindingCode,
    FoundRows,
    Severity,
    Source,
    finding_rule,
)


def test_a_per_share_partition_rule_may_read_only_per_share_partition_inputs() -> None:
    def reads_the_lag(state: pa.Table, lag: pa.Table) -> FoundRows:
        """Reads the lag, which an incremental run writes whole."""
        raise AssertionError("not run")

    register = finding_rule(
        FindingCode.NEGATIVE_LAG,
        Severity.WARNING,
        source=Source.SHARE_STATE,
        per_share_partition=True,
    )
    with pytest.raises(TypeError, match="per-share-partition rule reads only"):
        register(reads_the_lag)


def test_only_a_per_share_partition_rule_may_read_segments_or_delivery_counts() -> None:
    # An incremental run gives the rules only the touched share-partitions' segments and
    # delivery counts: a rule over every share-partition reading them would see too few.
    def counts_every_segment(segment_starts: pa.Table) -> FoundRows:
        """Reads every segment, which an incremental run does not have."""
        raise AssertionError("not run")

    register = finding_rule(FindingCode.NEGATIVE_LAG, Severity.WARNING, source=Source.SHARE_STATE)
    with pytest.raises(TypeError, match="segment_starts: read by per-share-partition rules only"):
        register(counts_every_segment)


def test_the_per_share_partition_rules_are_those_an_incremental_run_carries() -> None:
    # The rules whose rows an incremental run keeps for the untouched share-partitions: a
    # rule that reads a global reference (the export's end, the inferred partition count)
    # must not be among them.
    assert {rule.name for rule in PER_SHARE_PARTITION_RULES} == {
        "update_before_snapshot",
        "state_without_snapshot",
        "update_after_tombstone",
        "delivery_count_above_limit",
    }
    for rule in PER_SHARE_PARTITION_RULES:
        assert set(rule.inputs) <= PER_SHARE_PARTITION_INPUTS


def test_an_incremental_run_finds_every_rule_once_in_one_of_its_four_steps() -> None:
    # An incremental run finds each group of rules in a step of its own: a rule in none
    # would be missing from its findings, a rule in two would give its rows twice.
    groups = (PER_RECORD_RULES, PER_SHARE_PARTITION_RULES, PLACEMENT_RULES, STATE_SIZED_RULES)
    assert sorted(rule.name for group in groups for rule in group) == sorted(
        rule.name for rule in RULES
    )
    assert {rule.name for rule in PLACEMENT_RULES} == {
        "wrong_state_partition",
        "state_partition_check_skipped",
    }
    # The state-sized rules run before the placements are known.
    assert not any("placements" in rule.inputs for rule in STATE_SIZED_RULES)


def test_the_findings_package_imports_no_spark() -> None:
    # The rules run on the driver and in Spark's tasks over Arrow batches: one
    # implementation each, with nothing of Spark's.
    folder = Path(findings_package.__file__).parent
    for module in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            assert not [n for n in names if n.split(".")[0] == "pyspark"], module.name


def test_a_rule_without_an_input_it_needs_gives_no_rows_rather_than_failing() -> None:
    # A run without --consumer-offsets or --end-offsets gives those rules' inputs as None
    # (or not at all): they do not run.
    for rule in RULES:
        assert set(rule.inputs) <= INPUT_NAMES, rule.name
        assert rule.required_inputs, rule.name
        assert rule.run({}) is None, rule.name
        assert rule.run(dict.fromkeys(rule.inputs)) is None, rule.name


def test_the_findings_table_takes_rows_found_elsewhere_instead_of_running_the_rule() -> None:
    kinds = pa.table(
        {
            "source": ["share_state"],
            "reason_kind": ["truncated"],
            "rows": pa.array([2], pa.int64()),
            "first_source_partition": pa.array([0], pa.int32()),
            "first_source_offset": pa.array([7], pa.int64()),
        }
    )
    (decode_quarantine,) = [r for r in RULES if r.code == FindingCode.DECODE_QUARANTINE]
    own = findings_table({"quarantine_kinds": kinds})
    assert own.schema == FINDINGS_SCHEMA
    assert [
        (r["code"], r["source"], r["source_offset"], r["affected"]) for r in own.to_pylist()
    ] == [("decode_quarantine", "share_state", 7, 2)]
    # Rows a Spark task found are taken as they are (and the rule, which could run from
    # these inputs, is not run again).
    elsewhere = own.slice(0, 0)
    assert findings_table({"quarantine_kinds": kinds}, {decode_quarantine.name: elsewhere}) == (
        FINDINGS_SCHEMA.empty_table()
    )
    with pytest.raises(ValueError, match="no finding rule: nonesuch"):
        findings_table({}, {"nonesuch": elsewhere})
