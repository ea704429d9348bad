package sharestate.jvm;

import java.util.Arrays;

/** A list of state batches as parallel primitive arrays (first, last, state, count). */
final class FoldBatches {
  long[] first = new long[8];
  long[] last = new long[8];
  int[] state = new int[8];
  int[] count = new int[8];
  int size;

  void clear() {
    size = 0;
  }

  void ensure(int capacity) {
    if (capacity > first.length) {
      int grown = Math.max(capacity, first.length * 2);
      first = Arrays.copyOf(first, grown);
      last = Arrays.copyOf(last, grown);
      state = Arrays.copyOf(state, grown);
      count = Arrays.copyOf(count, grown);
    }
  }

  void add(long f, long l, int s, int c) {
    ensure(size + 1);
    first[size] = f;
    last[size] = l;
    state[size] = s;
    count[size] = c;
    size++;
  }

  void addFrom(FoldBatches other, int i) {
    add(other.first[i], other.last[i], other.state[i], other.count[i]);
  }

  void set(int i, long f, long l, int s, int c) {
    first[i] = f;
    last[i] = l;
    state[i] = s;
    count[i] = c;
  }

  void copyFrom(FoldBatches other) {
    ensure(other.size);
    System.arraycopy(other.first, 0, first, 0, other.size);
    System.arraycopy(other.last, 0, last, 0, other.size);
    System.arraycopy(other.state, 0, state, 0, other.size);
    System.arraycopy(other.count, 0, count, 0, other.size);
    size = other.size;
  }

  /** Inserts an empty slot at {@code at}. */
  void insertAt(int at) {
    ensure(size + 1);
    int moved = size - at;
    if (moved > 0) {
      System.arraycopy(first, at, first, at + 1, moved);
      System.arraycopy(last, at, last, at + 1, moved);
      System.arraycopy(state, at, state, at + 1, moved);
      System.arraycopy(count, at, count, at + 1, moved);
    }
    size++;
  }

  /** Replaces [from, to) by all of {@code src}. */
  void splice(int from, int to, FoldBatches src) {
    int removed = to - from;
    int added = src.size;
    int newSize = size - removed + added;
    ensure(newSize);
    int tail = size - to;
    if (tail > 0 && added != removed) {
      System.arraycopy(first, to, first, from + added, tail);
      System.arraycopy(last, to, last, from + added, tail);
      System.arraycopy(state, to, state, from + added, tail);
      System.arraycopy(count, to, count, from + added, tail);
    }
    System.arraycopy(src.first, 0, first, from, added);
    System.arraycopy(src.last, 0, last, from, added);
    System.arraycopy(src.state, 0, state, from, added);
    System.arraycopy(src.count, 0, count, from, added);
    size = newSize;
  }

  void removeRange(int from, int to) {
    int tail = size - to;
    if (tail > 0) {
      System.arraycopy(first, to, first, from, tail);
      System.arraycopy(last, to, last, from, tail);
      System.arraycopy(state, to, state, from, tail);
      System.arraycopy(count, to, count, from, tail);
    }
    size -= to - from;
  }
}
