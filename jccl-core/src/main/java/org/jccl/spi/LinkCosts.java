package org.jccl.spi;

import java.util.Objects;

/**
 * What moving one message between two ranks over a transport costs, in the alpha-beta model the
 * tuner prices algorithms with: a message of {@code b} bytes takes {@code latencySeconds + b *
 * secondsPerByte}. The tuner and the hierarchical collectives read these numbers through {@link
 * Transport#costs()}; they never look at a transport's name.
 *
 * @param latencySeconds one message, posted to completed, one way (alpha)
 * @param secondsPerByte each byte moved between the two ranks (beta; 1 / bandwidth)
 * @param basis where the numbers come from, for the tuner's log line ("measured on ... with ...",
 *        "declared by the vendor", ...)
 */
public record LinkCosts(double latencySeconds, double secondsPerByte, String basis) {

    public LinkCosts {
        if (!(latencySeconds >= 0) || !(secondsPerByte >= 0) || Double.isInfinite(latencySeconds) || Double.isInfinite(secondsPerByte)) {
            throw new IllegalArgumentException("link costs must be finite and not negative: latency " + latencySeconds
                    + " s, " + secondsPerByte + " s/B");
        }
        Objects.requireNonNull(basis, "basis");
    }

    /** Seconds one message of {@code bytes} takes. */
    public double seconds(long bytes) {
        return latencySeconds + bytes * secondsPerByte;
    }

    /** "6.4 us, 1.7 GB/s", the way log lines show the costs. */
    @Override
    public String toString() {
        return String.format(java.util.Locale.ROOT, "%.2f us, %.1f GB/s", latencySeconds * 1e6,
                secondsPerByte == 0 ? Double.POSITIVE_INFINITY : 1e-9 / secondsPerByte);
    }
}
