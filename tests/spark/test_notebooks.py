"""The notebooks in notebooks/, run headless against job outputs of the sample data.

Each notebook runs twice in one kernel (one Spark start-up), as a user re-runs it with other
parameters: on an output with every table (Delta) and on one written without
--consumer-offsets (Parquet, so `share_groups` is missing). A cell that raises fails the test
with its traceback.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sharestate.job import cli
from sharestate.sample.exports import SampleSpec, write_sample
from tests.conftest import SESSION
from tests.support.paths import ROOT

pytestmark = [pytest.mark.spark, pytest.mark.connect]
#: The notebooks run in `make test` on the Connect server (as on Databricks); in a kernel's own
#: local Spark, in `make test-slow`.
ON_CONNECT_THEN_SLOW = pytest.mark.slow if SESSION == "classic" else pytest.mark.connect

NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.py"))
#: The figures each notebook shows (and saves under SHARESTATE_FIGURES) on the sample outputs.
FIGURES = {
    "explore_output": {
        "state_per_group",
        "findings",
        "spso_over_time",
        "delivery_counts",
        "archived_offsets",
        "pruning_cutoff",
    },
}
FIGURE_FACTS_PREFIX = "FIGURE_FACTS "
#: A finding written after the last complete run's checkpoint (a killed run's).
INJECTED = "written_after_the_checkpoint"
#: Parameters of each run besides the output (the sample's groups are group-000 and group-001).
PARAMETERS: dict[str, dict[str, str]] = {
    "full": {},
    "partial": {"SHARESTATE_TOP_N": "3", "SHARESTATE_GROUP_ID": "group-000"},
}


@dataclass
class Run:
    """One execution of a notebook: its executed cells and the figures it saved."""

    notebook: str
    cells: list[nbformat.NotebookNode]
    figures: set[str]

    @property
    def text(self) -> str:
        return "".join(
            output["text"]
            for cell in self.cells
            for output in cell.get("outputs", [])
            if output.get("output_type") == "stream"
        )

    @property
    def figure_facts(self) -> dict[str, list[dict[str, Any]]]:
        """The notebook's FIGURE_FACTS (labels, scales, legends of each figure's axes)."""
        (line,) = [line for line in self.text.splitlines() if line.startswith(FIGURE_FACTS_PREFIX)]
        facts: dict[str, list[dict[str, Any]]] = json.loads(line[len(FIGURE_FACTS_PREFIX) :])
        return facts

    @property
    def images(self) -> int:
        return sum(
            "image/png" in output.get("data", {})
            for cell in self.cells
            for output in cell.get("outputs", [])
        )


@pytest.fixture(scope="session")
def job_outputs(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The job run twice in the tests' session (`cli.main` reuses it). `full`: every table,
    Delta, delivery-count limit 1 (so the small sample has poison messages); `partial`:
    Parquet, without --consumer-offsets, limit 5 (no poison messages)."""
    root = tmp_path_factory.mktemp("notebook_outputs")
    write_sample(root / "sample", SampleSpec(records=300))
    replay = ["replay", "--share-state", str(root / "sample" / "share_state")]
    offsets = ["--consumer-offsets", str(root / "sample" / "consumer_offsets")]
    full, partial = root / "full", root / "partial"
    assert cli.main([*replay, *offsets, "--delivery-count-limit", "1", "--output", str(full)]) == 0
    assert cli.main([*replay, "--output-format", "parquet", "--output", str(partial)]) == 0
    # A later, unfinished run's commit to `findings`, after the checkpoint: the notebook reads
    # the checkpointed version and never shows it.
    findings = spark.read.format("delta").load(str(full / "findings"))
    findings.limit(1).withColumn("code", F.lit(INJECTED)).withColumn(
        "severity", F.lit("error")
    ).write.format("delta").mode("append").save(str(full / "findings"))
    return {"full": full, "partial": partial}


@pytest.fixture(scope="session", params=NOTEBOOKS, ids=lambda path: path.stem)
def runs(
    request: pytest.FixtureRequest,
    job_outputs: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Run]:
    """The notebook run on each job output, one after the other in one kernel; before each
    run a cell sets the environment variables its parameters cell reads."""
    notebook = jupytext.read(request.param)
    figures = tmp_path_factory.mktemp(f"figures_{request.param.stem}")
    combined = nbformat.v4.new_notebook(metadata=notebook.metadata)
    spans = {}
    for name, output in job_outputs.items():
        env = {
            "SHARESTATE_OUTPUT": str(output),
            "SHARESTATE_OUTPUT_FORMAT": "auto",
            "SHARESTATE_FIGURES": str(figures / name),
            **PARAMETERS[name],
        }
        start = len(combined.cells)
        combined.cells.append(nbformat.v4.new_code_cell(f"import os\nos.environ.update({env!r})"))
        for index, cell in enumerate(copy.deepcopy(notebook.cells)):
            cell["id"] = f"{name}-{index}"
            combined.cells.append(cell)
        combined.cells.append(
            nbformat.v4.new_code_cell(
                f"import json\nprint({FIGURE_FACTS_PREFIX!r} + json.dumps(FIGURE_FACTS))"
            )
        )
        spans[name] = (start, len(combined.cells))
    with pytest.MonkeyPatch.context() as patch:
        # The kernel's Spark runs small queries for a minute: the JVM's quick (C1) JIT alone
        # halves its CPU time.
        java_options = os.environ.get("JAVA_TOOL_OPTIONS", "")
        patch.setenv("JAVA_TOOL_OPTIONS", f"{java_options} -XX:TieredStopAtLevel=1".strip())
        # On a Connect run the kernel's notebook finds the tests' server as a user's finds
        # theirs: through SPARK_REMOTE.
        if os.environ.get("SHARESTATE_TEST_REMOTE"):
            patch.setenv("SPARK_REMOTE", os.environ["SHARESTATE_TEST_REMOTE"])
        NotebookClient(
            combined,
            timeout=600,
            kernel_name="python3",
            resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
        ).execute()
    return {
        name: Run(
            notebook=request.param.stem,
            cells=combined.cells[start:end],
            figures={path.stem for path in (figures / name).glob("*.png")},
        )
        for name, (start, end) in spans.items()
    }


@ON_CONNECT_THEN_SLOW
def test_notebook_on_an_output_with_every_table(runs: dict[str, Run]) -> None:
    run = runs["full"]
    expected = FIGURES[run.notebook]
    assert run.figures == expected
    assert run.images == len(expected)
    assert "[missing]" not in run.text
    assert "reading the tables of the last complete run" in run.text
    shown = json.dumps([cell.get("outputs", []) for cell in run.cells])
    assert "findings" in run.figures and INJECTED not in shown
    assert "Poison ranges, largest first" in run.text
    assert "At or over the delivery-count limit" in run.text
    facts = _charts_are_labelled(run)
    (delivery,) = facts["delivery_counts"]
    assert delivery["yscale"] == "log" and "delivery-count limit (1)" in delivery["legend"]
    assert "tombstone (deleted)" in facts["spso_over_time"][0]["legend"]
    # The sample's deleted group: every one of its share-partitions is deleted.
    (per_group,) = facts["state_per_group"]
    assert any(
        text.strip().startswith("only deleted share-partitions") for text in per_group["texts"]
    )


def _charts_are_labelled(run: Run) -> dict[str, list[dict[str, Any]]]:
    """Every axes has a y label and each figure's bottom axes an x label."""
    facts = run.figure_facts
    assert set(facts) == FIGURES[run.notebook]
    for name, axes in facts.items():
        assert all(ax["ylabel"] for ax in axes), (name, axes)
        assert axes[-1]["xlabel"], (name, axes)
    return facts


@ON_CONNECT_THEN_SLOW
def test_notebook_on_an_output_without_consumer_offsets(runs: dict[str, Run]) -> None:
    run = runs["partial"]
    assert "[missing] table 'share_groups'" in run.text and "--consumer-offsets" in run.text
    assert "No poison messages" in run.text
    # SHARESTATE_TOP_N=3 and SHARESTATE_GROUP_ID=group-000: the SPSO table has 3 rows of it.
    spso_cell = next(cell for cell in run.cells if '"spso_over_time"' in cell.source)
    (table,) = (
        output["data"]["text/plain"]
        for output in spso_cell.outputs
        if "text/html" in output.get("data", {})
    )
    assert table.count("group-000") == 3 and "group-001" not in table
    expected = FIGURES[run.notebook]
    assert run.figures == expected
    assert run.images == len(expected)
    facts = _charts_are_labelled(run)
    # No offset reached the limit (5) here, and its line is drawn all the same.
    (delivery,) = facts["delivery_counts"]
    assert delivery["yscale"] == "log" and "delivery-count limit (5)" in delivery["legend"]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_starts_with_a_parameters_cell(notebook: Path) -> None:
    cells = jupytext.read(notebook).cells
    first = cells[0]
    assert first.cell_type == "code" and "parameters" in first.metadata.get("tags", [])
    assert 'os.environ.get("SHARESTATE_OUTPUT"' in first.source
    assert notebook.stem in FIGURES, "add the notebook's figures to FIGURES"
    markdown = [cell for cell in cells if cell.cell_type == "markdown"]
    assert markdown and markdown[0].source.startswith("# "), "a title after the parameters"
