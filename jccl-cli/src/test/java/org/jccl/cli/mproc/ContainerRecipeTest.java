package org.jccl.cli.mproc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jccl.cli.run.LocalLauncher;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The container recipe (docs/deploy/Containerfile) as far as this machine allows (no container
 * engine runs here): its base is a Java 25 runtime image and it installs no build tools; the jars
 * staged as its header says, laid out where its COPY puts them, are a complete class path: the
 * image's ENTRYPOINT + CMD, run with this machine's Java 25 in place of the image's, form a 2-rank
 * job with the environment the Kubernetes recipe gives (loopback here) and every collective is right.
 */
class ContainerRecipeTest {

    @TempDir
    Path root;

    private static Path repo() {
        for (Path p = Path.of(System.getProperty("user.dir")).toAbsolutePath(); p != null; p = p.getParent()) {
            if (Files.isRegularFile(p.resolve("docs/deploy/Containerfile"))) {
                return p;
            }
        }
        throw new AssertionError("docs/deploy/Containerfile not found above " + System.getProperty("user.dir"));
    }

    private static void jarUp(Path dir, Path jar) throws java.io.IOException {
        try (var out = new java.util.jar.JarOutputStream(Files.newOutputStream(jar)); var files = Files.walk(dir)) {
            for (Path f : files.filter(Files::isRegularFile).toList()) {
                out.putNextEntry(new java.util.jar.JarEntry(dir.relativize(f).toString().replace(File.separatorChar, '/')));
                Files.copy(f, out);
                out.closeEntry();
            }
        }
    }

    private static List<String> jsonArray(String text, String instruction) {
        Matcher m = Pattern.compile("(?m)^" + instruction + "\\s+\\[(.*)]\\s*$").matcher(text);
        assertTrue(m.find(), instruction + " in exec form is missing");
        List<String> out = new ArrayList<>();
        Matcher s = Pattern.compile("\"([^\"]*)\"").matcher(m.group(1));
        while (s.find()) {
            out.add(s.group(1));
        }
        return out;
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void theImagesClassPathAndEntrypointFormAJob() throws Exception {
        Path repo = repo();
        String file = Files.readString(repo.resolve("docs/deploy/Containerfile"));
        Matcher from = Pattern.compile("(?m)^FROM\\s+(\\S+)").matcher(file);
        assertTrue(from.find() && from.group(1).matches(".*:25-jre.*"), "a Java 25 runtime image, not a JDK: " + file);
        assertFalse(Pattern.compile("(?m)^RUN\\b").matcher(file).find(), "no RUN: nothing is built or installed in the image");
        assertTrue(file.contains("COPY image/lib/ /opt/jccl/lib/"), file);
        // Stage what the header's cp lines stage (jccl-cli's jar, its runtime dependencies jccl-core, jccl-cuda and
        // picocli, the application), as jars in the directory the COPY fills. Taken from this test's class path, since
        // under `mvn verify` the CLI jar is packaged only after its tests: class directories are jarred here.
        Path lib = root.resolve("opt/jccl/lib");
        Files.createDirectories(lib);
        int n = 0;
        for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
            Path p = Path.of(entry);
            String s = p.toString().replace(File.separatorChar, '/');
            boolean ours = (s.contains("/jccl-core/") || s.contains("/jccl-cuda/") || s.contains("/jccl-cli/") || s.contains("/examples/")
                    || s.contains("/jccl-examples") || p.getFileName().toString().startsWith("picocli-")) && !s.contains("test-classes")
                    && !s.contains("-tests.jar");
            if (!ours || !Files.exists(p)) {
                continue;
            }
            Path jar = lib.resolve("part" + (n++) + "-" + p.getFileName().toString().replaceAll("\\.jar$", "") + ".jar");
            if (Files.isDirectory(p)) {
                jarUp(p, jar);
            } else {
                Files.copy(p, jar);
            }
        }
        assertTrue(n >= 5, "jccl-core, jccl-cuda, jccl-cli, picocli and the examples on the class path: " + System.getProperty("java.class.path"));
        List<String> command = new ArrayList<>(jsonArray(file, "ENTRYPOINT"));
        command.addAll(jsonArray(file, "CMD"));
        assertEquals("java", command.getFirst());
        command.set(0, LocalLauncher.javaCommand("x").getFirst()); // this machine's Java 25 for the image's
        int cp = command.indexOf("-cp") + 1;
        assertEquals("/opt/jccl/lib/*", command.get(cp));
        command.set(cp, lib + File.separator + "*");
        command.addAll(List.of("--counts", "0,7,1000", "--types", "float32,bfloat16", "--reduce-ops", "sum,max"));
        String token = Processes.newToken();
        String commId = "127.0.0.1:" + Processes.freePort();
        try (Processes procs = new Processes()) {
            for (int r = 0; r < 2; r++) {
                procs.start("rank" + r, command, Map.of("JCCL_RANK", Integer.toString(r), "JCCL_WORLD_SIZE", "2", "JCCL_LOCAL_RANK", "0",
                        "JCCL_COMM_ID", commId, "JCCL_AUTH_TOKEN", token));
            }
            List<Integer> codes = procs.waitAll(Duration.ofSeconds(100));
            assertEquals(List.of(0, 0), codes, procs.outputs());
            Processes.checkOk(procs.outputs());
        }
    }
}
