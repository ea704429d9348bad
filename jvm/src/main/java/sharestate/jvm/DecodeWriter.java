package sharestate.jvm;

import java.nio.charset.StandardCharsets;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeArrayWriter;
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter;
import sharestate.jvm.Contract.DecodeInput;
import sharestate.jvm.Contract.DecodeOutput;
import sharestate.jvm.Contract.RecordType;
import sharestate.jvm.Contract.StateBatch;

/**
 * Turns input rows (Contract.DecodeInput: key, value, partition, offset, timestamp) into output
 * rows of {@link DecodeShareState#OUTPUT} (positions: Contract.DecodeOutput), written straight
 * into one reused UnsafeRow buffer: no per-record objects beyond the input's byte arrays.
 * Strings are written as their UTF-8 bytes (an UnsafeRow stores a string exactly as it stores
 * binary).
 */
final class DecodeWriter {
  /** The record's value fields: null on a tombstone. */
  private static final int[] VALUE_FIELDS = {
    DecodeOutput.SNAPSHOT_EPOCH,
    DecodeOutput.STATE_EPOCH,
    DecodeOutput.LEADER_EPOCH,
    DecodeOutput.START_OFFSET,
    DecodeOutput.CREATE_TIMESTAMP,
    DecodeOutput.WRITE_TIMESTAMP,
    DecodeOutput.DELIVERY_COMPLETE_COUNT,
  };

  private static final byte[] TOMBSTONE = ascii(RecordType.TOMBSTONE);
  private static final byte[] SNAPSHOT = ascii(RecordType.SNAPSHOT);
  private static final byte[] UPDATE = ascii(RecordType.UPDATE);
  private static final byte[][] LAYOUTS = new byte[DecodeParser.LAYOUT_NAMES.length][];
  private static final byte[] BASE64URL =
      ascii("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_");

  static {
    for (int i = 0; i < LAYOUTS.length; i++) {
      LAYOUTS[i] = ascii(DecodeParser.LAYOUT_NAMES[i]);
    }
  }

  private final DecodeParser parser;
  private final UnsafeRowWriter row = new UnsafeRowWriter(DecodeOutput.WIDTH, 256);
  private final UnsafeArrayWriter batches = new UnsafeArrayWriter(row, 8);
  private final UnsafeRowWriter batch = new UnsafeRowWriter(batches, StateBatch.WIDTH);
  private final byte[] topicId = new byte[22];

  DecodeWriter(String[] layouts) {
    parser = new DecodeParser(layouts);
  }

  private static byte[] ascii(String text) {
    return text.getBytes(StandardCharsets.US_ASCII);
  }

  /** An input row's binary column, or null. */
  static byte[] bytes(InternalRow in, int ordinal) {
    return in.isNullAt(ordinal) ? null : in.getBinary(ordinal);
  }

  /** One output row for one input row; the returned row is reused by the next call. */
  UnsafeRow decode(InternalRow in) {
    byte[] key = bytes(in, DecodeInput.KEY);
    byte[] value = bytes(in, DecodeInput.VALUE);
    row.reset();
    row.zeroOutNullBytes();
    if (in.isNullAt(DecodeInput.PARTITION)) {
      row.setNullAt(DecodeOutput.SOURCE_PARTITION);
    } else {
      row.write(DecodeOutput.SOURCE_PARTITION, in.getInt(DecodeInput.PARTITION));
    }
    if (in.isNullAt(DecodeInput.OFFSET)) {
      row.setNullAt(DecodeOutput.SOURCE_OFFSET);
    } else {
      row.write(DecodeOutput.SOURCE_OFFSET, in.getLong(DecodeInput.OFFSET));
    }
    if (in.isNullAt(DecodeInput.TIMESTAMP)) {
      row.setNullAt(DecodeOutput.SOURCE_TIMESTAMP);
    } else {
      row.write(DecodeOutput.SOURCE_TIMESTAMP, in.getLong(DecodeInput.TIMESTAMP));
    }
    if (parser.parse(key, value)) {
      writeDecoded();
      row.setNullAt(DecodeOutput.DECODE_ERROR);
      row.setNullAt(DecodeOutput.KEY);
      row.setNullAt(DecodeOutput.VALUE);
      row.write(DecodeOutput.NEEDS_REFERENCE, false);
    } else {
      for (int i : DecodeOutput.RESULT) {
        row.setNullAt(i);
      }
      writeBytes(DecodeOutput.KEY, key);
      writeBytes(DecodeOutput.VALUE, value);
      row.write(DecodeOutput.NEEDS_REFERENCE, true);
    }
    return row.getRow();
  }

  private void writeBytes(int ordinal, byte[] bytes) {
    if (bytes == null) {
      row.setNullAt(ordinal);
    } else {
      row.write(ordinal, bytes);
    }
  }

  private void writeDecoded() {
    DecodeParser p = parser;
    boolean snapshot = p.recordType == DecodeParser.SNAPSHOT;
    row.write(DecodeOutput.RECORD_TYPE, p.tombstone ? TOMBSTONE : snapshot ? SNAPSHOT : UPDATE);
    row.write(DecodeOutput.GROUP_ID, p.key, p.groupAt, p.groupLength);
    encodeTopicId(p.key, p.topicAt);
    row.write(DecodeOutput.TOPIC_ID, topicId);
    row.write(DecodeOutput.PARTITION, p.partition);
    row.setNullAt(DecodeOutput.UNKNOWN_TAGGED_FIELDS);
    if (p.tombstone) {
      for (int i : VALUE_FIELDS) {
        row.setNullAt(i);
      }
      writeBatches(0); // the reference gives a tombstone an empty list, not null
      row.setNullAt(DecodeOutput.LAYOUT);
      row.setNullAt(DecodeOutput.VALUE_VERSION);
      return;
    }
    row.write(DecodeOutput.SNAPSHOT_EPOCH, p.snapshotEpoch);
    if (snapshot) {
      row.write(DecodeOutput.STATE_EPOCH, p.stateEpoch);
    } else {
      row.setNullAt(DecodeOutput.STATE_EPOCH);
    }
    row.write(DecodeOutput.LEADER_EPOCH, p.leaderEpoch);
    row.write(DecodeOutput.START_OFFSET, p.startOffset);
    if (snapshot && p.layout != DecodeParser.L40) {
      row.write(DecodeOutput.CREATE_TIMESTAMP, p.createTimestamp);
      row.write(DecodeOutput.WRITE_TIMESTAMP, p.writeTimestamp);
    } else {
      row.setNullAt(DecodeOutput.CREATE_TIMESTAMP);
      row.setNullAt(DecodeOutput.WRITE_TIMESTAMP);
    }
    if (p.hasDcc) {
      row.write(DecodeOutput.DELIVERY_COMPLETE_COUNT, p.dcc);
    } else {
      row.setNullAt(DecodeOutput.DELIVERY_COMPLETE_COUNT);
    }
    writeBatches(p.batchCount);
    row.write(DecodeOutput.LAYOUT, LAYOUTS[p.outputLayout()]);
    row.write(DecodeOutput.VALUE_VERSION, (short) 0);
  }

  private void writeBatches(int n) {
    DecodeParser p = parser;
    int start = row.cursor();
    batches.initialize(n);
    for (int i = 0; i < n; i++) {
      int elementStart = batches.cursor();
      batch.resetRowWriter();
      batch.write(StateBatch.FIRST_OFFSET, p.firstOffsets[i]);
      batch.write(StateBatch.LAST_OFFSET, p.lastOffsets[i]);
      batch.write(StateBatch.DELIVERY_STATE, p.deliveryStates[i]);
      batch.write(StateBatch.DELIVERY_COUNT, p.deliveryCounts[i]);
      batches.setOffsetAndSizeFromPreviousCursor(i, elementStart);
    }
    row.setOffsetAndSizeFromPreviousCursor(DecodeOutput.STATE_BATCHES, start);
  }

  /** Kafka's Uuid.toString: unpadded base64url of the 16 bytes, 22 characters. */
  private void encodeTopicId(byte[] b, int at) {
    int o = 0;
    for (int i = 0; i < 15; i += 3) {
      int v = ((b[at + i] & 0xff) << 16) | ((b[at + i + 1] & 0xff) << 8) | (b[at + i + 2] & 0xff);
      topicId[o++] = BASE64URL[(v >>> 18) & 63];
      topicId[o++] = BASE64URL[(v >>> 12) & 63];
      topicId[o++] = BASE64URL[(v >>> 6) & 63];
      topicId[o++] = BASE64URL[v & 63];
    }
    int last = b[at + 15] & 0xff;
    topicId[o++] = BASE64URL[last >>> 2];
    topicId[o] = BASE64URL[(last & 3) << 4];
  }
}
