package sharestate.harness;

import org.apache.kafka.common.Uuid;

import java.util.Random;

/** Seeded random values covering each Kafka field type's full range, with extra weight on edges. */
final class Gen {
    private static final int[] INT32_EDGES = {
        0, 1, -1, 2, 127, 128, 255, 256, 32767, 32768, 65535, 65536, Integer.MAX_VALUE, Integer.MIN_VALUE,
        Integer.MAX_VALUE - 1, Integer.MIN_VALUE + 1
    };
    private static final long[] INT64_EDGES = {
        0L, 1L, -1L, 127L, 128L, 1L << 31, (1L << 32) - 1, 1L << 32, Long.MAX_VALUE, Long.MIN_VALUE,
        Long.MAX_VALUE - 1, Long.MIN_VALUE + 1, 1735689600000L
    };
    /** Code points for random strings: ASCII, ':' and separators, Latin-1, CJK, and a non-BMP emoji. */
    private static final int[] CODE_POINTS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.: /üßé日本語😀🚀"
        .codePoints().toArray();

    final Random random;

    Gen(long seed) {
        this.random = new Random(seed);
    }

    boolean bool() {
        return random.nextBoolean();
    }

    /** Uniform in [0, bound). */
    int below(int bound) {
        return random.nextInt(bound);
    }

    int int32() {
        switch (random.nextInt(4)) {
            case 0: return INT32_EDGES[random.nextInt(INT32_EDGES.length)];
            case 1: return random.nextInt(1000);
            default: return random.nextInt();
        }
    }

    long int64() {
        switch (random.nextInt(4)) {
            case 0: return INT64_EDGES[random.nextInt(INT64_EDGES.length)];
            case 1: return random.nextInt(100_000);
            default: return random.nextLong();
        }
    }

    short int16() {
        switch (random.nextInt(3)) {
            case 0: return new short[] {0, 1, -1, Short.MAX_VALUE, Short.MIN_VALUE}[random.nextInt(5)];
            case 1: return (short) random.nextInt(10);
            default: return (short) random.nextInt();
        }
    }

    byte int8() {
        switch (random.nextInt(3)) {
            case 0: return new byte[] {0, 1, -1, Byte.MAX_VALUE, Byte.MIN_VALUE}[random.nextInt(5)];
            case 1: return (byte) random.nextInt(5);
            default: return (byte) random.nextInt();
        }
    }

    int uint16() {
        switch (random.nextInt(3)) {
            case 0: return new int[] {0, 1, 255, 256, 32767, 32768, 65535}[random.nextInt(7)];
            case 1: return random.nextInt(100);
            default: return random.nextInt(65536);
        }
    }

    Uuid uuid() {
        return new Uuid(random.nextLong(), random.nextLong());
    }

    /** A string of 0..maxCodePoints code points drawn from a pool that includes multi-byte UTF-8. */
    String string(int maxCodePoints) {
        int n = random.nextInt(maxCodePoints + 1);
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < n; i++) {
            sb.appendCodePoint(CODE_POINTS[random.nextInt(CODE_POINTS.length)]);
        }
        return sb.toString();
    }
}
