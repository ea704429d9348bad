package sharestate.jvm;

/**
 * Parses one `__share_group_state` record the way `sharestate.kafka.records.decode_share_state`
 * does, into reusable fields, and says whether the result is certain.
 *
 * <p>{@link #parse} returns true only when the reference decoder would decode the record
 * without error to exactly the fields held here: the key fits, the value is null on a snapshot
 * key (a tombstone) or a version-0 value that the first fitting layout, tried in the order
 * given, parses exactly with no unknown tagged field, and the group id is well-formed UTF-8.
 * Anything else returns false and is left to the reference decoder, which also words the
 * quarantine reason of every failing row.
 *
 * <p>Layout choice mirrors `_try_layouts`: a layout that cannot parse the value (any error)
 * is skipped, the first that parses it wins. A layout that parses it only with unknown tags
 * makes the reference look on for a later layout that parses it without: such rows go to the
 * reference.
 */
final class DecodeParser {
  static final int SNAPSHOT = 0;
  static final int UPDATE = 1;

  /** Layout codes. */
  static final int L40 = 0;

  static final int L41 = 1;
  static final int L42 = 2;
  static final String[] LAYOUT_NAMES = {"4.0", "4.1", "4.2"};

  private final int[] layouts;

  // --- the parsed record (valid after parse() returned true) ---
  int recordType; // SNAPSHOT or UPDATE
  boolean tombstone;
  byte[] key;
  int groupAt;
  int groupLength;
  int topicAt; // 16 bytes in key
  int partition;
  int layout; // L40 / L41 / L42; the name to output is layoutName()
  boolean autoDetect;
  int snapshotEpoch;
  int stateEpoch; // snapshots only
  int leaderEpoch;
  long startOffset;
  long createTimestamp; // 4.1+ snapshots only
  long writeTimestamp;
  boolean hasDcc;
  int dcc;
  int batchCount;
  long[] firstOffsets = new long[16];
  long[] lastOffsets = new long[16];
  int[] deliveryStates = new int[16];
  int[] deliveryCounts = new int[16];

  // --- reader state ---
  private byte[] buf;
  private int pos;
  private int end;
  private boolean unknownTags;

  DecodeParser(String[] layoutNames) {
    layouts = new int[layoutNames.length];
    for (int i = 0; i < layoutNames.length; i++) {
      layouts[i] = code(layoutNames[i]);
    }
    autoDetect = layouts.length > 1;
  }

  static int code(String name) {
    for (int i = 0; i < LAYOUT_NAMES.length; i++) {
      if (LAYOUT_NAMES[i].equals(name)) {
        return i;
      }
    }
    throw new IllegalArgumentException("unknown share-state layout " + name);
  }

  /** "4.2,4.0" -> its layouts, each checked. */
  static String[] checkLayouts(String csv) {
    String[] names = csv.split(",");
    if (names.length == 0) {
      throw new IllegalArgumentException("no layouts given");
    }
    for (int i = 0; i < names.length; i++) {
      names[i] = names[i].trim();
      code(names[i]);
    }
    return names;
  }

  /** The layout name the reference outputs (auto-detection names a tagless 4.2 record 4.1). */
  int outputLayout() {
    if (layout == L42 && !hasDcc && autoDetect) {
      return L41;
    }
    return layout;
  }

  /** True when the record decodes without doubt; its fields are then in this object. */
  boolean parse(byte[] keyBytes, byte[] value) {
    if (keyBytes == null || !parseKey(keyBytes)) {
      return false;
    }
    if (value == null) {
      // A null value on an update key is an error: the reference words it.
      tombstone = recordType == SNAPSHOT;
      return tombstone;
    }
    tombstone = false;
    if (value.length < 2 || value[0] != 0 || value[1] != 0) {
      return false; // truncated or an unknown value version
    }
    for (int candidate : layouts) {
      int fit = parseValue(value, candidate);
      if (fit == FIT) {
        layout = candidate;
        return true;
      }
      if (fit == FIT_WITH_UNKNOWN_TAGS) {
        return false;
      }
    }
    return false; // no layout fits: the reference words the reason
  }

  private boolean parseKey(byte[] k) {
    if (k.length < 4) {
      return false;
    }
    int type = (short) (((k[0] & 0xff) << 8) | (k[1] & 0xff));
    if (type != SNAPSHOT && type != UPDATE) {
      return false;
    }
    int glen = (short) (((k[2] & 0xff) << 8) | (k[3] & 0xff));
    if (glen < 0 || k.length != 4 + glen + 20) {
      return false;
    }
    if (!wellFormedUtf8(k, 4, glen)) {
      return false; // the reference replaces malformed bytes; leave that to it
    }
    key = k;
    recordType = type;
    groupAt = 4;
    groupLength = glen;
    topicAt = 4 + glen;
    partition = int32(k, topicAt + 16);
    return true;
  }

  static final int NO_FIT = 0;
  static final int FIT = 1;
  static final int FIT_WITH_UNKNOWN_TAGS = 2;

  /** Parse the value (after its version) with one layout, as `_decode_exactly` does. */
  private int parseValue(byte[] value, int candidate) {
    buf = value;
    pos = 2;
    end = value.length;
    unknownTags = false;
    hasDcc = false;
    boolean snapshot = recordType == SNAPSHOT;
    if (candidate == L40) {
      if (!need(2)) {
        return NO_FIT;
      }
      snapshotEpoch = ((buf[pos] & 0xff) << 8) | (buf[pos + 1] & 0xff);
      pos += 2;
    } else {
      if (!need(4)) {
        return NO_FIT;
      }
      snapshotEpoch = int32(buf, pos);
      pos += 4;
    }
    if (snapshot) {
      if (!need(4)) {
        return NO_FIT;
      }
      stateEpoch = int32(buf, pos);
      pos += 4;
    }
    if (!need(12)) {
      return NO_FIT;
    }
    leaderEpoch = int32(buf, pos);
    startOffset = int64(buf, pos + 4);
    pos += 12;
    if (snapshot && candidate != L40) {
      if (!need(16)) {
        return NO_FIT;
      }
      createTimestamp = int64(buf, pos);
      writeTimestamp = int64(buf, pos + 8);
      pos += 16;
    }
    // StateBatches: compact array, non-nullable, elements of at least 20 bytes.
    long countPlusOne = uvarint();
    if (countPlusOne <= 0) {
      return NO_FIT; // bad varint, truncated, or a null array
    }
    long count = countPlusOne - 1;
    if (count * 20 > end - pos) {
      return NO_FIT;
    }
    int n = (int) count;
    ensureBatches(n);
    for (int i = 0; i < n; i++) {
      if (!need(19)) {
        return NO_FIT;
      }
      firstOffsets[i] = int64(buf, pos);
      lastOffsets[i] = int64(buf, pos + 8);
      deliveryStates[i] = buf[pos + 16];
      deliveryCounts[i] = (short) (((buf[pos + 17] & 0xff) << 8) | (buf[pos + 18] & 0xff));
      pos += 19;
      if (!taggedFields(false)) {
        return NO_FIT;
      }
    }
    batchCount = n;
    if (!taggedFields(candidate == L42)) {
      return NO_FIT;
    }
    if (pos != end) {
      return NO_FIT; // trailing bytes
    }
    return unknownTags ? FIT_WITH_UNKNOWN_TAGS : FIT;
  }

  /** A tagged-field section as `Reader.tagged_fields` + `decode_struct` read it. */
  private boolean taggedFields(boolean knowsDcc) {
    long count = uvarint();
    if (count < 0 || count > end - pos) {
      return false;
    }
    for (long i = 0; i < count; i++) {
      long tag = uvarint();
      if (tag < 0) {
        return false;
      }
      long size = uvarint();
      if (size < 0 || size > end - pos) {
        return false;
      }
      if (knowsDcc && tag == 0) {
        if (size != 4) {
          return false; // bad tagged field
        }
        hasDcc = true;
        dcc = int32(buf, pos);
      } else {
        unknownTags = true;
      }
      pos += (int) size;
    }
    return true;
  }

  /** `Reader.uvarint`: at most 5 bytes, fitting 32 bits; -1 on any error. */
  private long uvarint() {
    long result = 0;
    int shift = 0;
    for (int i = 0; i < 5; i++) {
      if (pos >= end) {
        return -1;
      }
      int b = buf[pos++] & 0xff;
      if (i == 4 && b > 0x0f) {
        return -1;
      }
      result |= (long) (b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        return result;
      }
      shift += 7;
    }
    return -1;
  }

  private boolean need(int n) {
    return n <= end - pos;
  }

  private void ensureBatches(int n) {
    if (n > firstOffsets.length) {
      int size = Math.max(n, firstOffsets.length * 2);
      firstOffsets = new long[size];
      lastOffsets = new long[size];
      deliveryStates = new int[size];
      deliveryCounts = new int[size];
    }
  }

  static int int32(byte[] b, int at) {
    return ((b[at] & 0xff) << 24)
        | ((b[at + 1] & 0xff) << 16)
        | ((b[at + 2] & 0xff) << 8)
        | (b[at + 3] & 0xff);
  }

  static long int64(byte[] b, int at) {
    return ((long) int32(b, at) << 32) | (int32(b, at + 4) & 0xffffffffL);
  }

  /**
   * Well-formed UTF-8 (Unicode table 3-7): what Python's strict UTF-8 codec and Java's decoder
   * both accept and decode alike. No overlong forms, no surrogates, nothing above U+10FFFF.
   */
  static boolean wellFormedUtf8(byte[] b, int at, int length) {
    int i = at;
    int stop = at + length;
    while (i < stop) {
      int c = b[i] & 0xff;
      if (c < 0x80) {
        i++;
        continue;
      }
      int extra;
      int lo = 0x80;
      int hi = 0xbf;
      if (c >= 0xc2 && c <= 0xdf) {
        extra = 1;
      } else if (c >= 0xe0 && c <= 0xef) {
        extra = 2;
        if (c == 0xe0) {
          lo = 0xa0;
        } else if (c == 0xed) {
          hi = 0x9f;
        }
      } else if (c >= 0xf0 && c <= 0xf4) {
        extra = 3;
        if (c == 0xf0) {
          lo = 0x90;
        } else if (c == 0xf4) {
          hi = 0x8f;
        }
      } else {
        return false;
      }
      if (i + extra >= stop) {
        return false; // cut short
      }
      int second = b[i + 1] & 0xff;
      if (second < lo || second > hi) {
        return false;
      }
      for (int j = 2; j <= extra; j++) {
        int cont = b[i + j] & 0xff;
        if (cont < 0x80 || cont > 0xbf) {
          return false;
        }
      }
      i += extra + 1;
    }
    return true;
  }
}
