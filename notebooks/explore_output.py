# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% tags=["parameters"]
# Parameters: edit them here, or set the environment variables before starting Jupyter.
from __future__ import annotations

import os

# The job's --output folder: a local path, dbfs:/..., s3://..., abfss://...
OUTPUT = os.environ.get("SHARESTATE_OUTPUT", "out" if os.path.isdir("out") else "../out")
# The job's --output-format: "delta", "parquet", or "auto" (try Delta, then Parquet).
OUTPUT_FORMAT = os.environ.get("SHARESTATE_OUTPUT_FORMAT", "auto")
# How many share-partitions the per-share-partition charts show (the busiest ones).
TOP_N = int(os.environ.get("SHARESTATE_TOP_N", "6"))
# Only this share group in sections 2-4 (per share-partition); None: every group.
GROUP_ID = os.environ.get("SHARESTATE_GROUP_ID") or None
# Also save every figure as PNG in this folder; None: only show them.
FIGURES = os.environ.get("SHARESTATE_FIGURES") or None
# Read each Delta table at the version the last complete run left (its _checkpoint), so the
# tables are one run's even if a later run was killed part-way; False: the latest versions.
AT_CHECKPOINT = os.environ.get("SHARESTATE_AT_CHECKPOINT", "1") != "0"

# %% [markdown]
# # Exploring a sharestate output
#
# This notebook reads the tables that `sharestate replay` wrote under `OUTPUT` (set in the
# cell above, or with `SHARESTATE_OUTPUT`) and charts them:
#
# 1. **Overview**: share groups, the replayed state per group, findings by severity.
# 2. **SPSO over time** of the busiest share-partitions.
# 3. **Delivery counts** of the records still in flight.
# 4. **Poison and archived messages.**
# 5. **Pruning cut-off** per `__share_group_state` partition.
#
# It only reads: nothing is written to `OUTPUT`. A table the run did not write (for example
# `share_groups` when the job ran without `--consumer-offsets`) is reported and its charts
# are skipped. What every column means: docs/output-tables.md.

# %%
from functools import reduce
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import display
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

# On Databricks (or wherever a session exists) use it; with SPARK_REMOTE set, the Spark
# Connect server it names; else start a local one configured like `make run`
# (conf/spark-job.conf, conf/spark-local.conf and the Delta jars in .jars/).
spark = SparkSession.getActiveSession()
if spark is None and os.environ.get("SPARK_REMOTE"):
    spark = SparkSession.builder.remote(os.environ["SPARK_REMOTE"]).getOrCreate()
if spark is None:
    from sharestate.job.session import JOB_SPARK_CONF, local_session, spark_conf_files

    _root = next(
        (p for p in (Path.cwd(), *Path.cwd().parents) if (p / JOB_SPARK_CONF).is_file()), None
    )
    spark = local_session(
        app_name="sharestate-notebook",
        conf_file=spark_conf_files(_root) if _root else [],
        jars_dir=os.environ.get("SHARESTATE_JARS") or (_root / ".jars" if _root else None),
        conf={
            "spark.ui.showConsoleProgress": "false",
            # The output tables are small Delta logs: don't spread reading them over 50 tasks.
            "spark.databricks.delta.snapshotPartitions": "2",
        },
    )
    spark.sparkContext.setLogLevel("ERROR")

NO_DELTA = (
    "This Spark session cannot read Delta tables: start it with the Delta Lake jars (`make "
    "setup` puts them in .jars/, SHARESTATE_JARS names another folder), or set OUTPUT_FORMAT "
    "= 'parquet' for an output written with --output-format parquet."
)
#: Why a table can be missing from an output.
WRITTEN_ONLY_WITH = {
    "share_group_records": "--consumer-offsets",
    "share_groups": "--consumer-offsets",
    "share_partition_lag": "--end-offsets",
}


def checkpointed_versions() -> dict[str, int]:
    """Table -> the Delta version the last complete run left, from the output's
    `_checkpoint` (`table_versions`, on every row); empty: read the latest versions
    (AT_CHECKPOINT off, a Parquet output, or a checkpoint that names none)."""
    if not AT_CHECKPOINT or OUTPUT_FORMAT == "parquet":
        return {}
    try:
        checkpoint = spark.read.format("delta").load(f"{OUTPUT.rstrip('/')}/_checkpoint")
        row = checkpoint.select("table_versions", "written_at").first()
    except Exception:  # no checkpoint, not Delta, or an older one without table_versions
        return {}
    if row is None or not row["table_versions"]:
        return {}
    print(f"reading the tables of the last complete run (written {row['written_at']} UTC)")
    return dict(row["table_versions"])


VERSIONS = checkpointed_versions()


def load_table(name: str) -> DataFrame | None:
    """The output table `name` (at its VERSIONS entry), or None (with a message saying why)
    when it is not there."""
    path = f"{OUTPUT.rstrip('/')}/{name}"
    if VERSIONS and name not in VERSIONS:
        why = WRITTEN_ONLY_WITH.get(name)
        hint = f"; the job writes it only when run with {why}" if why else ""
        print(f"[missing] table {name!r} is not one the last complete run wrote{hint}.")
        return None
    formats = ["delta", "parquet"] if OUTPUT_FORMAT == "auto" else [OUTPUT_FORMAT]
    errors = []
    for fmt in formats:
        try:
            reader = spark.read.format(fmt)
            if fmt == "delta" and name in VERSIONS:
                reader = reader.option("versionAsOf", VERSIONS[name])
            table = reader.load(path)
            table.schema  # noqa: B018 - resolved here: a Spark Connect session analyses lazily
            return table
        except Exception as err:  # AnalysisException; a Py4J error when Delta is not installed
            message = str(err).strip() or type(err).__name__
            # Without Delta, a Delta table read as Parquet would show stale files too.
            no_delta = fmt == "delta" and "DATA_SOURCE_NOT_FOUND" in message
            if no_delta and (OUTPUT_FORMAT == "delta" or os.path.isdir(f"{path}/_delta_log")):
                raise RuntimeError(NO_DELTA) from None
            errors.append(f"{fmt}: {message.splitlines()[0]}")
    why = WRITTEN_ONLY_WITH.get(name)
    hint = f"the job writes it only when run with {why}" if why else "; ".join(errors)
    print(f"[missing] table {name!r} is not in {OUTPUT} ({hint}): skipping what needs it.")
    return None


#: What each figure shows, per axes (labels, scale, legend entries, annotations): a record
#: for checking the charts without looking at them (tests/spark/test_notebooks.py reads it).
FIGURE_FACTS: dict[str, list[dict[str, object]]] = {}


def show_figure(fig: plt.Figure, name: str) -> None:
    """Show `fig`; with FIGURES set, also save it there as `name`.png."""
    FIGURE_FACTS[name] = [
        {
            "xlabel": ax.get_xlabel(),
            "ylabel": ax.get_ylabel(),
            "yscale": ax.get_yscale(),
            "legend": [t.get_text() for t in ax.get_legend().get_texts()]
            if ax.get_legend()
            else [],
            "texts": [t.get_text() for t in ax.texts],
        }
        for ax in fig.axes
    ]
    fig.tight_layout()
    if FIGURES:
        Path(FIGURES).mkdir(parents=True, exist_ok=True)
        fig.savefig(Path(FIGURES) / f"{name}.png", dpi=90)
    plt.show()


#: The columns that name a share-partition.
KEYS = ["group_id", "topic_id", "partition"]


def in_scope(df: DataFrame) -> DataFrame:
    """`df` limited to share group GROUP_ID, when set."""
    return df.filter(F.col("group_id") == GROUP_ID) if GROUP_ID else df


def share_partition_label(row: pd.Series) -> str:
    return f"{row['group_id']} / {row['topic_id']} / {int(row['partition'])}"


print(f"reading {OUTPUT} (format {OUTPUT_FORMAT}) with Spark {spark.version}")

# %% [markdown]
# ## 1. Overview
#
# **Share groups** (from `__consumer_offsets`): epochs, live members, and the
# topic-partitions each group has initialized. A deleted group should have no live share
# state left (finding `state_for_deleted_group` if it does).

# %%
share_groups = load_table("share_groups")
if share_groups is not None:
    display(
        share_groups.select(
            "group_id",
            "deleted",
            "group_epoch",
            "assignment_epoch",
            "member_count",
            "initialized_partitions",
            "initializing_partitions",
            "deleting_topic_count",
            "topic_names",
            "last_source_timestamp",
        )
        .orderBy("group_id")
        .toPandas()
        .convert_dtypes()
    )

# %% [markdown]
# **Replayed state per group** (`share_partition_state`): how many share-partitions each
# group has (and how many are deleted), and the offsets its live share-partitions hold in
# flight, per delivery state. Many *Available* offsets means records wait for a consumer;
# many *Acquired* offsets that stay put means consumers hold records without acknowledging.

# %%
state = load_table("share_partition_state")
if state is not None:
    live = ~F.coalesce(F.col("deleted"), F.lit(False))
    per_group = (
        state.groupBy("group_id")
        .agg(
            F.count(F.lit(1)).alias("share_partitions"),
            F.count(F.when(~live, 1)).alias("deleted"),
            F.count(F.when(F.col("replay_error").isNotNull(), 1)).alias("replay_errors"),
            *(
                F.sum(F.when(live, F.col(f"{s}_offsets"))).alias(s)
                for s in ("available", "acquired", "acknowledged", "archived")
            ),
        )
        .orderBy("group_id")
        .toPandas()
    )
    display(per_group.convert_dtypes())
    if per_group.empty:
        print("share_partition_state is empty: the export had no decodable share-state record.")
    else:
        in_flight = per_group.set_index("group_id")[
            ["available", "acquired", "acknowledged", "archived"]
        ].fillna(0)
        fig, ax = plt.subplots(figsize=(10, max(2.5, 1 + 0.45 * len(in_flight))))
        in_flight.plot.barh(stacked=True, ax=ax, color=["C0", "C1", "C2", "C7"])
        ax.legend(title="delivery state", loc="upper left", bbox_to_anchor=(1.01, 1))
        ax.set_xlabel("offsets in flight (live share-partitions)")
        ax.set_ylabel("share group")
        # A group whose share-partitions are all deleted has no bar: say so on its row.
        for row, group in enumerate(per_group.itertuples()):
            if group.share_partitions > 0 and group.deleted == group.share_partitions:
                ax.text(
                    0,
                    row,
                    f"  only deleted share-partitions ({group.deleted})",
                    va="center",
                    color="tab:gray",
                    fontsize=9,
                )
        ax.invert_yaxis()
        ax.set_title("In-flight offsets per group and delivery state")
        show_figure(fig, "state_per_group")

# %% [markdown]
# **Findings** (`findings`): `error` means the replay cannot match what Kafka holds,
# `warning` needs a look, `info` is expected. The table lists errors and warnings first,
# with the record to look at (`source_partition`, `source_offset`) and what to do.

# %%
findings = load_table("findings")
if findings is not None:
    by_code = findings.groupBy("severity", "code").count().toPandas()
    if by_code.empty:
        print("No findings: nothing to report.")
    else:
        by_code["rank"] = by_code["severity"].map({"error": 0, "warning": 1, "info": 2})
        by_code = by_code.sort_values(["rank", "count"], ascending=[True, False])
        colors = {"error": "tab:red", "warning": "tab:orange", "info": "tab:gray"}
        fig, ax = plt.subplots(figsize=(10, max(2.5, 1 + 0.4 * len(by_code))))
        ax.barh(
            by_code["code"],
            by_code["count"],
            color=[colors.get(s, "tab:blue") for s in by_code["severity"]],
        )
        ax.invert_yaxis()
        ax.legend(
            handles=[Patch(color=c, label=s) for s, c in colors.items()],
            title="severity",
            loc="upper left",
            bbox_to_anchor=(1.01, 1),
        )
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("findings")
        ax.set_ylabel("finding code")
        ax.set_title("Findings by code")
        show_figure(fig, "findings")
        severity_rank = (
            F.when(F.col("severity") == "error", 0).when(F.col("severity") == "warning", 1)
        ).otherwise(2)
        display(
            findings.orderBy(severity_rank, "code", "group_id", "topic_id", "partition")
            .select(
                "severity",
                "code",
                "group_id",
                "topic_id",
                "partition",
                "source",
                "source_partition",
                "source_offset",
                "affected",
                "message",
            )
            .limit(50)
            .toPandas()
            .convert_dtypes()
        )

# %% [markdown]
# ## 2. SPSO over time
#
# The share-partition start offset (SPSO) after every applied record
# (`share_partition_history`), for the `TOP_N` share-partitions with the most records
# (only group `GROUP_ID` if set). Solid: `start_offset` as persisted; dashed:
# `effective_start_offset`, moved past leading acknowledged/archived batches (what the
# share-partition leader uses on load). Red dotted lines: tombstones (deleted).
#
# **What to look for:** a line that rises in steps is a share-partition whose consumers keep
# up. A **flat** line while records keep arriving is a **stuck** share-partition: a record
# at the start that is never acknowledged (often one heading for the delivery-count limit,
# see section 4) or a consumer holding its acquisition. The table under the chart gives,
# per share-partition, how long the effective SPSO has not moved before the export's last
# record and how many offsets wait; the job reports long stalls as `spso_stalled` findings.

# %%
history = load_table("share_partition_history")
if history is not None:
    scoped = in_scope(history)
    busiest = scoped.groupBy(*KEYS).count().orderBy(F.desc("count"), *KEYS).limit(TOP_N)
    spso = (
        scoped.join(F.broadcast(busiest), KEYS)
        .select(
            *KEYS,
            "count",
            "source_timestamp",
            "source_partition",
            "source_offset",
            "deleted",
            "start_offset",
            "effective_start_offset",
            "available_offsets",
            "acquired_offsets",
        )
        .orderBy(F.desc("count"), *KEYS, "source_timestamp", "source_offset")
        .toPandas()
    )
    export_end = history.agg(F.max("source_timestamp")).first()[0]
    if spso.empty:
        print(f"No share-partition history{f' for group {GROUP_ID!r}' if GROUP_ID else ''}.")
    else:
        groups = list(spso.groupby(KEYS, sort=False))
        fig, axes = plt.subplots(
            len(groups), 1, figsize=(10, 2.3 * len(groups)), sharex=True, squeeze=False
        )
        summary = []
        for ax, ((group_id, topic_id, partition), rows) in zip(axes[:, 0], groups, strict=True):
            deleted = bool(rows["deleted"].eq(True).iloc[-1])
            # -1: not initialized yet. A live share-partition keeps its last SPSO until the
            # export's last record; a deleted one has none.
            times = [*rows["source_timestamp"], export_end]
            for column, style in (("start_offset", "-"), ("effective_start_offset", "--")):
                values = rows[column].where(rows[column] >= 0)
                end = float("nan") if deleted else values.iloc[-1]
                ax.step(times, [*values, end], where="post", linestyle=style, label=column)
            ax.ticklabel_format(axis="y", useOffset=False, style="plain")
            for moment in rows.loc[rows["deleted"].eq(True), "source_timestamp"]:
                ax.axvline(moment, color="tab:red", linestyle=":", linewidth=1)
            ax.set_title(
                f"{group_id} / {topic_id} / partition {partition} ({len(rows)} records)",
                fontsize=9,
            )
            ax.set_ylabel("offset")
            effective = rows["effective_start_offset"]
            moved = effective.ne(effective.shift())
            last = rows.iloc[-1]
            summary.append(
                {
                    "group_id": group_id,
                    "topic_id": topic_id,
                    "partition": partition,
                    "records": len(rows),
                    "deleted": deleted,
                    "effective_start_offset": last["effective_start_offset"],
                    "not_moved_for": None
                    if deleted
                    else export_end - rows.loc[moved, "source_timestamp"].max(),
                    "waiting_offsets": int(
                        last[["available_offsets", "acquired_offsets"]]
                        .astype(float)
                        .fillna(0)
                        .sum()
                    ),
                }
            )
        axes[0, 0].legend(
            handles=[
                Line2D([], [], color="C0", linestyle="-", label="start_offset"),
                Line2D([], [], color="C1", linestyle="--", label="effective_start_offset"),
                Line2D([], [], color="tab:red", linestyle=":", label="tombstone (deleted)"),
            ],
            loc="upper left",
            fontsize=8,
        )
        axes[-1, 0].set_xlabel("record time (UTC)")
        fig.autofmt_xdate()
        show_figure(fig, "spso_over_time")
        display(pd.DataFrame(summary).convert_dtypes())

# %% [markdown]
# ## 3. Delivery counts
#
# How many times the offsets still in flight (`delivery_counts`, the final state of live
# share-partitions; only group `GROUP_ID` if set) have been delivered, per delivery state,
# on a log scale (a few offsets at high counts would not show beside thousands at 1).
# Most offsets should sit at count 1. A tail of high counts means records that consumers
# keep failing or releasing; at the delivery-count limit (red line, the run's
# `--delivery-count-limit`) Kafka archives them: they become poison messages.


# %%
def delivery_count_limit(delivery: DataFrame) -> int:
    """The run's --delivery-count-limit: from `run_summary` (runs record it), else the lowest
    count flagged at the limit, else Kafka's default 5."""
    summary = load_table("run_summary")
    if summary is not None and "delivery_count_limit" in summary.columns:
        row = summary.select("delivery_count_limit").first()
        if row is not None and row["delivery_count_limit"]:
            return int(row["delivery_count_limit"])
    flagged = delivery.filter("at_delivery_limit").agg(F.min("delivery_count")).first()[0]
    return int(flagged) if flagged is not None else 5


delivery = load_table("delivery_counts")
if delivery is not None:
    limit = delivery_count_limit(delivery)
    delivery = in_scope(delivery)
    counts = (
        delivery.groupBy("delivery_count", "delivery_state_name")
        .agg(F.sum("offsets").alias("offsets"), F.max("at_delivery_limit").alias("at_limit"))
        .toPandas()
    )
    if counts.empty:
        print("delivery_counts is empty: no live share-partition holds in-flight batches.")
    else:
        at_limit = counts.loc[counts["at_limit"].eq(True), "delivery_count"]
        histogram = counts.pivot_table(
            index="delivery_count", columns="delivery_state_name", values="offsets", aggfunc="sum"
        ).fillna(0)
        fig, ax = plt.subplots(figsize=(9, 4))
        # Bars at their delivery count (not one slot per count present), so the limit line
        # has its place even when no offset has reached it.
        stacked = pd.Series(0.0, index=histogram.index)
        for number, delivery_state in enumerate(histogram.columns):
            heights = histogram[delivery_state]
            ax.bar(
                histogram.index, heights, bottom=stacked, label=delivery_state, color=f"C{number}"
            )
            stacked = stacked + heights
        ax.axvline(
            limit - 0.5, color="tab:red", linestyle="--", label=f"delivery-count limit ({limit})"
        )
        ax.set_yscale("log")
        ax.set_xlim(min(histogram.index.min(), limit) - 1, max(histogram.index.max(), limit) + 1)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(title="delivery state", loc="upper right", fontsize=8)
        ax.set_xlabel("delivery count")
        ax.set_ylabel("offsets (log scale)")
        ax.set_title("Offsets in flight by delivery count and state")
        show_figure(fig, "delivery_counts")
        if at_limit.empty:
            print("No in-flight offset has reached the delivery-count limit.")
        else:
            print(
                f"At or over the delivery-count limit (from count {at_limit.min()} here), "
                "largest first:"
            )
            display(
                delivery.filter("at_delivery_limit")
                .groupBy(*KEYS, "delivery_state_name")
                .agg(F.sum("offsets").alias("offsets"), F.max("delivery_count").alias("max_count"))
                .orderBy(F.desc("offsets"), *KEYS)
                .limit(20)
                .toPandas()
                .convert_dtypes()
            )

# %% [markdown]
# ## 4. Poison and archived messages
#
# **Poison messages** (`poison_messages`) are offset ranges Kafka archived because they hit
# the delivery-count limit: consumers received them that many times and never acknowledged
# them, so no consumer will see them again. Each is a record to inspect (replay it from the
# topic at `first_offset`..`last_offset`), and often a bug in the consumer.
# **Archived messages** (`archived_messages`) were archived below the limit: rejected by a
# consumer (`below_delivery_limit`), or never delivered (`never_delivered`).
#
# The chart shows the `TOP_N` share-partitions with the most archived offsets (only group
# `GROUP_ID` if set).

# %%
poison = load_table("poison_messages")
archived = load_table("archived_messages")
parts = []
if poison is not None:
    poison = in_scope(poison)
    parts.append(poison.select(*KEYS, F.lit("poison (delivery limit)").alias("reason"), "offsets"))
if archived is not None:
    parts.append(in_scope(archived).select(*KEYS, "reason", "offsets"))
if parts:
    all_ranges = reduce(DataFrame.unionByName, parts)
    per_partition = all_ranges.groupBy(*KEYS, "reason").agg(F.sum("offsets").alias("offsets"))
    per_partition = per_partition.toPandas()
    if per_partition.empty:
        print("No archived offsets at all: no record was archived, poison or otherwise.")
    else:
        display(
            per_partition.groupby("reason")["offsets"]
            .agg(["count", "sum"])
            .rename(columns={"count": "share_partitions", "sum": "offsets"})
        )
        per_partition["share_partition"] = per_partition.apply(share_partition_label, axis=1)
        chart = per_partition.pivot_table(
            index="share_partition", columns="reason", values="offsets", aggfunc="sum"
        ).fillna(0)
        chart = chart.loc[chart.sum(axis=1).sort_values(ascending=False).index[:TOP_N]]
        fig, ax = plt.subplots(figsize=(10, max(2.5, 1 + 0.45 * len(chart))))
        chart.plot.barh(stacked=True, ax=ax)
        ax.legend(title="reason", loc="upper left", bbox_to_anchor=(1.01, 1))
        ax.invert_yaxis()
        ax.set_xlabel("archived offsets")
        ax.set_ylabel("share-partition (group / topic id / partition)")
        ax.set_title(f"Archived offsets, top {len(chart)} share-partitions")
        show_figure(fig, "archived_offsets")
if poison is not None:
    poison_rows = (
        poison.orderBy(F.desc("offsets"), *KEYS, "first_offset")
        .select(
            *KEYS,
            "first_offset",
            "last_offset",
            "offsets",
            "delivery_count",
            "first_seen_timestamp",
            "last_seen_timestamp",
            "still_in_state",
            "below_start_offset",
        )
        .limit(20)
        .toPandas()
        .convert_dtypes()
    )
    if poison_rows.empty:
        print("No poison messages: no range was archived at the delivery-count limit.")
    else:
        print("Poison ranges, largest first:")
        display(poison_rows)

# %% [markdown]
# ## 5. Pruning cut-off per `__share_group_state` partition
#
# Kafka's share coordinator deletes each state-topic partition's log up to a cut-off: the
# oldest latest snapshot among the share-partitions it tracks there (`pruning_cutoff`).
# Top: each partition's exported offsets (grey) and its cut-off (red when Kafka would
# prune, black at 0: nothing to prune). Bottom: exported records before the cut-off, the
# ones Kafka would delete.
#
# **What to look for:** a cut-off far behind the partition's last offset is held back by one
# share-partition whose latest snapshot is old (`held_by_*`, in the table); that partition's
# log keeps growing. The table lists the partitions Kafka would not prune at all.

# %%
pruning = load_table("pruning_cutoff")
if pruning is not None:
    cutoffs = pruning.orderBy("source_partition").toPandas()
    if cutoffs.empty:
        print("pruning_cutoff is empty: no state-topic partition in the export.")
    else:
        x = cutoffs["source_partition"].astype(str)
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 6), sharex=True)
        top.bar(
            x,
            cutoffs["last_exported_offset"] - cutoffs["first_exported_offset"] + 1,
            bottom=cutoffs["first_exported_offset"],
            color="lightgray",
            label="exported offsets",
        )
        prunable = cutoffs["prunable"].eq(True)
        top.scatter(
            x[prunable],
            cutoffs.loc[prunable, "cutoff_offset"],
            color="tab:red",
            marker="_",
            s=300,
            label="cut-off (prunable)",
        )
        top.scatter(
            x[~prunable],
            cutoffs.loc[~prunable, "cutoff_offset"],
            color="black",
            marker="_",
            s=300,
            label="cut-off (nothing to prune)",
        )
        top.set_ylabel("offset")
        top.legend(fontsize=8)
        top.set_title("Exported offsets and pruning cut-off per state-topic partition")
        bottom.bar(x, cutoffs["records_before_cutoff"], color="tab:red")
        bottom.set_ylabel("records before cut-off")
        bottom.set_xlabel("__share_group_state partition")
        bottom.tick_params(axis="x", labelrotation=90)
        show_figure(fig, "pruning_cutoff")
        held = cutoffs.loc[
            ~prunable,
            [
                "source_partition",
                "cutoff_offset",
                "exported_records",
                "live_share_partitions",
                "untracked_live_share_partitions",
                "held_by_group_id",
                "held_by_topic_id",
                "held_by_partition",
            ],
        ]
        print(f"{int(prunable.sum())} of {len(cutoffs)} partitions prunable; the others:")
        display(held.convert_dtypes())
