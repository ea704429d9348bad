package sharestate.jvm;

import java.util.Iterator;
import java.util.NoSuchElementException;
import java.util.Objects;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.api.java.function.Function2;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The replay's fold (sharestate/fold.py fold_batches) on the JVM: rows sorted by
 * (share-partition, log order) in, one history row per input row out, with the columns of
 * HISTORY_FIELDS; the fold numbers the segments (the running sum a window would give). The
 * one difference from the Python fold: state_batches is set on each segment's last row only
 * (Python also sets it on each Arrow batch's last row).
 */
public final class Fold {
  private Fold() {}

  /** The fold's input columns (sharestate/fold.py FOLD_INPUT). */
  static final String[] INPUT = {
    "group_id", "topic_id", "partition", "seed_segment", "source_partition", "source_offset",
    "source_timestamp", "record_type", "start_offset", "state_epoch", "leader_epoch",
    "snapshot_epoch", "create_timestamp", "write_timestamp", "delivery_complete_count",
    "state_batches", "seed_last_snapshot_offset", "seed_since",
  };

  static final StructType BATCH = new StructType(new StructField[] {
    new StructField("first_offset", DataTypes.LongType, false, Metadata.empty()),
    new StructField("last_offset", DataTypes.LongType, false, Metadata.empty()),
    new StructField("delivery_state", DataTypes.IntegerType, false, Metadata.empty()),
    new StructField("delivery_count", DataTypes.IntegerType, false, Metadata.empty()),
  });

  private static StructField field(String name, DataType type) {
    return new StructField(name, type, true, Metadata.empty());
  }

  /** sharestate.fold.MOVED_AT_TYPE: where the effective start offset last moved. */
  static final StructType MOVED_AT = new StructType(new StructField[] {
    field("source_timestamp", DataTypes.TimestampType),
    field("source_partition", DataTypes.IntegerType),
    field("source_offset", DataTypes.LongType),
  });

  /** from_arrow_schema(pa.schema(HISTORY_FIELDS)). */
  public static final StructType HISTORY = new StructType(new StructField[] {
    field("group_id", DataTypes.StringType),
    field("topic_id", DataTypes.StringType),
    field("partition", DataTypes.IntegerType),
    field("segment", DataTypes.LongType),
    field("source_partition", DataTypes.IntegerType),
    field("source_offset", DataTypes.LongType),
    field("source_timestamp", DataTypes.TimestampType),
    field("record_type", DataTypes.StringType),
    field("deleted", DataTypes.BooleanType),
    field("start_offset", DataTypes.LongType),
    field("effective_start_offset", DataTypes.LongType),
    field("state_epoch", DataTypes.IntegerType),
    field("leader_epoch", DataTypes.IntegerType),
    field("snapshot_epoch", DataTypes.IntegerType),
    field("create_timestamp", DataTypes.LongType),
    field("write_timestamp", DataTypes.LongType),
    field("delivery_complete_count", DataTypes.IntegerType),
    field("available_offsets", DataTypes.LongType),
    field("acquired_offsets", DataTypes.LongType),
    field("acknowledged_offsets", DataTypes.LongType),
    field("archived_offsets", DataTypes.LongType),
    field("state_batch_count", DataTypes.IntegerType),
    field("state_batches", new ArrayType(BATCH, false)),
    field("replay_error", DataTypes.StringType),
    field("last_snapshot_offset", DataTypes.LongType),
    field("last_of_share_partition", DataTypes.BooleanType),
    field("effective_start_offset_since", MOVED_AT),
    field("latest_source_timestamp", DataTypes.TimestampType),
  });

  static final int OUT_BATCHES = 22;
  static final int OUT_LAST = 25;
  static final int OUT_SINCE = 26;
  static final int OUT_LATEST = 27;
  static final int OUT_WIDTH = 28;

  /**
   * sharestate.fold.fold_batches over each partition, as Kafka major.minor replays: {history,
   * lastRows, tee}. {@code history} has a row per input row; {@code lastRows} only each
   * share-partition's last row (its final state), computed by the same pass through a
   * {@link Tee}: once {@code history} has gone through a partition, the last rows of that
   * partition are read from Spark's block manager instead of folding again (release the tee
   * when done with them). Either may be computed first or alone.
   *
   * <p>Rows go in and out as Spark's internal rows: a Row encoder's generated (de)serializer
   * for these 28 columns, with nested arrays and structs, outgrew what the JIT compiles and
   * ran interpreted, which cost more than the fold itself. With adaptive execution, turning
   * the input plan into an RDD runs its shuffle here and then (as the JVM decode does).
   */
  public static Object[] fold(Dataset<Row> input, int kafkaMajor, int kafkaMinor) {
    StructType schema = input.schema();
    int[] columns = new int[INPUT.length];
    for (int i = 0; i < INPUT.length; i++) {
      columns[i] = schema.fieldIndex(INPUT[i]);
    }
    org.apache.spark.sql.classic.Dataset<Row> classic =
        (org.apache.spark.sql.classic.Dataset<Row>) input;
    org.apache.spark.sql.classic.SparkSession session = classic.sparkSession();
    JavaRDD<InternalRow> in = classic.queryExecution().toRdd().toJavaRDD();
    JavaRDD<InternalRow> lastRows =
        in.mapPartitions(new FoldFunction(kafkaMajor, kafkaMinor, columns, null))
            .filter(row -> row.getBoolean(OUT_LAST));
    Tee tee = new Tee(lastRows);
    JavaRDD<InternalRow> history =
        in.mapPartitionsWithIndex(new FoldFunction(kafkaMajor, kafkaMinor, columns, tee), false);
    return new Object[] {
      session.internalCreateDataFrame(history.rdd(), HISTORY, false),
      session.internalCreateDataFrame(lastRows.rdd(), HISTORY, false),
      tee,
    };
  }

  /** The fold of one partition; with a tee, its last rows also go to the tee's sibling. */
  static final class FoldFunction
      implements FlatMapFunction<Iterator<InternalRow>, InternalRow>,
          Function2<Integer, Iterator<InternalRow>, Iterator<InternalRow>> {
    private static final long serialVersionUID = 1L;
    private final int major;
    private final int minor;
    private final int[] columns;
    private final Tee tee;

    FoldFunction(int major, int minor, int[] columns, Tee tee) {
      this.major = major;
      this.minor = minor;
      this.columns = columns.clone();
      this.tee = tee;
    }

    @Override
    public Iterator<InternalRow> call(Iterator<InternalRow> rows) {
      return new FoldIterator(rows, major, minor, columns, null);
    }

    @Override
    public Iterator<InternalRow> call(Integer partition, Iterator<InternalRow> rows) {
      return new FoldIterator(rows, major, minor, columns, tee.sink(partition));
    }
  }

  static final UTF8String SNAPSHOT = UTF8String.fromString("snapshot");
  static final UTF8String UPDATE = UTF8String.fromString("update");
  static final UTF8String TOMBSTONE = UTF8String.fromString("tombstone");
  static final UTF8String SEED = UTF8String.fromString(FoldSegment.SEED);
  static final UTF8String SEED_DELETED = UTF8String.fromString(FoldSegment.SEED_DELETED);
  private static final UTF8String[] KINDS = {UPDATE, SNAPSHOT, TOMBSTONE, SEED, SEED_DELETED};

  static final class FoldIterator implements Iterator<InternalRow> {
    private static final ArrayData NO_BATCHES = new GenericArrayData(new Object[0]);
    private final Iterator<InternalRow> in;
    private final FoldSegment segment;
    private final FoldBatches incoming = new FoldBatches();
    private final Moves moves = new Moves();
    private final int cGroup;
    private final int cTopic;
    private final int cPartition;
    private final int cSeedSegment;
    private final int cSourcePartition;
    private final int cSourceOffset;
    private final int cTimestamp;
    private final int cType;
    private final int cStart;
    private final int cStateEpoch;
    private final int cLeader;
    private final int cSnapshotEpoch;
    private final int cCreated;
    private final int cWritten;
    private final int cDcc;
    private final int cBatches;
    private final int cSeedSnapshot;
    private final int cSeedSince;
    private boolean primed;
    private Object[] pending;
    private boolean first = true;
    // The current share-partition and segment (strings copied: input rows are reused).
    private UTF8String group;
    private UTF8String topic;
    private Integer partition;
    private long segmentNumber;
    private Long lastSnapshot;

    /** Where this partition's last rows also go (as flat rows), or null. */
    private final Tee.Sink lastRows;
    private final UnsafeProjection flat;

    FoldIterator(Iterator<InternalRow> in, int major, int minor, int[] c, Tee.Sink lastRows) {
      this.in = in;
      this.lastRows = lastRows;
      this.flat = lastRows == null ? null : UnsafeProjection.create(HISTORY);
      this.segment = new FoldSegment(major, minor, new FoldCombiner());
      cGroup = c[0];
      cTopic = c[1];
      cPartition = c[2];
      cSeedSegment = c[3];
      cSourcePartition = c[4];
      cSourceOffset = c[5];
      cTimestamp = c[6];
      cType = c[7];
      cStart = c[8];
      cStateEpoch = c[9];
      cLeader = c[10];
      cSnapshotEpoch = c[11];
      cCreated = c[12];
      cWritten = c[13];
      cDcc = c[14];
      cBatches = c[15];
      cSeedSnapshot = c[16];
      cSeedSince = c[17];
    }

    @Override
    public boolean hasNext() {
      if (!primed) {
        primed = true;
        if (in.hasNext()) {
          pending = process(in.next(), null);
        } else if (lastRows != null) {
          lastRows.finish();
        }
      }
      return pending != null;
    }

    @Override
    public InternalRow next() {
      if (!hasNext()) {
        throw new NoSuchElementException();
      }
      Object[] out = pending;
      if (in.hasNext()) {
        pending = process(in.next(), out);
      } else {
        out[OUT_BATCHES] = batchesValue();
        endShare(out);
        pending = null;
      }
      GenericInternalRow row = new GenericInternalRow(out);
      if (lastRows != null) {
        if (Boolean.TRUE.equals(out[OUT_LAST])) {
          lastRows.add(flat.apply(row).copy());
        }
        if (pending == null) {
          lastRows.finish();
        }
      }
      return row;
    }

    private ArrayData batchesValue() {
      if (!segment.hasState) {
        return NO_BATCHES;
      }
      FoldBatches b = segment.batches;
      Object[] list = new Object[b.size];
      for (int i = 0; i < b.size; i++) {
        list[i] = new GenericInternalRow(new Object[] {b.first[i], b.last[i], b.state[i], b.count[i]});
      }
      return new GenericArrayData(list);
    }

    private static Long boxedLong(InternalRow row, int i) {
      return row.isNullAt(i) ? null : Long.valueOf(row.getLong(i));
    }

    private static Integer boxedInt(InternalRow row, int i) {
      return row.isNullAt(i) ? null : Integer.valueOf(row.getInt(i));
    }

    private static UTF8String copied(InternalRow row, int i) {
      return row.isNullAt(i) ? null : row.getUTF8String(i).clone();
    }

    /** The record type as one of the constants (no copy), or a copy of an unknown one. */
    private static UTF8String kindOf(InternalRow row, int i) {
      if (row.isNullAt(i)) {
        return null;
      }
      UTF8String kind = row.getUTF8String(i);
      for (UTF8String known : KINDS) {
        if (known.equals(kind)) {
          return known;
        }
      }
      return kind.clone();
    }

    private void readBatches(InternalRow row) {
      incoming.clear();
      if (row.isNullAt(cBatches)) {
        return;
      }
      ArrayData list = row.getArray(cBatches);
      for (int i = 0, n = list.numElements(); i < n; i++) {
        InternalRow b = list.getStruct(i, 4);
        incoming.add(b.getLong(0), b.getLong(1), b.getInt(2), b.getInt(3));
      }
    }

    /** Applies one row; {@code previous} is the row before it, finished here. */
    private Object[] process(InternalRow row, Object[] previous) {
      Integer p = boxedInt(row, cPartition);
      UTF8String kind = kindOf(row, cType);
      long step = 0;
      if (SNAPSHOT.equals(kind) || TOMBSTONE.equals(kind)) {
        step = 1;
      } else if ((SEED.equals(kind) || SEED_DELETED.equals(kind)) && !row.isNullAt(cSeedSegment)) {
        step = row.getLong(cSeedSegment);
      }
      boolean samePartition = !first
          && Objects.equals(row.isNullAt(cGroup) ? null : row.getUTF8String(cGroup), group)
          && Objects.equals(row.isNullAt(cTopic) ? null : row.getUTF8String(cTopic), topic)
          && Objects.equals(p, partition);
      if (!samePartition || step != 0) {
        if (previous != null) {
          previous[OUT_BATCHES] = batchesValue();
        }
        if (!samePartition) {
          if (previous != null) {
            endShare(previous);
          }
          moves.reset();
          group = copied(row, cGroup);
          topic = copied(row, cTopic);
          partition = p;
          lastSnapshot = null;
          segmentNumber = 0;
        }
        segmentNumber += step;
        segment.reset();
        first = false;
      }
      String error = null;
      try {
        apply(kind, row);
      } catch (FoldMergeException e) {
        error = e.getMessage();
      }
      Long sourceOffset = boxedLong(row, cSourceOffset);
      if (SNAPSHOT.equals(kind)) {
        lastSnapshot = sourceOffset;
      } else if (SEED.equals(kind) || SEED_DELETED.equals(kind)) {
        lastSnapshot = boxedLong(row, cSeedSnapshot);
      }
      Object[] out = new Object[OUT_WIDTH];
      out[0] = group;
      out[1] = topic;
      out[2] = partition;
      out[3] = segmentNumber;
      out[4] = boxedInt(row, cSourcePartition);
      out[5] = sourceOffset;
      out[6] = boxedLong(row, cTimestamp); // microseconds, Spark's internal timestamp
      out[7] = kind;
      if (segment.hasState) {
        FoldSegment st = segment;
        out[8] = Boolean.FALSE;
        out[9] = st.startOffset;
        out[10] = st.effectiveStartOffset();
        out[11] = st.stateEpoch;
        out[12] = st.leaderEpoch;
        out[13] = st.snapshotEpoch;
        out[14] = st.createTimestamp;
        out[15] = st.writeTimestamp;
        out[16] = st.deliveryCompleteCount;
        out[17] = st.counts[0];
        out[18] = st.counts[1];
        out[19] = st.counts[2];
        out[20] = st.counts[4];
        out[21] = st.batches.size;
      } else {
        out[8] = Boolean.TRUE;
      }
      out[23] = error == null ? null : UTF8String.fromString(error);
      out[24] = lastSnapshot;
      out[25] = Boolean.FALSE;
      Object effectiveStart = out[10];
      InternalRow moved = null;
      if (SEED.equals(kind) || SEED_DELETED.equals(kind)) {
        moved = row.isNullAt(cSeedSince) ? null : row.getStruct(cSeedSince, 3).copy();
      } else if (moves.changed(effectiveStart)) {
        moved = new GenericInternalRow(new Object[] {out[6], out[4], out[5]});
      }
      moves.add(moved, effectiveStart, (Long) out[6]);
      return out;
    }

    /** Marks {@code last} as its share-partition's last row, with its SINCE and latest time. */
    private void endShare(Object[] last) {
      last[OUT_LAST] = Boolean.TRUE;
      last[OUT_SINCE] = moves.since;
      last[OUT_LATEST] = moves.latest;
    }

    private void apply(UTF8String kind, InternalRow row) throws FoldMergeException {
      if (SEED.equals(kind)) {
        readBatches(row);
        segment.seed(row.getLong(cStart), row.getInt(cStateEpoch), row.getInt(cLeader),
            row.getInt(cSnapshotEpoch), boxedLong(row, cCreated), boxedLong(row, cWritten),
            boxedInt(row, cDcc), incoming);
        return;
      }
      if (TOMBSTONE.equals(kind) || SEED_DELETED.equals(kind)) {
        segment.delete();
        return;
      }
      readBatches(row);
      boolean snapshot = SNAPSHOT.equals(kind);
      if (snapshot || !segment.hasState) {
        segment.start(snapshot, row.getLong(cStart),
            snapshot ? row.getInt(cStateEpoch) : 0, row.getInt(cLeader),
            row.getInt(cSnapshotEpoch), snapshot ? boxedLong(row, cCreated) : null,
            snapshot ? boxedLong(row, cWritten) : null, boxedInt(row, cDcc), incoming);
        return;
      }
      segment.update(row.getLong(cStart), row.getInt(cLeader), boxedInt(row, cDcc), incoming);
    }
  }

  /**
   * sharestate.fold._Moves: SINCE (the latest log position after which the effective start
   * offset differed from the row before; the first row counts when it has one) and the
   * latest source timestamp of one share-partition, as
   * sharestate.audits.start_offset_moves computes them with a window.
   */
  static final class Moves {
    private static final Object NO_ROW = new Object();
    private Object previous = NO_ROW;
    InternalRow since;
    Long latest;

    void reset() {
      previous = NO_ROW;
      since = null;
      latest = null;
    }

    boolean changed(Object effectiveStart) {
      if (previous == NO_ROW) {
        return effectiveStart != null;
      }
      return !Objects.equals(effectiveStart, previous);
    }

    void add(InternalRow moved, Object effectiveStart, Long at) {
      if (moved != null && (since == null || compareMoved(moved, since) > 0)) {
        since = moved;
      }
      if (at != null && (latest == null || at > latest)) {
        latest = at;
      }
      previous = effectiveStart;
    }

    /** Spark's struct ordering of (timestamp, partition, offset): a null field first. */
    static int compareMoved(InternalRow a, InternalRow b) {
      int c = compare(a.isNullAt(0) ? null : a.getLong(0), b.isNullAt(0) ? null : b.getLong(0));
      if (c == 0) {
        c = compare(a.isNullAt(1) ? null : (long) a.getInt(1),
            b.isNullAt(1) ? null : (long) b.getInt(1));
      }
      if (c == 0) {
        c = compare(a.isNullAt(2) ? null : a.getLong(2), b.isNullAt(2) ? null : b.getLong(2));
      }
      return c;
    }

    static int compare(Long a, Long b) {
      if (a == null || b == null) {
        return a == null ? (b == null ? 0 : -1) : 1;
      }
      return Long.compare(a, b);
    }
  }
}
