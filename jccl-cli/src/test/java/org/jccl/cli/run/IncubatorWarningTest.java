package org.jccl.cli.run;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.jar.Attributes;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The JVM's boot-time {@code WARNING: Using incubator modules: jdk.incubator.vector}: real ranks
 * started by {@link LocalLauncher} do not show it when jccl composed their command (jccl added the
 * module), still run the Vector API kernels, and do show it when the user wrote the command.
 */
class IncubatorWarningTest {

    private static final String WARNING = RankOutput.INCUBATOR_WARNING;

    private record Run(int code, List<String> out, List<String> err) {
    }

    private static Run launch(int np, List<String> command) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int code = LocalLauncher.launch(np, command, java.util.Map.of(), new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8));
        return new Run(code, out.toString(StandardCharsets.UTF_8).lines().toList(),
                err.toString(StandardCharsets.UTF_8).lines().toList());
    }

    @Test
    @Timeout(90)
    void ranksJcclStartsShowNoIncubatorWarningAndRunTheVectorKernels() {
        Run r = launch(2, LocalLauncher.javaCommand(KernelProbe.class.getName()));
        assertEquals(0, r.code(), () -> "exit code; stderr: " + r.err());
        assertFalse(r.err().stream().anyMatch(l -> l.contains(WARNING)), () -> "the warning was shown: " + r.err());
        for (int rank = 0; rank < 2; rank++) {
            String prefix = "[" + rank + "] ";
            // The rank's other stderr lines still arrive: only the one warning line is dropped.
            assertTrue(r.err().contains(prefix + "stderr of rank " + rank), () -> "stderr: " + r.err());
            assertTrue(r.out().stream().anyMatch(l -> l.startsWith(prefix + "vectorized=true kernels=Vector API")),
                    () -> "the rank does not run the Vector API kernels: " + r.out());
        }
    }

    @Test
    @Timeout(90)
    void aCommandTheUserWroteKeepsItsWarning() {
        // The same JVM flags in another order: the user's own command line, so the user's warning.
        List<String> cmd = new ArrayList<>(List.of(JavaCommand.javaBinary(), "--add-modules", "jdk.incubator.vector",
                "--enable-native-access=ALL-UNNAMED", "-cp", String.join(java.io.File.pathSeparator,
                        JavaCommand.ownClasspath()), KernelProbe.class.getName()));
        assertFalse(JavaCommand.isJcclJavaCommand(cmd));
        Run r = launch(1, cmd);
        assertEquals(0, r.code(), () -> "exit code; stderr: " + r.err());
        assertTrue(r.err().contains("[0] " + WARNING), () -> "the user's warning is gone: " + r.err());
        assertTrue(r.out().stream().anyMatch(l -> l.startsWith("[0] vectorized=true")), () -> "out: " + r.out());
    }

    @Test
    void onlyTheFlagsJcclPutsFirstMarkItsOwnCommand() {
        assertTrue(JavaCommand.isJcclJavaCommand(LocalLauncher.javaCommand("com.example.Main")));
        assertFalse(JavaCommand.isJcclJavaCommand(List.of("sh", "-c", "java --add-modules jdk.incubator.vector X")));
        assertFalse(JavaCommand.isJcclJavaCommand(List.of(JavaCommand.javaBinary(), "-cp", "x", "Main")));
        // The flags alone, with nothing to run, are not a command.
        assertFalse(JavaCommand.isJcclJavaCommand(LocalLauncher.javaCommand("M").subList(0, 4)));
    }

    @Test
    void theRanksClasspathComesFromTheJarManifestNotFromEveryJarBesideIt(@TempDir Path dir) throws IOException {
        Path lib = Files.createDirectories(dir.resolve("lib"));
        Files.writeString(lib.resolve("jccl-core-0.2.0.jar"), "x");
        Files.writeString(lib.resolve("jccl-core-0.1.0-SNAPSHOT.jar"), "x"); // an older build's leftover
        Path classes = Files.createDirectories(dir.resolve("some classes"));
        Path jar = dir.resolve("jccl-cli.jar");
        Manifest m = new Manifest();
        m.getMainAttributes().put(Attributes.Name.MANIFEST_VERSION, "1.0");
        m.getMainAttributes().put(Attributes.Name.CLASS_PATH,
                "lib/jccl-core-0.2.0.jar lib/missing.jar " + classes.toUri() + " some%20classes/");
        try (OutputStream o = Files.newOutputStream(jar); JarOutputStream j = new JarOutputStream(o, m)) {
            j.flush();
        }
        assertEquals(List.of(lib.resolve("jccl-core-0.2.0.jar"), classes, classes),
                JavaCommand.manifestClassPath(jar));
    }
}
