package sharestate.jvm;

import java.nio.charset.StandardCharsets;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeArrayWriter;
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter;

/**
 * Turns input rows (key, value, partition, offset, timestamp) into output rows of
 * {@link DecodeShareState#COLUMNS}, written straight into one reused UnsafeRow buffer: no
 * per-record objects beyond the input's byte arrays. Strings are written as their UTF-8 bytes
 * (an UnsafeRow stores a string exactly as it stores binary).
 */
final class DecodeWriter {
  // Output ordinals (DecodeShareState.COLUMNS).
  private static final int SOURCE_PARTITION = 0;
  private static final int SOURCE_OFFSET = 1;
  private static final int SOURCE_TIMESTAMP = 2;
  private static final int RECORD_TYPE = 3;
  private static final int GROUP_ID = 4;
  private static final int TOPIC_ID = 5;
  private static final int PARTITION = 6;
  private static final int SNAPSHOT_EPOCH = 7;
  private static final int STATE_EPOCH = 8;
  private static final int LEADER_EPOCH = 9;
  private static final int START_OFFSET = 10;
  private static final int CREATE_TIMESTAMP = 11;
  private static final int WRITE_TIMESTAMP = 12;
  private static final int DELIVERY_COMPLETE_COUNT = 13;
  private static final int STATE_BATCHES = 14;
  private static final int LAYOUT = 15;
  private static final int VALUE_VERSION = 16;
  private static final int UNKNOWN_TAGGED_FIELDS = 17;
  private static final int DECODE_ERROR = 18;
  private static final int KEY = 19;
  private static final int VALUE = 20;
  static final int NEEDS_REFERENCE = 21;
  private static final int WIDTH = 22;

  private static final byte[] TOMBSTONE = ascii("tombstone");
  private static final byte[] SNAPSHOT = ascii("snapshot");
  private static final byte[] UPDATE = ascii("update");
  private static final byte[][] LAYOUTS = {ascii("4.0"), ascii("4.1"), ascii("4.2")};
  private static final byte[] BASE64URL =
      ascii("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_");

  private final DecodeParser parser;
  private final UnsafeRowWriter row = new UnsafeRowWriter(WIDTH, 256);
  private final UnsafeArrayWriter batches = new UnsafeArrayWriter(row, 8);
  private final UnsafeRowWriter batch = new UnsafeRowWriter(batches, 4);
  private final byte[] topicId = new byte[22];

  DecodeWriter(String[] layouts) {
    parser = new DecodeParser(layouts);
  }

  private static byte[] ascii(String text) {
    return text.getBytes(StandardCharsets.US_ASCII);
  }

  /** One output row for one input row; the returned row is reused by the next call. */
  UnsafeRow decode(InternalRow in) {
    byte[] key = in.isNullAt(0) ? null : in.getBinary(0);
    byte[] value = in.isNullAt(1) ? null : in.getBinary(1);
    row.reset();
    row.zeroOutNullBytes();
    if (in.isNullAt(2)) {
      row.setNullAt(SOURCE_PARTITION);
    } else {
      row.write(SOURCE_PARTITION, in.getInt(2));
    }
    if (in.isNullAt(3)) {
      row.setNullAt(SOURCE_OFFSET);
    } else {
      row.write(SOURCE_OFFSET, in.getLong(3));
    }
    if (in.isNullAt(4)) {
      row.setNullAt(SOURCE_TIMESTAMP);
    } else {
      row.write(SOURCE_TIMESTAMP, in.getLong(4));
    }
    if (parser.parse(key, value)) {
      writeDecoded();
      row.setNullAt(DECODE_ERROR);
      row.setNullAt(KEY);
      row.setNullAt(VALUE);
      row.write(NEEDS_REFERENCE, false);
    } else {
      for (int i = RECORD_TYPE; i <= DECODE_ERROR; i++) {
        row.setNullAt(i);
      }
      writeBytes(KEY, key);
      writeBytes(VALUE, value);
      row.write(NEEDS_REFERENCE, true);
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
    row.write(RECORD_TYPE, p.tombstone ? TOMBSTONE : snapshot ? SNAPSHOT : UPDATE);
    row.write(GROUP_ID, p.key, p.groupAt, p.groupLength);
    encodeTopicId(p.key, p.topicAt);
    row.write(TOPIC_ID, topicId);
    row.write(PARTITION, p.partition);
    row.setNullAt(UNKNOWN_TAGGED_FIELDS);
    if (p.tombstone) {
      for (int i = SNAPSHOT_EPOCH; i <= DELIVERY_COMPLETE_COUNT; i++) {
        row.setNullAt(i);
      }
      writeBatches(0); // the reference gives a tombstone an empty list, not null
      row.setNullAt(LAYOUT);
      row.setNullAt(VALUE_VERSION);
      return;
    }
    row.write(SNAPSHOT_EPOCH, p.snapshotEpoch);
    if (snapshot) {
      row.write(STATE_EPOCH, p.stateEpoch);
    } else {
      row.setNullAt(STATE_EPOCH);
    }
    row.write(LEADER_EPOCH, p.leaderEpoch);
    row.write(START_OFFSET, p.startOffset);
    if (snapshot && p.layout != DecodeParser.L40) {
      row.write(CREATE_TIMESTAMP, p.createTimestamp);
      row.write(WRITE_TIMESTAMP, p.writeTimestamp);
    } else {
      row.setNullAt(CREATE_TIMESTAMP);
      row.setNullAt(WRITE_TIMESTAMP);
    }
    if (p.hasDcc) {
      row.write(DELIVERY_COMPLETE_COUNT, p.dcc);
    } else {
      row.setNullAt(DELIVERY_COMPLETE_COUNT);
    }
    writeBatches(p.batchCount);
    row.write(LAYOUT, LAYOUTS[p.outputLayout()]);
    row.write(VALUE_VERSION, (short) 0);
  }

  private void writeBatches(int n) {
    DecodeParser p = parser;
    int start = row.cursor();
    batches.initialize(n);
    for (int i = 0; i < n; i++) {
      int elementStart = batches.cursor();
      batch.resetRowWriter();
      batch.write(0, p.firstOffsets[i]);
      batch.write(1, p.lastOffsets[i]);
      batch.write(2, p.deliveryStates[i]);
      batch.write(3, p.deliveryCounts[i]);
      batches.setOffsetAndSizeFromPreviousCursor(i, elementStart);
    }
    row.setOffsetAndSizeFromPreviousCursor(STATE_BATCHES, start);
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
