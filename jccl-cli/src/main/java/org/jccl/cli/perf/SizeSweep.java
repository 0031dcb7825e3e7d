package org.jccl.cli.perf;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Message sizes as nccl-tests reads and steps them: {@code -b}/{@code -e}/{@code -i} values with
 * binary K/M/G suffixes, and the sweep {@code size = factor > 1 ? size * factor : size + step}.
 */
final class SizeSweep {
    private SizeSweep() {
    }

    // A number as strtod reads it (so "1.5K" and "1e3" work), then an optional unit letter and an
    // optional "B"/"iB", which nccl-tests ignores after the unit and users type anyway.
    private static final Pattern SIZE = Pattern.compile(
            "\\s*([0-9]*\\.?[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+\\.)\\s*(?:([kKmMgG])(?:i?[bB])?|[bB])?\\s*");

    /**
     * Parses a size like nccl-tests' {@code parsesize}: K, M and G are 2^10, 2^20 and 2^30 (binary,
     * either case), a fraction is allowed and truncated after scaling ({@code 1.5K} = 1536).
     *
     * @throws IllegalArgumentException naming {@code what} for a negative, unparsable or too large value
     */
    static long parseSize(String text, String what) {
        Matcher m = SIZE.matcher(text);
        if (!m.matches()) {
            throw new IllegalArgumentException("invalid size '" + text + "' for " + what
                    + ": use bytes, optionally with a K, M or G suffix (powers of 1024), e.g. 8, 128K, 32M, 1G");
        }
        double value = Double.parseDouble(m.group(1));
        long unit = switch (m.group(2) == null ? "" : m.group(2).toUpperCase(Locale.ROOT)) {
            case "K" -> 1L << 10;
            case "M" -> 1L << 20;
            case "G" -> 1L << 30;
            default -> 1L;
        };
        double bytes = value * unit;
        if (bytes >= 0x1p63) {
            throw new IllegalArgumentException("size '" + text + "' for " + what + " is too large");
        }
        return (long) bytes;
    }

    /**
     * The sizes nccl-tests measures, in order: from {@code min} while {@code <= max}, multiplying by
     * {@code factor} when it is above 1, otherwise adding {@code step}.
     *
     * @throws IllegalArgumentException when the sweep would never end (nccl-tests loops forever there)
     */
    static List<Long> sizes(long min, long max, long step, long factor) {
        if (min < 0 || max < 0 || step < 0 || factor < 0) {
            throw new IllegalArgumentException("sizes, step and factor must not be negative");
        }
        if (min > max) {
            throw new IllegalArgumentException("invalid sizes for 'minbytes' and 'maxbytes': " + min + " > " + max);
        }
        if (factor > 1 && min == 0 && max > 0) {
            throw new IllegalArgumentException("-b/--minbytes 0 with -f/--stepfactor " + factor
                    + " never grows; start at 1 or more, or step with -i");
        }
        if (factor <= 1 && step == 0 && max > min) {
            throw new IllegalArgumentException("-i/--stepbytes 0 never reaches --maxbytes " + max + "; give a step above 0");
        }
        List<Long> out = new ArrayList<>();
        long size = min;
        while (size <= max) {
            out.add(size);
            long next;
            if (factor > 1) {
                if (size > Long.MAX_VALUE / factor) {
                    break;
                }
                next = size * factor;
            } else {
                if (size > Long.MAX_VALUE - step) {
                    break;
                }
                next = size + step;
            }
            if (next == size) {
                break; // min == max with a zero step or factor: one size, as nccl-tests' single pass
            }
            size = next;
        }
        return out;
    }

    /**
     * The sizes warmed up before the sweep: nccl-tests warms every power-of-two multiple of
     * {@code min} up to {@code max} (a factor of 2 whatever {@code -f} says), so that every
     * algorithm the sweep will use is already set up.
     */
    static List<Long> warmupSizes(long min, long max) {
        List<Long> out = new ArrayList<>();
        long size = min;
        while (size <= max) {
            out.add(size);
            if (size == 0) {
                size = 1; // nccl-tests would spin on 0*2; warming 1, 2, 4, ... is what was meant
            } else if (size > Long.MAX_VALUE / 2) {
                break;
            } else {
                size *= 2;
            }
        }
        return out;
    }
}
