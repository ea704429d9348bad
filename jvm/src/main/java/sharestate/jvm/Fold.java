package sharestate.jvm;

import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.Objects;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The replay's fold (sharestate/fold.py fold_batches) on the JVM: rows sorted by
 * (share-partition, segment, log order) in, one history row per input row out, with the
 * columns of HISTORY_FIELDS. The one difference from the Python fold: state_batches is set
 * on each segment's last row only (Python also sets it on each Arrow batch's last row).
 */
public final class Fold {
  private Fold() {}

  /** The fold's input columns (sharestate/replay.py _FOLD_INPUT). */
  static final String[] INPUT = {
    "group_id", "topic_id", "partition", "segment", "source_partition", "source_offset",
    "source_timestamp", "record_type", "start_offset", "state_epoch", "leader_epoch",
    "snapshot_epoch", "create_timestamp", "write_timestamp", "delivery_complete_count",
    "state_batches", "seed_last_snapshot_offset",
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
  });

  static final int OUT_BATCHES = 22;
  static final int OUT_LAST = 25;

  /** sharestate.fold.fold_batches over each partition, as Kafka major.minor replays. */
  public static Dataset<Row> fold(Dataset<Row> input, int kafkaMajor, int kafkaMinor) {
    StructType schema = input.schema();
    int[] columns = new int[INPUT.length];
    for (int i = 0; i < INPUT.length; i++) {
      columns[i] = schema.fieldIndex(INPUT[i]);
    }
    return input.mapPartitions(
        new FoldFunction(kafkaMajor, kafkaMinor, columns), Encoders.row(HISTORY));
  }

  static final class FoldFunction implements MapPartitionsFunction<Row, Row> {
    private static final long serialVersionUID = 1L;
    private final int major;
    private final int minor;
    private final int[] columns;

    FoldFunction(int major, int minor, int[] columns) {
      this.major = major;
      this.minor = minor;
      this.columns = columns;
    }

    @Override
    public Iterator<Row> call(Iterator<Row> rows) {
      return new FoldIterator(rows, major, minor, columns);
    }
  }

  static final class FoldIterator implements Iterator<Row> {
    private static final Object[] NO_BATCHES = new Object[0];
    private final Iterator<Row> in;
    private final FoldSegment segment;
    private final FoldBatches incoming = new FoldBatches();
    private final int cGroup;
    private final int cTopic;
    private final int cPartition;
    private final int cSegment;
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
    private boolean primed;
    private Object[] pending;
    private boolean first = true;
    private String group;
    private String topic;
    private Object partition;
    private Object segmentNumber;
    private Long lastSnapshot;

    FoldIterator(Iterator<Row> in, int major, int minor, int[] c) {
      this.in = in;
      this.segment = new FoldSegment(major, minor, new FoldCombiner());
      cGroup = c[0];
      cTopic = c[1];
      cPartition = c[2];
      cSegment = c[3];
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
    }

    @Override
    public boolean hasNext() {
      if (!primed) {
        primed = true;
        if (in.hasNext()) {
          pending = process(in.next(), null);
        }
      }
      return pending != null;
    }

    @Override
    public Row next() {
      if (!hasNext()) {
        throw new NoSuchElementException();
      }
      Object[] out = pending;
      if (in.hasNext()) {
        pending = process(in.next(), out);
      } else {
        out[OUT_BATCHES] = batchesValue();
        out[OUT_LAST] = Boolean.TRUE;
        pending = null;
      }
      return RowFactory.create(out);
    }

    private Object[] batchesValue() {
      if (!segment.hasState) {
        return NO_BATCHES;
      }
      FoldBatches b = segment.batches;
      Object[] list = new Object[b.size];
      for (int i = 0; i < b.size; i++) {
        list[i] = RowFactory.create(b.first[i], b.last[i], b.state[i], b.count[i]);
      }
      return list;
    }

    private static Long boxedLong(Row row, int i) {
      return row.isNullAt(i) ? null : Long.valueOf(row.getLong(i));
    }

    private static Integer boxedInt(Row row, int i) {
      return row.isNullAt(i) ? null : Integer.valueOf(row.getInt(i));
    }

    private void readBatches(Row row) {
      incoming.clear();
      if (row.isNullAt(cBatches)) {
        return;
      }
      List<Row> list = row.getList(cBatches);
      for (int i = 0, n = list.size(); i < n; i++) {
        Row b = list.get(i);
        incoming.add(b.getLong(0), b.getLong(1), b.getInt(2), b.getInt(3));
      }
    }

    /** Applies one row; {@code previous} is the row before it, finished here. */
    private Object[] process(Row row, Object[] previous) {
      String g = row.getString(cGroup);
      String t = row.getString(cTopic);
      Object p = row.get(cPartition);
      Object s = row.get(cSegment);
      boolean samePartition = !first && Objects.equals(g, group) && Objects.equals(t, topic)
          && Objects.equals(p, partition);
      if (!samePartition || !Objects.equals(s, segmentNumber)) {
        if (previous != null) {
          previous[OUT_BATCHES] = batchesValue();
        }
        if (!samePartition) {
          if (previous != null) {
            previous[OUT_LAST] = Boolean.TRUE;
          }
          group = g;
          topic = t;
          partition = p;
          lastSnapshot = null;
        }
        segmentNumber = s;
        segment.reset();
        first = false;
      }
      String kind = row.getString(cType);
      String error = null;
      try {
        apply(kind, row);
      } catch (FoldMergeException e) {
        error = e.getMessage();
      }
      if ("snapshot".equals(kind)) {
        lastSnapshot = boxedLong(row, cSourceOffset);
      } else if (FoldSegment.SEED.equals(kind) || FoldSegment.SEED_DELETED.equals(kind)) {
        lastSnapshot = boxedLong(row, cSeedSnapshot);
      }
      Object[] out = new Object[26];
      out[0] = g;
      out[1] = t;
      out[2] = p;
      out[3] = s;
      out[4] = row.get(cSourcePartition);
      out[5] = row.get(cSourceOffset);
      out[6] = row.get(cTimestamp);
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
      out[23] = error;
      out[24] = lastSnapshot;
      out[25] = Boolean.FALSE;
      return out;
    }

    private void apply(String kind, Row row) throws FoldMergeException {
      if (FoldSegment.SEED.equals(kind)) {
        readBatches(row);
        segment.seed(row.getLong(cStart), row.getInt(cStateEpoch), row.getInt(cLeader),
            row.getInt(cSnapshotEpoch), boxedLong(row, cCreated), boxedLong(row, cWritten),
            boxedInt(row, cDcc), incoming);
        return;
      }
      if ("tombstone".equals(kind) || FoldSegment.SEED_DELETED.equals(kind)) {
        segment.delete();
        return;
      }
      readBatches(row);
      if ("snapshot".equals(kind) || !segment.hasState) {
        boolean snapshot = "snapshot".equals(kind);
        segment.start(snapshot, row.getLong(cStart),
            snapshot ? row.getInt(cStateEpoch) : 0, row.getInt(cLeader),
            row.getInt(cSnapshotEpoch), snapshot ? boxedLong(row, cCreated) : null,
            snapshot ? boxedLong(row, cWritten) : null, boxedInt(row, cDcc), incoming);
        return;
      }
      segment.update(row.getLong(cStart), row.getInt(cLeader), boxedInt(row, cDcc), incoming);
    }
  }
}
