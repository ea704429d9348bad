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
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import sharestate.jvm.Contract.DeliveryState;
import sharestate.jvm.Contract.FoldInput;
import sharestate.jvm.Contract.History;
import sharestate.jvm.Contract.MovedAt;
import sharestate.jvm.Contract.RecordType;
import sharestate.jvm.Contract.StateBatch;

/**
 * The replay's fold (sharestate/replay/fold.py fold_batches) on the JVM: rows sorted by
 * (share-partition, log order) in, one history row per input row out, with the columns of
 * HISTORY_FIELDS (their positions from {@code Contract}, generated from the Python lists); the
 * fold numbers the segments (the running sum a window would give). The one difference from the
 * Python fold: state_batches is set on each segment's last row only (Python also sets it on
 * each Arrow batch's last row).
 */
public final class Fold {
  private Fold() {}

  /** The fold's input (sharestate.replay.fold.FOLD_INPUT_FIELDS), by name, in any order. */
  static final StructType INPUT = Schemas.of(Contract.FoldInput.SCHEMA);

  /** The fold's output (sharestate.replay.fold.HISTORY_FIELDS). */
  public static final StructType HISTORY = Schemas.of(Contract.History.SCHEMA);

  /**
   * sharestate.replay.fold.fold_batches over each partition, as Kafka major.minor replays:
   * {history, lastRows, tee}. {@code history} has a row per input row; {@code lastRows} only each
   * share-partition's last row (its final state), computed by the same pass through a
   * {@link Tee}: once {@code history} has gone through a partition, the last rows of that
   * partition are read from Spark's block manager instead of folding again (release the tee
   * when done with them). Either may be computed first or alone.
   *
   * <p>Rows go in and out as Spark's internal rows: a Row encoder's generated (de)serializer
   * for these columns, with nested arrays and structs, outgrew what the JIT compiles and
   * ran interpreted, which cost more than the fold itself. With adaptive execution, turning
   * the input plan into an RDD runs its shuffle here and then (as the JVM decode does).
   */
  public static Object[] fold(Dataset<Row> input, int kafkaMajor, int kafkaMinor) {
    int[] columns = Schemas.positions("Fold", input.schema(), INPUT);
    org.apache.spark.sql.classic.Dataset<Row> classic =
        (org.apache.spark.sql.classic.Dataset<Row>) input;
    org.apache.spark.sql.classic.SparkSession session = classic.sparkSession();
    JavaRDD<InternalRow> in = classic.queryExecution().toRdd().toJavaRDD();
    JavaRDD<InternalRow> lastRows =
        in.mapPartitions(new FoldFunction(kafkaMajor, kafkaMinor, columns, null))
            .filter(row -> row.getBoolean(History.LAST_OF_SHARE_PARTITION));
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

  static final UTF8String SNAPSHOT = UTF8String.fromString(RecordType.SNAPSHOT);
  static final UTF8String UPDATE = UTF8String.fromString(RecordType.UPDATE);
  static final UTF8String TOMBSTONE = UTF8String.fromString(RecordType.TOMBSTONE);
  static final UTF8String SEED = UTF8String.fromString(RecordType.SEED);
  static final UTF8String SEED_DELETED = UTF8String.fromString(RecordType.SEED_DELETED);
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
      cGroup = c[FoldInput.GROUP_ID];
      cTopic = c[FoldInput.TOPIC_ID];
      cPartition = c[FoldInput.PARTITION];
      cSeedSegment = c[FoldInput.SEED_SEGMENT];
      cSourcePartition = c[FoldInput.SOURCE_PARTITION];
      cSourceOffset = c[FoldInput.SOURCE_OFFSET];
      cTimestamp = c[FoldInput.SOURCE_TIMESTAMP];
      cType = c[FoldInput.RECORD_TYPE];
      cStart = c[FoldInput.START_OFFSET];
      cStateEpoch = c[FoldInput.STATE_EPOCH];
      cLeader = c[FoldInput.LEADER_EPOCH];
      cSnapshotEpoch = c[FoldInput.SNAPSHOT_EPOCH];
      cCreated = c[FoldInput.CREATE_TIMESTAMP];
      cWritten = c[FoldInput.WRITE_TIMESTAMP];
      cDcc = c[FoldInput.DELIVERY_COMPLETE_COUNT];
      cBatches = c[FoldInput.STATE_BATCHES];
      cSeedSnapshot = c[FoldInput.SEED_LAST_SNAPSHOT_OFFSET];
      cSeedSince = c[FoldInput.SEED_SINCE];
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
        out[History.STATE_BATCHES] = batchesValue();
        endShare(out);
        pending = null;
      }
      GenericInternalRow row = new GenericInternalRow(out);
      if (lastRows != null) {
        if (Boolean.TRUE.equals(out[History.LAST_OF_SHARE_PARTITION])) {
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
        Object[] batch = new Object[StateBatch.WIDTH];
        batch[StateBatch.FIRST_OFFSET] = b.first[i];
        batch[StateBatch.LAST_OFFSET] = b.last[i];
        batch[StateBatch.DELIVERY_STATE] = b.state[i];
        batch[StateBatch.DELIVERY_COUNT] = b.count[i];
        list[i] = new GenericInternalRow(batch);
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
        InternalRow b = list.getStruct(i, StateBatch.WIDTH);
        incoming.add(b.getLong(StateBatch.FIRST_OFFSET), b.getLong(StateBatch.LAST_OFFSET),
            b.getInt(StateBatch.DELIVERY_STATE), b.getInt(StateBatch.DELIVERY_COUNT));
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
          previous[History.STATE_BATCHES] = batchesValue();
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
      Object[] out = new Object[History.WIDTH];
      out[History.GROUP_ID] = group;
      out[History.TOPIC_ID] = topic;
      out[History.PARTITION] = partition;
      out[History.SEGMENT] = segmentNumber;
      out[History.SOURCE_PARTITION] = boxedInt(row, cSourcePartition);
      out[History.SOURCE_OFFSET] = sourceOffset;
      // microseconds, Spark's internal timestamp
      out[History.SOURCE_TIMESTAMP] = boxedLong(row, cTimestamp);
      out[History.RECORD_TYPE] = kind;
      if (segment.hasState) {
        FoldSegment st = segment;
        out[History.DELETED] = Boolean.FALSE;
        out[History.START_OFFSET] = st.startOffset;
        out[History.EFFECTIVE_START_OFFSET] = st.effectiveStartOffset();
        out[History.STATE_EPOCH] = st.stateEpoch;
        out[History.LEADER_EPOCH] = st.leaderEpoch;
        out[History.SNAPSHOT_EPOCH] = st.snapshotEpoch;
        out[History.CREATE_TIMESTAMP] = st.createTimestamp;
        out[History.WRITE_TIMESTAMP] = st.writeTimestamp;
        out[History.DELIVERY_COMPLETE_COUNT] = st.deliveryCompleteCount;
        out[History.AVAILABLE_OFFSETS] = st.counts[DeliveryState.AVAILABLE];
        out[History.ACQUIRED_OFFSETS] = st.counts[DeliveryState.ACQUIRED];
        out[History.ACKNOWLEDGED_OFFSETS] = st.counts[DeliveryState.ACKNOWLEDGED];
        out[History.ARCHIVED_OFFSETS] = st.counts[DeliveryState.ARCHIVED];
        out[History.STATE_BATCH_COUNT] = st.batches.size;
      } else {
        out[History.DELETED] = Boolean.TRUE;
      }
      out[History.REPLAY_ERROR] = error == null ? null : UTF8String.fromString(error);
      out[History.LAST_SNAPSHOT_OFFSET] = lastSnapshot;
      out[History.LAST_OF_SHARE_PARTITION] = Boolean.FALSE;
      Object effectiveStart = out[History.EFFECTIVE_START_OFFSET];
      InternalRow moved = null;
      if (SEED.equals(kind) || SEED_DELETED.equals(kind)) {
        moved = row.isNullAt(cSeedSince) ? null : row.getStruct(cSeedSince, MovedAt.WIDTH).copy();
      } else if (moves.changed(effectiveStart)) {
        Object[] at = new Object[MovedAt.WIDTH];
        at[MovedAt.SOURCE_TIMESTAMP] = out[History.SOURCE_TIMESTAMP];
        at[MovedAt.SOURCE_PARTITION] = out[History.SOURCE_PARTITION];
        at[MovedAt.SOURCE_OFFSET] = out[History.SOURCE_OFFSET];
        moved = new GenericInternalRow(at);
      }
      moves.add(moved, effectiveStart, (Long) out[History.SOURCE_TIMESTAMP]);
      return out;
    }

    /** Marks {@code last} as its share-partition's last row, with its SINCE and latest time. */
    private void endShare(Object[] last) {
      last[History.LAST_OF_SHARE_PARTITION] = Boolean.TRUE;
      last[History.EFFECTIVE_START_OFFSET_SINCE] = moves.since;
      last[History.LATEST_SOURCE_TIMESTAMP] = moves.latest;
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
   * sharestate.replay.fold._Moves: SINCE (the latest log position after which the effective start
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
      int c = compare(longAt(a, MovedAt.SOURCE_TIMESTAMP), longAt(b, MovedAt.SOURCE_TIMESTAMP));
      if (c == 0) {
        c = compare(intAt(a, MovedAt.SOURCE_PARTITION), intAt(b, MovedAt.SOURCE_PARTITION));
      }
      if (c == 0) {
        c = compare(longAt(a, MovedAt.SOURCE_OFFSET), longAt(b, MovedAt.SOURCE_OFFSET));
      }
      return c;
    }

    private static Long longAt(InternalRow row, int i) {
      return row.isNullAt(i) ? null : row.getLong(i);
    }

    private static Long intAt(InternalRow row, int i) {
      return row.isNullAt(i) ? null : (long) row.getInt(i);
    }

    static int compare(Long a, Long b) {
      if (a == null || b == null) {
        return a == null ? (b == null ? 0 : -1) : 1;
      }
      return Long.compare(a, b);
    }
  }
}
