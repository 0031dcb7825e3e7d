package org.jccl.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.jar.Attributes;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The real {@code bin/jccl} script in a copy of the repository's layout whose {@code mvnw} is a
 * stand-in: it records each call, prints Maven's module lines and makes a jccl-cli jar whose manifest
 * points at this build's classes (so the real {@link JcclCli} runs). What is tested is the script:
 * one builder among ranks started at once (the others say they wait), progress lines while it
 * builds, a failed build's errors, and the JVM's boot-time incubator warning dropped while the
 * Vector API kernels stay in use and the JVM writes straight to the caller's stderr once it runs.
 */
class BinJcclTest {

    private static final String WARNING = "WARNING: Using incubator modules: jdk.incubator.vector";

    /** What the stand-in mvnw does: record, print Maven-like lines, wait, make the jar (or fail). */
    private static final String STUB_MVNW = """
            #!/usr/bin/env bash
            set -e
            cd "$(dirname "$0")"
            mkdir -p target
            echo "$*" >> target/mvnw-calls
            echo "[INFO] Scanning for projects..."
            if [ -n "${STUB_FAIL:-}" ]; then
                echo "[ERROR] /src/Foo.java:[3,1] class, interface, enum, or record expected"
                exit 1
            fi
            echo "[INFO] Downloading from central: https://repo.maven.apache.org/maven2/a/b/1/b-1.pom"
            echo "[INFO] Downloaded from central: https://repo.maven.apache.org/maven2/a/b/1/b-1.pom (1 kB)"
            echo "[INFO] Building jccl 0.2.0                                                [1/3]"
            echo "[INFO] Building jccl-core 0.2.0                                           [2/3]"
            sleep "${STUB_BUILD_SECONDS:-0}"
            echo "[INFO] Building jccl-cli 0.2.0                                            [3/3]"
            mkdir -p jccl-cli/target/lib
            cp "$STUB_JAR" jccl-cli/target/jccl-cli.jar
            echo "[INFO] BUILD SUCCESS"
            """;

    @TempDir
    Path root;

    private Path stubJar;

    @BeforeEach
    void layout(@TempDir Path jarDir) throws IOException {
        assumeTrue(new File("/usr/bin/flock").canExecute() || new File("/bin/flock").canExecute(),
                "flock (util-linux) is not installed; bin/jccl needs it");
        Path repo = Path.of("").toAbsolutePath().getParent();
        Path binJccl = repo.resolve("bin/jccl");
        assertTrue(Files.isRegularFile(binJccl), "bin/jccl not found at " + binJccl + " (tests run in jccl-cli/)");
        Files.createDirectories(root.resolve("bin"));
        Files.copy(binJccl, root.resolve("bin/jccl"), StandardCopyOption.COPY_ATTRIBUTES);
        Files.copy(repo.resolve("bin/jdk25.sh"), root.resolve("bin/jdk25.sh"), StandardCopyOption.COPY_ATTRIBUTES);
        Files.writeString(root.resolve("pom.xml"), "<project/>\n");
        Path mvnw = root.resolve("mvnw");
        Files.writeString(mvnw, STUB_MVNW);
        assertTrue(mvnw.toFile().setExecutable(true));
        // The jar the stand-in "builds": the real CLI, on this test JVM's classpath.
        stubJar = jarDir.resolve("jccl-cli.jar");
        List<String> urls = new ArrayList<>();
        for (String e : System.getProperty("java.class.path").split(File.pathSeparator)) {
            if (!e.isEmpty()) {
                urls.add(Path.of(e).toAbsolutePath().toUri().toString());
            }
        }
        Manifest m = new Manifest();
        m.getMainAttributes().put(Attributes.Name.MANIFEST_VERSION, "1.0");
        m.getMainAttributes().put(Attributes.Name.MAIN_CLASS, JcclCli.class.getName());
        m.getMainAttributes().put(Attributes.Name.CLASS_PATH, String.join(" ", urls));
        try (OutputStream o = Files.newOutputStream(stubJar); JarOutputStream j = new JarOutputStream(o, m)) {
            j.flush();
        }
    }

    /** One bin/jccl process; stdout and stderr go to files (read them once it has exited). */
    private record Started(Process process, Path out, Path err) {
        String stdout() throws IOException {
            return Files.readString(out);
        }

        String stderr() throws IOException {
            return Files.readString(err);
        }

        int waitFor() throws InterruptedException {
            assertTrue(process.waitFor(90, TimeUnit.SECONDS), "bin/jccl did not finish in 90 s");
            return process.exitValue();
        }
    }

    private Started start(String name, Map<String, String> env, String... args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(root.resolve("bin/jccl").toString());
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).directory(root.toFile());
        pb.environment().put("STUB_JAR", stubJar.toString());
        pb.environment().putAll(env);
        Path out = root.resolve(name + ".out");
        Path err = root.resolve(name + ".err");
        pb.redirectOutput(out.toFile()).redirectError(err.toFile()).redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
        return new Started(pb.start(), out, err);
    }

    private List<String> mvnwCalls() throws IOException {
        Path calls = root.resolve("target/mvnw-calls");
        return Files.exists(calls) ? Files.readAllLines(calls) : List.of();
    }

    @Test
    @Timeout(120)
    void ranksStartedAtOnceBuildOnceAndTheOthersSayTheyWait() throws Exception {
        List<Started> ranks = new ArrayList<>();
        for (int r = 0; r < 3; r++) {
            ranks.add(start("rank" + r, Map.of("STUB_BUILD_SECONDS", "4"), "--version"));
        }
        int builders = 0;
        int waiters = 0;
        for (Started s : ranks) {
            assertEquals(0, s.waitFor(), s.stderr());
            assertTrue(s.stdout().startsWith("jccl "), s.stdout());
            String err = s.stderr();
            assertFalse(err.contains(WARNING), err);
            if (err.contains("jccl: building")) {
                builders++;
                // Progress while it builds: a line per module, the download notice, the time it took.
                assertTrue(err.contains("jccl:   [2/3] jccl-core"), err);
                assertTrue(err.contains("jccl:   [3/3] jccl-cli"), err);
                assertTrue(err.contains("jccl:   downloading dependencies from Maven Central"), err);
                assertTrue(err.matches("(?s).*jccl: built in \\d+ s\n.*"), err);
            } else {
                waiters++;
                assertTrue(err.matches("(?s).*jccl: another process \\(pid \\d+\\) is building jccl.*waiting for it.*"), err);
                assertTrue(err.contains("jccl: the other build has finished"), err);
            }
        }
        assertEquals(1, builders);
        assertEquals(2, waiters);
        assertEquals(List.of("-B -Dmaven.test.skip=true -pl jccl-cli -am package"), mvnwCalls());
        // Maven's whole output is in the log, not on the terminal.
        assertTrue(Files.readString(root.resolve("target/jccl-build.log")).contains("[INFO] BUILD SUCCESS"));

        // Built: the next start does not build again.
        Started again = start("again", Map.of(), "--version");
        assertEquals(0, again.waitFor(), again.stderr());
        assertEquals("", again.stderr());
        assertEquals(1, mvnwCalls().size());
    }

    @Test
    @Timeout(120)
    void aFailedBuildShowsMavensErrorsAndSaysWhereTheLogIs() throws Exception {
        Started s = start("fail", Map.of("STUB_FAIL", "1"), "--version");
        assertEquals(1, s.waitFor());
        String err = s.stderr();
        assertTrue(err.contains("[ERROR] /src/Foo.java:[3,1] class, interface, enum, or record expected"), err);
        assertTrue(err.contains("jccl: the build failed (exit 1; whole log in " + root.toRealPath().resolve("target/jccl-build.log")),
                err);
        assertFalse(err.contains("Scanning for projects"), err);
    }

    @Test
    @Timeout(120)
    void perfAndHelpShowNoIncubatorWarningAndTheRanksRunTheVectorKernels() throws Exception {
        Started help = start("help", Map.of(), "--help");
        assertEquals(0, help.waitFor(), help.stderr());
        assertTrue(help.stdout().contains("Usage: jccl"), help.stdout());
        assertFalse(help.stderr().contains(WARNING), help.stderr());

        Started perf = start("perf", Map.of("JCCL_DEBUG", "INFO", "JCCL_DEBUG_SUBSYS", "INIT"),
                "perf", "all_reduce", "-np", "2", "-b", "1K", "-e", "4K", "-f", "4", "-n", "2", "-w", "1", "--jit-warmup", "0");
        assertEquals(0, perf.waitFor(), perf.stderr());
        String all = perf.stdout() + perf.stderr();
        assertFalse(all.contains(WARNING), all);
        assertTrue(perf.stdout().contains("# Out of bounds values : 0 OK"), perf.stdout());
        for (int rank = 0; rank < 2; rank++) {
            String rankPrefix = "[" + rank + "] ";
            assertTrue(all.lines().anyMatch(l -> l.startsWith(rankPrefix) && l.contains("JCCL INFO reduction kernels: Vector API")),
                    "rank " + rank + " does not log the Vector API kernels:\n" + all);
        }
    }

    @Test
    @Timeout(120)
    void theJvmWritesStraightToTheCallersStderrOnceItRuns() throws Exception {
        assumeTrue(Files.isDirectory(Path.of("/proc/self/fd")), "no /proc/self/fd on this system");
        Started build = start("build", Map.of(), "--version");
        assertEquals(0, build.waitFor(), build.stderr());
        // The rank's parent is the launcher JVM: where does that JVM's fd 2 point now?
        Started s = start("fd", Map.of(), "run", "-np", "1", "--bind-to", "none", "--", "sh", "-c",
                "readlink /proc/$PPID/fd/2; echo to-stderr >&2");
        assertEquals(0, s.waitFor(), s.stderr());
        assertEquals("[0] " + s.err().toRealPath(), s.stdout().strip(), "the JVM's stderr is not the file it was started with");
        assertEquals("[0] to-stderr\n", s.stderr());
    }
}
