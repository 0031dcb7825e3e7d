package org.jccl.internal.net;

import com.sun.management.HotSpotDiagnosticMXBean;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Test helper: the live threads named like {@code jccl-*-handshake*}, platform and virtual alike.
 * {@link Thread#getAllStackTraces()} omits virtual threads, so the JSON thread dump (which lists
 * them) is searched too.
 */
public final class HandshakeThreads {

    private static final Pattern NAME = Pattern.compile("jccl-[A-Za-z0-9_-]*handshake[A-Za-z0-9_-]*");

    private HandshakeThreads() {
    }

    /** Names of the matching threads alive now; empty when there are none. */
    public static List<String> live() throws IOException {
        TreeSet<String> names = new TreeSet<>();
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (NAME.matcher(t.getName()).matches()) {
                names.add(t.getName());
            }
        }
        Path dir = Files.createTempDirectory("jccl-threads");
        Path dump = dir.resolve("threads.json");
        try {
            ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class)
                    .dumpThreads(dump.toString(), HotSpotDiagnosticMXBean.ThreadDumpFormat.JSON);
            Matcher m = NAME.matcher(Files.readString(dump));
            while (m.find()) {
                names.add(m.group());
            }
        } finally {
            Files.deleteIfExists(dump);
            Files.deleteIfExists(dir);
        }
        return new ArrayList<>(names);
    }
}
