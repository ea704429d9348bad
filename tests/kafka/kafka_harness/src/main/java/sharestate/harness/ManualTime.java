package sharestate.harness;

import org.apache.kafka.common.utils.Time;

import java.util.function.Supplier;

/**
 * A {@link Time} that only moves when the harness moves it (the role of Kafka's test-only
 * {@code MockTime}, which is not in the released main jars). No wall clock is read, so output
 * driven by this clock is deterministic.
 */
final class ManualTime implements Time {
    private long nowMs;

    ManualTime(long startMs) {
        this.nowMs = startMs;
    }

    void setMs(long ms) {
        if (ms < nowMs) {
            throw new IllegalArgumentException("time cannot go backwards: " + ms + " < " + nowMs);
        }
        nowMs = ms;
    }

    @Override
    public long milliseconds() {
        return nowMs;
    }

    @Override
    public long nanoseconds() {
        return nowMs * 1_000_000L;
    }

    @Override
    public void sleep(long ms) {
        nowMs += ms;
    }

    @Override
    public void waitObject(Object obj, Supplier<Boolean> condition, long deadlineMs) {
        throw new UnsupportedOperationException("ManualTime.waitObject");
    }
}
