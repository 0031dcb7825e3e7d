package org.jccl.cli.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(10)
class PerfRankZeroOutputTest {

    @Test
    void stripsRankZerosPrefixOnly() {
        ByteArrayOutputStream sink = new ByteArrayOutputStream();
        try (PrintStream p = new PrintStream(new RankZeroOutput(sink), true, StandardCharsets.UTF_8)) {
            p.println("[0] # nThread 1 nGpus 1");
            p.print("[0] ");
            p.flush();
            p.println("           8             2     float     sum      -1");
            p.println("[1] stray line from rank 1");
            p.println("no prefix");
            p.print("[0] partial");
        }
        assertEquals("# nThread 1 nGpus 1\n           8             2     float     sum      -1\n[1] stray line from rank 1\n"
                + "no prefix\npartial", sink.toString(StandardCharsets.UTF_8));
    }

    @Test
    void arraysWithSeveralLines() throws Exception {
        ByteArrayOutputStream sink = new ByteArrayOutputStream();
        RankZeroOutput o = new RankZeroOutput(sink);
        byte[] b = "xx[0] a\n[0] b\n[0] c".getBytes(StandardCharsets.US_ASCII);
        o.write(b, 2, b.length - 2);
        o.write('\n');
        o.close();
        assertEquals("a\nb\nc\n", sink.toString(StandardCharsets.US_ASCII));
    }
}
