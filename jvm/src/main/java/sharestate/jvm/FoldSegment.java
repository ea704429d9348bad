package sharestate.jvm;

import sharestate.jvm.Contract.DeliveryState;

/** One share-partition's state while a segment is folded (sharestate/replay/fold.py _Segment). */
final class FoldSegment {

  private final boolean sweep;
  private final boolean earlyAccess; // Kafka < 4.1
  private final boolean hasDcc; // Kafka >= 4.2
  private final FoldCombiner combiner;

  boolean hasState;
  FoldBatches batches = new FoldBatches();
  private FoldBatches spare = new FoldBatches();
  private final FoldBatches window = new FoldBatches();
  private final FoldBatches merged = new FoldBatches();
  private final FoldBatches sortedCopy = new FoldBatches();
  boolean canonical;
  /** Offsets per delivery state 0..ARCHIVED (ARCHIVING is not reported). */
  final long[] counts = new long[DeliveryState.ARCHIVED + 1];
  long startOffset;
  int stateEpoch;
  int leaderEpoch;
  int snapshotEpoch;
  Long createTimestamp;
  Long writeTimestamp;
  Integer deliveryCompleteCount;

  FoldSegment(int major, int minor, FoldCombiner combiner) {
    this.sweep = major > 4 || (major == 4 && minor >= 4);
    this.earlyAccess = major < 4 || (major == 4 && minor < 1);
    this.hasDcc = major > 4 || (major == 4 && minor >= 2);
    this.combiner = combiner;
  }

  void reset() {
    hasState = false;
    batches.clear();
    canonical = false;
    java.util.Arrays.fill(counts, 0);
    startOffset = 0;
    stateEpoch = 0;
    leaderEpoch = 0;
    snapshotEpoch = 0;
    createTimestamp = null;
    writeTimestamp = null;
    deliveryCompleteCount = null;
  }

  private void addCount(int state, long delta) {
    if (state >= 0 && state < counts.length) {
      counts[state] += delta;
    }
  }

  private static boolean valid(FoldBatches b) {
    for (int i = 0; i < b.size; i++) {
      long last = b.last[i];
      if (b.first[i] > last || last == Long.MAX_VALUE) {
        return false;
      }
    }
    return true;
  }

  private static boolean canonical(FoldBatches b) {
    if (!valid(b)) {
      return false;
    }
    for (int i = 1; i < b.size; i++) {
      long prevLast = b.last[i - 1];
      long first = b.first[i];
      if (first <= prevLast || (first == prevLast + 1 && b.state[i - 1] == b.state[i]
          && b.count[i - 1] == b.count[i])) {
        return false;
      }
    }
    return true;
  }

  /** Takes {@code source}'s contents as the batches. */
  private void setBatches(FoldBatches source) {
    batches.copyFrom(source);
    recount();
  }

  private void recount() {
    canonical = sweep && canonical(batches);
    java.util.Arrays.fill(counts, 0);
    for (int i = 0; i < batches.size; i++) {
      addCount(batches.state[i], batches.last[i] - batches.first[i] + 1);
    }
  }

  private Integer dcc(Integer value) {
    if (!hasDcc) {
      return null;
    }
    return value == null ? Integer.valueOf(-1) : value;
  }

  void seed(long start, int stateEpoch, int leader, int snapshotEpoch, Long created,
      Long written, Integer dcc, FoldBatches incoming) {
    hasState = true;
    startOffset = start;
    this.stateEpoch = stateEpoch;
    leaderEpoch = leader;
    this.snapshotEpoch = snapshotEpoch;
    createTimestamp = created;
    writeTimestamp = written;
    deliveryCompleteCount = dcc;
    setBatches(incoming);
  }

  void delete() {
    hasState = false;
    batches.clear();
  }

  /** A snapshot, or an update with no state: the record becomes the state. */
  void start(boolean snapshot, long start, int stateEpoch, int leader, int snapshotEpoch,
      Long created, Long written, Integer dcc, FoldBatches incoming) {
    hasState = true;
    startOffset = start;
    leaderEpoch = leader;
    this.snapshotEpoch = snapshotEpoch;
    if (snapshot) {
      this.stateEpoch = stateEpoch;
      createTimestamp = created;
      writeTimestamp = written;
    } else {
      this.stateEpoch = earlyAccess ? -1 : 0;
      createTimestamp = earlyAccess ? null : Long.valueOf(0);
      writeTimestamp = earlyAccess ? null : Long.valueOf(0);
    }
    deliveryCompleteCount = dcc(dcc);
    setBatches(incoming);
  }

  /** An update on a state; on FoldMergeException nothing has changed. */
  void update(long start, int leader, Integer dcc, FoldBatches incoming)
      throws FoldMergeException {
    if (start == -1) {
      start = startOffset;
    }
    if (canonical && valid(incoming)) {
      mergeWindow(incoming, start);
    } else {
      combiner.combine(batches, incoming, start, sweep, spare);
      FoldBatches old = batches;
      batches = spare;
      spare = old;
      recount();
    }
    startOffset = start;
    if (leader != -1) {
      leaderEpoch = leader;
    }
    deliveryCompleteCount = dcc(dcc);
  }

  private void mergeWindow(FoldBatches incoming, long start) throws FoldMergeException {
    FoldBatches current = batches;
    FoldBatches add = incoming;
    if (start != -1) {
      int dropped = 0;
      while (dropped < current.size && current.last[dropped] < start) {
        addCount(current.state[dropped], -(current.last[dropped] - current.first[dropped] + 1));
        dropped++;
      }
      if (dropped > 0) {
        current.removeRange(0, dropped);
      }
      if (current.size > 0 && current.first[0] < start) {
        addCount(current.state[0], -(start - current.first[0]));
        current.first[0] = start;
      }
      // incoming is a scratch list of the caller's: prune it in place.
      int kept = 0;
      for (int i = 0; i < add.size; i++) {
        if (add.last[i] >= start) {
          add.set(kept++, Math.max(add.first[i], start), add.last[i], add.state[i],
              add.count[i]);
        }
      }
      add.size = kept;
    }
    if (current.size + add.size < 2) {
      for (int i = 0; i < add.size; i++) {
        current.addFrom(add, i);
        addCount(add.state[i], add.last[i] - add.first[i] + 1);
      }
      return;
    }
    if (add.size == 0) {
      return;
    }
    long minFirst = Long.MAX_VALUE;
    long maxLast = Long.MIN_VALUE;
    for (int i = 0; i < add.size; i++) {
      minFirst = Math.min(minFirst, add.first[i]);
      maxLast = Math.max(maxLast, add.last[i]);
    }
    long high = maxLast + 1; // valid: last < Long.MAX_VALUE
    // begin: first batch with last >= minFirst - 1, i.e. last + 1 >= minFirst (no wrap).
    int lo = 0;
    int hi = current.size;
    while (lo < hi) {
      int mid = (lo + hi) >>> 1;
      if (current.last[mid] + 1 < minFirst) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    int begin = lo;
    hi = current.size;
    while (lo < hi) {
      int mid = (lo + hi) >>> 1;
      if (current.first[mid] <= high) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    int end = lo;
    window.clear();
    for (int i = begin; i < end; i++) {
      window.addFrom(current, i);
      addCount(current.state[i], -(current.last[i] - current.first[i] + 1));
    }
    for (int i = 0; i < add.size; i++) {
      window.addFrom(add, i);
    }
    combiner.sweep(window, merged); // valid input: cannot fail
    for (int i = 0; i < merged.size; i++) {
      addCount(merged.state[i], merged.last[i] - merged.first[i] + 1);
    }
    current.splice(begin, end, merged);
  }

  private static boolean lessTuple(FoldBatches b, int i, int j) {
    if (b.first[i] != b.first[j]) {
      return b.first[i] < b.first[j];
    }
    if (b.last[i] != b.last[j]) {
      return b.last[i] < b.last[j];
    }
    if (b.state[i] != b.state[j]) {
      return b.state[i] < b.state[j];
    }
    return b.count[i] < b.count[j];
  }

  long effectiveStartOffset() {
    FoldBatches view = batches;
    if (!canonical) {
      boolean sorted = true;
      for (int i = 1; i < batches.size && sorted; i++) {
        sorted = !lessTuple(batches, i, i - 1);
      }
      if (!sorted) {
        view = sortedCopy;
        view.copyFrom(batches);
        for (int i = 1; i < view.size; i++) { // insertion sort: rare, usually short
          long f = view.first[i];
          long l = view.last[i];
          int s = view.state[i];
          int c = view.count[i];
          int j = i - 1;
          while (j >= 0 && (view.first[j] > f || (view.first[j] == f && (view.last[j] > l
              || (view.last[j] == l && (view.state[j] > s
              || (view.state[j] == s && view.count[j] > c))))))) {
            view.set(j + 1, view.first[j], view.last[j], view.state[j], view.count[j]);
            j--;
          }
          view.set(j + 1, f, l, s, c);
        }
      }
    }
    long start = startOffset;
    for (int i = 0; i < view.size; i++) {
      if (view.last[i] < start) {
        continue;
      }
      int state = view.state[i];
      if (view.first[i] > start
          || (state != DeliveryState.ACKNOWLEDGED && state != DeliveryState.ARCHIVED)) {
        break;
      }
      start = view.last[i] + 1;
    }
    return start;
  }
}
