package org.jccl.cli.perf;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;

/**
 * The standard output handed to the local launcher by {@code jccl perf -np N}: it removes the
 * {@code "[0] "} prefix the launcher puts before rank 0's lines, so that the report keeps
 * nccl-tests' layout and can be diffed against it. Lines of other ranks (there should be none on
 * standard output) keep their prefix, so their origin stays visible.
 *
 * <p>Works on whole lines: bytes are held until a newline, then passed on and flushed. Not thread
 * safe by itself; {@link java.io.PrintStream} serialises writes to it.
 */
final class RankZeroOutput extends OutputStream {
    private static final byte[] PREFIX = "[0] ".getBytes(StandardCharsets.US_ASCII);

    private final OutputStream out;
    private final ByteArrayOutputStream line = new ByteArrayOutputStream(256);

    RankZeroOutput(OutputStream out) {
        this.out = out;
    }

    @Override
    public void write(int b) throws IOException {
        line.write(b);
        if (b == '\n') {
            emit();
        }
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
        int start = off;
        for (int i = off; i < off + len; i++) {
            if (b[i] == '\n') {
                line.write(b, start, i + 1 - start);
                emit();
                start = i + 1;
            }
        }
        line.write(b, start, off + len - start);
    }

    /**
     * Flushes what was passed on; a partial line is held back (a PrintStream flushes after every
     * write, which could split the prefix from its line). {@link #close} passes it on.
     */
    @Override
    public void flush() throws IOException {
        out.flush();
    }

    /** Passes on a last line without a newline; the underlying stream stays open (it is System.out). */
    @Override
    public void close() throws IOException {
        if (line.size() > 0) {
            emit();
        }
        out.flush();
    }

    private void emit() throws IOException {
        byte[] bytes = line.toByteArray();
        line.reset();
        int skip = startsWithPrefix(bytes) ? PREFIX.length : 0;
        out.write(bytes, skip, bytes.length - skip);
        out.flush();
    }

    private static boolean startsWithPrefix(byte[] bytes) {
        if (bytes.length < PREFIX.length) {
            return false;
        }
        for (int i = 0; i < PREFIX.length; i++) {
            if (bytes[i] != PREFIX[i]) {
                return false;
            }
        }
        return true;
    }
}
