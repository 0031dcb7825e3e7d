package org.jccl.internal.log;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.jccl.ConfigException;
import org.jccl.internal.config.ConfigLoader;
import org.jccl.internal.log.Log.Level;
import org.jccl.internal.log.Log.Options;
import org.jccl.internal.log.Log.Subsys;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** Levels, subsystems, line format and JCCL_DEBUG_FILE with %h %p %r, through files in a temporary directory. */
@Timeout(10)
class LogTest {

    @TempDir
    Path dir;

    private Options saved;
    private final String pid = Long.toString(ProcessHandle.current().pid());

    @BeforeEach
    void save() {
        saved = Log.options();
    }

    @AfterEach
    void restore() {
        Log.configure(saved);
    }

    private String pattern(String name) {
        return dir.resolve(name).toString();
    }

    private static List<String> lines(Path p) throws IOException {
        return Files.readAllLines(p);
    }

    private List<String> files() throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            return s.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }

    @Test
    void linesStartWithHostPidThreadRankJcclLevel() throws IOException {
        Log.configure(new Options(Level.INFO, EnumSet.of(Subsys.INIT), pattern("log.txt"), true));
        Log.info(Subsys.INIT, 3, "rank 3 -> rank 4 via SHM");
        Log.warn(Subsys.NET, -1, "no rank yet");
        List<String> l = lines(dir.resolve("log.txt"));
        String prefix = Log.host() + ":" + pid + ":" + Thread.currentThread().getName();
        assertEquals(List.of(prefix + " [3] JCCL INFO rank 3 -> rank 4 via SHM", prefix + " [-] JCCL WARN no rank yet"), l);
    }

    @Test
    void levelAndSubsystemsDecideWhatPrints() throws IOException {
        Log.configure(new Options(Level.INFO, EnumSet.of(Subsys.INIT, Subsys.SHM), pattern("l.txt"), false));
        Log.info(Subsys.INIT, 0, "init-info");
        Log.info(Subsys.COLL, 0, "coll-info");
        Log.info(Subsys.SHM, 0, "shm-info");
        Log.warn(Subsys.COLL, 0, "coll-warn");
        Log.trace(Subsys.INIT, 0, "init-trace");
        assertEquals(List.of("init-info", "shm-info", "coll-warn"), messages(dir.resolve("l.txt")));
        assertTrue(Log.enabled(Level.WARN, Subsys.PROXY), "WARN ignores the subsystem list");
        assertFalse(Log.enabled(Level.TRACE, Subsys.INIT));

        Log.configure(new Options(Level.NONE, EnumSet.allOf(Subsys.class), pattern("none.txt"), true));
        Log.warn(Subsys.INIT, 0, "silenced");
        assertFalse(Files.exists(dir.resolve("none.txt")), "NONE prints nothing and opens no file");

        Log.configure(new Options(Level.TRACE, Log.parseSubsys("^COLL"), pattern("t.txt"), false));
        Log.trace(Subsys.P2P, 0, "p2p-trace");
        Log.trace(Subsys.COLL, 0, "coll-trace");
        assertEquals(List.of("p2p-trace"), messages(dir.resolve("t.txt")));
    }

    private static List<String> messages(Path p) throws IOException {
        List<String> out = new ArrayList<>();
        for (String l : lines(p)) {
            out.add(l.substring(l.indexOf(" JCCL ") + 6).split(" ", 2)[1]);
        }
        return out;
    }

    @Test
    void subsystemGrammar() {
        assertEquals(EnumSet.of(Subsys.INIT, Subsys.ENV), Log.parseSubsys(null));
        assertEquals(EnumSet.of(Subsys.NET, Subsys.BOOTSTRAP), Log.parseSubsys(" net, Bootstrap "));
        assertEquals(EnumSet.allOf(Subsys.class), Log.parseSubsys("ALL"));
        Set<Subsys> notColl = Log.parseSubsys("^COLL,P2P");
        assertFalse(notColl.contains(Subsys.COLL));
        assertFalse(notColl.contains(Subsys.P2P));
        assertEquals(Subsys.values().length - 2, notColl.size());
        ConfigException e = assertThrows(ConfigException.class, () -> Log.parseSubsys("INTI,COLL"));
        assertEquals("JCCL_DEBUG_SUBSYS='INTI,COLL' names INTI, which is not a subsystem; did you mean INIT? Allowed: INIT,COLL,P2P,SHM,"
                + "NET,GRAPH,TUNING,ENV,ALLOC,BOOTSTRAP,PROXY or ALL; ^ in front excludes the subsystems listed", e.getMessage());
        e = assertThrows(ConfigException.class, () -> Log.parseSubsys("GPU"));
        assertTrue(e.getMessage().startsWith("JCCL_DEBUG_SUBSYS='GPU' names GPU, which is not a subsystem. Allowed: INIT,"),
                e.getMessage());
    }

    @Test
    void levelGrammar() {
        assertEquals(Level.WARN, Log.parseLevel(null));
        assertEquals(Level.INFO, Log.parseLevel(" info "));
        assertEquals(Level.VERSION, Log.parseLevel("VERSION"));
        ConfigException e = assertThrows(ConfigException.class, () -> Log.parseLevel("DEBUG"));
        assertEquals("JCCL_DEBUG='DEBUG' is not allowed: expected one of NONE, VERSION, WARN, INFO, TRACE", e.getMessage());
    }

    @Test
    void ncclNamesAreAcceptedAndBadValuesFallBackWithAProblem() {
        Options o = Options.of(ConfigLoader.merge(Map.of("NCCL_DEBUG", "TRACE", "NCCL_DEBUG_SUBSYS", "NET", "NCCL_DEBUG_FILE",
                "/tmp/n.%h.log"), null, List.of()).values());
        assertEquals(new Options(Level.TRACE, EnumSet.of(Subsys.NET), "/tmp/n.%h.log", true), o);
        List<String> problems = new ArrayList<>();
        Options bad = Options.lenient(Map.of("JCCL_DEBUG", "LOUD", "JCCL_DEBUG_SUBSYS", "NETWORK", "JCCL_DEBUG_FILE", "/x/%q"), problems);
        assertEquals(new Options(Level.WARN, EnumSet.of(Subsys.INIT, Subsys.ENV), null, true), bad);
        assertEquals(3, problems.size(), problems.toString());
        assertTrue(problems.get(0).endsWith("; logging at WARN"), problems.get(0));
        assertTrue(problems.get(1).startsWith("JCCL_DEBUG_SUBSYS='NETWORK' names NETWORK"), problems.get(1));
        assertTrue(problems.get(2).startsWith("JCCL_DEBUG_FILE='/x/%q' is not allowed: %q is not a placeholder"), problems.get(2));
        assertThrows(ConfigException.class, () -> Options.of(Map.of("JCCL_DEBUG", "LOUD")));
    }

    @Test
    void patternExpansion() {
        assertEquals("/l/jccl.h1.42.7.log", Log.expand("/l/jccl.%h.%p.%r.log", "h1", 42, "7"));
        assertEquals("/l/100%r-h1", Log.expand("/l/100%%r-%h", "h1", 42, "7"), "%% is a literal percent sign");
        ConfigException e = assertThrows(ConfigException.class, () -> Log.checkFilePattern("/l/x%"));
        assertTrue(e.getMessage().contains("it ends in %"), e.getMessage());
    }

    @Test
    void withoutRankLinesGoToTheXFileWhichTheFirstRankAdopts() throws IOException {
        String host = Log.host();
        Log.configure(new Options(Level.INFO, EnumSet.of(Subsys.INIT), pattern("jccl.%h.%p.%r.log"), false));
        Log.info(Subsys.INIT, -1, "before init");
        Path x = dir.resolve("jccl." + host + "." + pid + ".x.log");
        assertEquals(List.of("before init"), messages(x));

        Log.info(Subsys.INIT, 2, "rank 2 known");
        Path r2 = dir.resolve("jccl." + host + "." + pid + ".2.log");
        assertFalse(Files.exists(x), "the rank-less file was renamed");
        Log.info(Subsys.INIT, -1, "rank-less after init");
        Log.info(Subsys.INIT, 5, "another rank of this JVM");
        assertEquals(List.of("before init", "rank 2 known", "rank-less after init"), messages(r2));
        assertEquals(List.of("another rank of this JVM"), messages(dir.resolve("jccl." + host + "." + pid + ".5.log")));
        assertEquals(2, files().size(), files().toString());
    }

    @Test
    void adoptingAnExistingRankFileAppendsToIt() throws IOException {
        Log.configure(new Options(Level.INFO, EnumSet.of(Subsys.INIT), pattern("j.%r.log"), false));
        Path r0 = dir.resolve("j.0.log");
        Files.writeString(r0, "from an earlier run\n");
        Log.info(Subsys.INIT, -1, "early");
        assertTrue(Files.exists(dir.resolve("j.x" + pid + ".log")), "without %p the rank-less file carries the pid: " + files());
        Log.info(Subsys.INIT, 0, "late");
        List<String> l = lines(r0);
        assertEquals("from an earlier run", l.get(0));
        assertEquals(3, l.size(), l.toString());
        assertTrue(l.get(1).endsWith(" [-] JCCL INFO early"), l.get(1));
        assertTrue(l.get(2).endsWith(" [0] JCCL INFO late"), l.get(2));
        assertEquals(List.of("j.0.log"), files());
    }

    @Test
    void warnOncePrintsEachMessageOnce() throws IOException {
        Log.configure(new Options(Level.WARN, EnumSet.of(Subsys.ENV), pattern("w.txt"), false));
        String m = "JCCL_FOO (environment) is not a jccl setting " + System.nanoTime();
        Log.warnOnce(Subsys.ENV, -1, m);
        Log.warnOnce(Subsys.ENV, -1, m);
        Log.warnOnce(Subsys.ENV, -1, m + " (other)");
        assertEquals(List.of(m, m + " (other)"), messages(dir.resolve("w.txt")));
    }

    @Test
    void theVersionLinePrintsOnceWhenJcclDebugIsSet() throws IOException {
        Log.configure(new Options(Level.WARN, EnumSet.of(Subsys.INIT), pattern("v.txt"), false));
        Log.version(0, "jccl 9.9");
        assertFalse(Files.exists(dir.resolve("v.txt")), "JCCL_DEBUG unset: no version line");
        Log.configure(new Options(Level.VERSION, EnumSet.of(Subsys.INIT), pattern("v.txt"), true));
        Log.version(0, "jccl 9.9");
        Log.version(1, "jccl 9.9");
        Log.warn(Subsys.INIT, 0, "a warning");
        List<String> l = lines(dir.resolve("v.txt"));
        assertEquals(1, l.size(), "VERSION prints the version line, not warnings: " + l);
        assertTrue(l.get(0).endsWith(" [0] JCCL VERSION jccl 9.9"), l.get(0));
    }
}
