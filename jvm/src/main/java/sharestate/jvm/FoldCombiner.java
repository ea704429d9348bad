package sharestate.jvm;

/**
 * Kafka's batch merge (sharestate/replay/combiner.py): 4.0-4.3 pairwise sorted-set merge, 4.4+
 * sweep. Reuses its scratch arrays, so one instance serves one thread.
 */
final class FoldCombiner {
  private final FoldBatches combined = new FoldBatches();
  private final FoldBatches work = new FoldBatches();
  private long[] eventOffset = new long[16];
  private long[] eventPriority = new long[16];
  private boolean[] eventBegins = new boolean[16];
  private int[] order = new int[16];
  private int[] sortScratch = new int[16];
  private long[] activePriority = new long[8];
  private int[] activeCount = new int[8];
  private int activeSize;
  private final long[] piece = new long[12]; // up to 3 pieces of (first, last, count, state)

  /** (count, state) as one long that orders like the tuple. */
  static long priority(int count, int state) {
    return ((long) count << 32) + ((long) state - Integer.MIN_VALUE);
  }

  static int priorityCount(long priority) {
    return (int) (priority >> 32);
  }

  static int priorityState(long priority) {
    return (int) ((priority & 0xFFFFFFFFL) + Integer.MIN_VALUE);
  }

  /** Python's offset - 1 in its message (no wrap below Long.MIN_VALUE). */
  private static String minusOne(long offset) {
    return offset == Long.MIN_VALUE ? "-9223372036854775809" : Long.toString(offset - 1);
  }

  /** combine(current, incoming, start, kafka) into {@code out} (not current or incoming). */
  void combine(FoldBatches current, FoldBatches incoming, long start, boolean sweep,
      FoldBatches out) throws FoldMergeException {
    FoldBatches all = combined;
    all.clear();
    prune(current, start, all);
    prune(incoming, start, all);
    if (all.size < 2) {
      out.copyFrom(all);
      return;
    }
    if (sweep) {
      sweep(all, out);
    } else {
      pairwise(all, out);
    }
  }

  private static void prune(FoldBatches src, long start, FoldBatches dst) {
    for (int i = 0; i < src.size; i++) {
      if (start == -1) {
        dst.addFrom(src, i);
      } else if (src.last[i] >= start) {
        dst.add(Math.max(src.first[i], start), src.last[i], src.state[i], src.count[i]);
      }
    }
  }

  // ---- 4.4 sweep -------------------------------------------------------------------------

  private boolean eventLess(int a, int b) {
    long oa = eventOffset[a];
    long ob = eventOffset[b];
    if (oa != ob) {
      return oa < ob;
    }
    boolean ba = eventBegins[a];
    boolean bb = eventBegins[b];
    if (ba != bb) {
      return bb; // ends (0) before begins (1)
    }
    return eventPriority[a] < eventPriority[b];
  }

  private void sortEvents(int n) {
    if (n <= 24) {
      for (int i = 1; i < n; i++) {
        int x = order[i];
        int j = i - 1;
        while (j >= 0 && eventLess(x, order[j])) {
          order[j + 1] = order[j];
          j--;
        }
        order[j + 1] = x;
      }
      return;
    }
    if (sortScratch.length < n) {
      sortScratch = new int[order.length];
    }
    mergeSort(0, n);
  }

  private void mergeSort(int from, int to) {
    if (to - from <= 16) {
      for (int i = from + 1; i < to; i++) {
        int x = order[i];
        int j = i - 1;
        while (j >= from && eventLess(x, order[j])) {
          order[j + 1] = order[j];
          j--;
        }
        order[j + 1] = x;
      }
      return;
    }
    int mid = (from + to) >>> 1;
    mergeSort(from, mid);
    mergeSort(mid, to);
    if (!eventLess(order[mid], order[mid - 1])) {
      return;
    }
    System.arraycopy(order, from, sortScratch, from, to - from);
    int i = from;
    int j = mid;
    int k = from;
    while (i < mid && j < to) {
      order[k++] = eventLess(sortScratch[j], sortScratch[i]) ? sortScratch[j++] : sortScratch[i++];
    }
    while (i < mid) {
      order[k++] = sortScratch[i++];
    }
    while (j < to) {
      order[k++] = sortScratch[j++];
    }
  }

  /** Kafka 4.4+: each offset takes the highest (count, state) covering it; equal runs join. */
  void sweep(FoldBatches src, FoldBatches out) throws FoldMergeException {
    int n = src.size * 2;
    if (eventOffset.length < n) {
      int cap = Math.max(n, eventOffset.length * 2);
      eventOffset = new long[cap];
      eventPriority = new long[cap];
      eventBegins = new boolean[cap];
      order = new int[cap];
      sortScratch = new int[cap];
    }
    for (int b = 0; b < src.size; b++) {
      long priority = priority(src.count[b], src.state[b]);
      int e = 2 * b;
      eventOffset[e] = src.first[b];
      eventBegins[e] = true;
      eventPriority[e] = priority;
      order[e] = e;
      long last = src.last[b];
      eventOffset[e + 1] = last == Long.MAX_VALUE ? Long.MIN_VALUE : last + 1;
      eventBegins[e + 1] = false;
      eventPriority[e + 1] = priority;
      order[e + 1] = e + 1;
    }
    sortEvents(n);
    activeSize = 0;
    out.clear();
    boolean hasCurrent = false;
    long current = 0;
    long previous = 0;
    int i = 0;
    while (i < n) {
      long offset = eventOffset[order[i]];
      if (hasCurrent && offset > previous) {
        int count = priorityCount(current);
        int state = priorityState(current);
        int tail = out.size - 1;
        if (tail >= 0 && out.last[tail] + 1 == previous && out.count[tail] == count
            && out.state[tail] == state) {
          out.last[tail] = offset - 1;
        } else {
          out.add(previous, offset - 1, state, count);
        }
      }
      while (i < n && eventOffset[order[i]] == offset) {
        int e = order[i];
        long priority = eventPriority[e];
        if (eventBegins[e]) {
          activate(priority);
        } else if (!deactivate(priority)) {
          throw new FoldMergeException(
              "state batch ends before it starts (at offset " + minusOne(offset) + ")");
        }
        i++;
      }
      if (activeSize > 0) {
        hasCurrent = true;
        current = activePriority[0];
        for (int a = 1; a < activeSize; a++) {
          if (activePriority[a] > current) {
            current = activePriority[a];
          }
        }
      } else {
        hasCurrent = false;
      }
      previous = offset;
    }
  }

  private void activate(long priority) {
    for (int a = 0; a < activeSize; a++) {
      if (activePriority[a] == priority) {
        activeCount[a]++;
        return;
      }
    }
    if (activeSize == activePriority.length) {
      activePriority = java.util.Arrays.copyOf(activePriority, activeSize * 2);
      activeCount = java.util.Arrays.copyOf(activeCount, activeSize * 2);
    }
    activePriority[activeSize] = priority;
    activeCount[activeSize] = 1;
    activeSize++;
  }

  private boolean deactivate(long priority) {
    for (int a = 0; a < activeSize; a++) {
      if (activePriority[a] == priority) {
        if (--activeCount[a] == 0) {
          activeSize--;
          activePriority[a] = activePriority[activeSize];
          activeCount[a] = activeCount[activeSize];
        }
        return true;
      }
    }
    return false;
  }

  // ---- 4.0-4.3 pairwise ------------------------------------------------------------------

  /** Compare (first, last, count, state) of work[i] with the given tuple. */
  private int compareWork(int i, long f, long l, int c, int s) {
    int r = Long.compare(work.first[i], f);
    if (r != 0) {
      return r;
    }
    r = Long.compare(work.last[i], l);
    if (r != 0) {
      return r;
    }
    r = Integer.compare(work.count[i], c);
    if (r != 0) {
      return r;
    }
    return Integer.compare(work.state[i], s);
  }

  /** Inserts into the sorted set `work` unless an equal batch is there. */
  private void insertSorted(long f, long l, int c, int s) {
    int lo = 0;
    int hi = work.size;
    while (lo < hi) {
      int mid = (lo + hi) >>> 1;
      if (compareWork(mid, f, l, c, s) < 0) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    if (lo < work.size && compareWork(lo, f, l, c, s) == 0) {
      return;
    }
    work.insertAt(lo);
    work.set(lo, f, l, s, c);
  }

  private int firstMergeable(int from) {
    for (int i = from; i < work.size - 1; i++) {
      long prevLast = work.last[i];
      long candFirst = work.first[i + 1];
      if (candFirst <= prevLast || (prevLast + 1 == candFirst
          && work.count[i] == work.count[i + 1] && work.state[i] == work.state[i + 1])) {
        return i;
      }
    }
    return -1;
  }

  private int putPiece(int k, long f, long l, int c, int s) {
    piece[4 * k] = f;
    piece[4 * k + 1] = l;
    piece[4 * k + 2] = c;
    piece[4 * k + 3] = s;
    return k + 1;
  }

  void pairwise(FoldBatches src, FoldBatches out) throws FoldMergeException {
    work.clear();
    for (int b = 0; b < src.size; b++) {
      insertSorted(src.first[b], src.last[b], src.count[b], src.state[b]);
    }
    int done = 0;
    long budget = 4L * work.size * work.size + 64;
    while (true) {
      int i = firstMergeable(done);
      if (i < 0) {
        break;
      }
      budget--;
      if (budget < 0) {
        throw new FoldMergeException(
            "state batches that Kafka 4.0-4.3 cannot merge (a batch ends before it starts)");
      }
      done = i;
      long pf = work.first[i];
      long pl = work.last[i];
      int pc = work.count[i];
      int ps = work.state[i];
      long cf = work.first[i + 1];
      long cl = work.last[i + 1];
      int cc = work.count[i + 1];
      int cs = work.state[i + 1];
      work.removeRange(i, i + 2);
      int k = 0;
      if (pc == cc && ps == cs) {
        k = putPiece(k, pf, Math.max(pl, cl), pc, ps);
      } else {
        boolean candLoses = cc < pc || (cc == pc && cs < ps);
        if (cf == pf) {
          if (cl == pl) {
            k = putPiece(k, cf, cl, cc, cs);
          } else if (candLoses) {
            k = putPiece(k, pf, pl, pc, ps);
            k = putPiece(k, pl + 1, cl, cc, cs);
          } else {
            k = putPiece(k, cf, cl, cc, cs);
          }
        } else if (cl < pl) {
          if (candLoses) {
            k = putPiece(k, pf, pl, pc, ps);
          } else {
            k = putPiece(k, pf, cf - 1, pc, ps);
            k = putPiece(k, cf, cl, cc, cs);
            k = putPiece(k, cl + 1, pl, pc, ps);
          }
        } else if (cl == pl) {
          if (candLoses) {
            k = putPiece(k, pf, pl, pc, ps);
          } else {
            k = putPiece(k, pf, cf - 1, pc, ps);
            k = putPiece(k, cf, cl, cc, cs);
          }
        } else if (candLoses) {
          k = putPiece(k, pf, pl, pc, ps);
          k = putPiece(k, pl + 1, cl, cc, cs);
        } else {
          k = putPiece(k, pf, cf - 1, pc, ps);
          k = putPiece(k, cf, cl, cc, cs);
        }
      }
      for (int p = 0; p < k; p++) {
        insertSorted(piece[4 * p], piece[4 * p + 1], (int) piece[4 * p + 2],
            (int) piece[4 * p + 3]);
      }
    }
    out.copyFrom(work);
  }
}
