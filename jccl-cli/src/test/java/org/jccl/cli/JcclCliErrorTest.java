package org.jccl.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.io.ByteArrayOutputStream;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.jccl.ConfigException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/** jccl's own errors reach the user as one line naming the cause, not as a stack trace. */
class JcclCliErrorTest {

    @Command(name = "boom")
    static final class Boom implements Runnable {
        @Override
        public void run() {
            throw new ConfigException("JCCL_X='y' is not allowed: expected z");
        }
    }

    @Test
    @Timeout(value = 10, unit = TimeUnit.SECONDS)
    void jcclExceptionsArePrintedAsOneLine() {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        // The same handler JcclCli installs, exercised on a command that fails with a jccl error.
        CommandLine cl = new CommandLine(new Boom());
        cl.setErr(new PrintWriter(buf, true, StandardCharsets.UTF_8));
        int rc = JcclCli.withErrorHandler(cl).execute();
        String err = buf.toString(StandardCharsets.UTF_8);
        assertEquals(1, rc);
        assertEquals("jccl boom: JCCL_X='y' is not allowed: expected z", err.strip());
        assertFalse(err.contains("\tat "), "no stack trace: " + err);
    }
}
