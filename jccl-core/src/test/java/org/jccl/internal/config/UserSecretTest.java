package org.jccl.internal.config;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.nio.file.attribute.UserPrincipal;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.jccl.ConfigException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The per-user secret file: made once, atomically, private; refused with the fix when others could read or change it. */
@Timeout(60)
class UserSecretTest {

    @TempDir
    Path tmp;

    private Path home() throws IOException {
        Path home = tmp.resolve("home");
        Files.createDirectories(home);
        Files.setPosixFilePermissions(home, PosixFilePermissions.fromString("rwxr-xr-x"));
        return home;
    }

    private static String mode(Path p) throws IOException {
        return PosixFilePermissions.toString(Files.getPosixFilePermissions(p));
    }

    @Test
    void madeOnFirstUseWithMode600InADirectoryOf700AndReadAfterwards() throws Exception {
        Path file = UserSecret.location(Map.of(), home().toString());
        assertEquals(tmp.resolve("home/.jccl/secret"), file);
        byte[] s = UserSecret.readOrCreate(file);
        assertEquals(16, s.length);
        assertEquals("rw-------", mode(file));
        assertEquals("rwx------", mode(file.getParent()));
        String text = Files.readString(file, StandardCharsets.US_ASCII);
        assertEquals(HexFormat.of().formatHex(s) + "\n", text);
        assertArrayEquals(s, UserSecret.readOrCreate(file), "the second use reads the same secret");
        try (var files = Files.list(file.getParent())) {
            assertEquals(List.of(file), files.toList(), "no temporary file is left behind");
        }
    }

    @Test
    void jcclSecretFileNamesAnotherPath() {
        assertEquals(Path.of("/shared/s"), UserSecret.location(Map.of("JCCL_SECRET_FILE", "/shared/s"), "/home/x"));
        ConfigException e = assertThrows(ConfigException.class, () -> UserSecret.location(Map.of(), null));
        assertTrue(e.getMessage().contains("JCCL_SECRET_FILE") && e.getMessage().contains("JCCL_AUTH_TOKEN"), e.getMessage());
    }

    @Test
    void concurrentCreatorsInOneJvmEndWithOneSecret() throws Exception {
        Path file = home().resolve(".jccl/secret");
        int n = 8;
        ExecutorService pool = Executors.newFixedThreadPool(n);
        try {
            CountDownLatch go = new CountDownLatch(1);
            List<Future<String>> fs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                fs.add(pool.submit(() -> {
                    go.await();
                    return HexFormat.of().formatHex(UserSecret.readOrCreate(file));
                }));
            }
            go.countDown();
            Set<String> seen = new HashSet<>();
            for (Future<String> f : fs) {
                seen.add(f.get(30, TimeUnit.SECONDS));
            }
            assertEquals(1, seen.size(), "every thread reads one secret: " + seen);
            assertEquals(seen.iterator().next() + "\n", Files.readString(file));
        } finally {
            pool.shutdownNow();
        }
    }

    /** Entry point of the JVMs of {@link #concurrentCreatorsInSeveralJvmsEndWithOneSecret}: waits for a start file, prints the secret. */
    public static final class Creator {
        public static void main(String[] args) throws Exception {
            Path go = Path.of(args[1]);
            while (!Files.exists(go)) {
                Thread.onSpinWait();
            }
            System.out.println("SECRET " + HexFormat.of().formatHex(UserSecret.readOrCreate(Path.of(args[0]))));
        }
    }

    @Test
    void concurrentCreatorsInSeveralJvmsEndWithOneSecret() throws Exception {
        Path file = home().resolve(".jccl/secret");
        Path go = tmp.resolve("go");
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<Process> ps = new ArrayList<>();
        List<Path> outs = new ArrayList<>();
        try {
            for (int i = 0; i < 3; i++) {
                Path out = tmp.resolve("creator" + i + ".out");
                outs.add(out);
                ps.add(new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), Creator.class.getName(), file.toString(),
                        go.toString()).redirectErrorStream(true).redirectOutput(out.toFile())
                        .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null"))).start());
            }
            Thread.sleep(1500); // let the JVMs start and spin on the start file
            Files.createFile(go);
            Set<String> seen = new HashSet<>();
            for (int i = 0; i < ps.size(); i++) {
                assertTrue(ps.get(i).waitFor(40, TimeUnit.SECONDS), "creator " + i + " did not finish");
                String out = Files.readString(outs.get(i));
                assertEquals(0, ps.get(i).exitValue(), out);
                assertTrue(out.startsWith("SECRET "), out);
                seen.add(out.strip().substring(7));
            }
            assertEquals(1, seen.size(), "every JVM reads one secret: " + seen);
            assertEquals(seen.iterator().next() + "\n", Files.readString(file));
        } finally {
            ps.forEach(Process::destroyForcibly);
        }
    }

    @Test
    void aFileOthersMayReadIsRefusedWithTheFix() throws Exception {
        Path file = home().resolve(".jccl/secret");
        UserSecret.readOrCreate(file);
        for (String m : List.of("rw-r-----", "rw----r--", "rw--w----")) {
            Files.setPosixFilePermissions(file, PosixFilePermissions.fromString(m));
            ConfigException e = assertThrows(ConfigException.class, () -> UserSecret.readOrCreate(file));
            assertTrue(e.getMessage().contains("has mode " + m) && e.getMessage().contains("chmod 600 " + file), e.getMessage());
            assertFalse(e.getMessage().contains(Files.readString(file).strip()), "the secret is never shown");
        }
    }

    @Test
    void aDirectoryOthersMayWriteIsRefusedWithTheFix() throws Exception {
        Path file = home().resolve(".jccl/secret");
        UserSecret.readOrCreate(file);
        Files.setPosixFilePermissions(file.getParent(), PosixFilePermissions.fromString("rwxrwxrwx"));
        ConfigException e = assertThrows(ConfigException.class, () -> UserSecret.readOrCreate(file));
        assertTrue(e.getMessage().contains("chmod 700 " + file.getParent()), e.getMessage());
    }

    @Test
    void contentThatIsNotASecretIsRefusedWithTheFix() throws Exception {
        Path file = home().resolve(".jccl/secret");
        UserSecret.readOrCreate(file);
        Files.writeString(file, "not-hex-but-thirty-two-chars-xx\n");
        ConfigException e = assertThrows(ConfigException.class, () -> UserSecret.readOrCreate(file));
        assertTrue(e.getMessage().contains("is not a jccl secret") && e.getMessage().contains("remove it"), e.getMessage());
    }

    private static boolean root() throws Exception {
        Process p = new ProcessBuilder("id", "-u").start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.US_ASCII).strip();
        return p.waitFor() == 0 && out.equals("0");
    }

    @Test
    void aFileOfAnotherUserIsRefused() throws Exception {
        assumeTrue(root(), "giving a file to another user needs root (chown)");
        Path file = home().resolve(".jccl/secret");
        UserSecret.readOrCreate(file);
        UserPrincipal nobody = file.getFileSystem().getUserPrincipalLookupService().lookupPrincipalByName("nobody");
        Files.setOwner(file, nobody);
        ConfigException e = assertThrows(ConfigException.class, () -> UserSecret.readOrCreate(file));
        assertTrue(e.getMessage().contains("is owned by nobody") && e.getMessage().contains("rm " + file), e.getMessage());
    }

    /**
     * A file its owner cannot read (mode 000): the error says how to fix it. Root reads any file, so
     * this runs a JVM as user nobody (setpriv) on a file that nobody owns.
     */
    @Test
    void anUnreadableFileFailsWithTheFix() throws Exception {
        assumeTrue(root(), "running a JVM as another user needs root");
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/setpriv")), "setpriv (util-linux) is not installed");
        Path home = home();
        Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwxr-xr-x"));
        Path file = home.resolve(".jccl/secret");
        UserSecret.readOrCreate(file);
        UserPrincipal nobody = file.getFileSystem().getUserPrincipalLookupService().lookupPrincipalByName("nobody");
        Files.setOwner(file.getParent(), nobody);
        Files.setOwner(file, nobody);
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("---------"));
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        Path go = tmp.resolve("go");
        Files.createFile(go);
        Process p = new ProcessBuilder("/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", java, "-cp",
                System.getProperty("java.class.path"), Creator.class.getName(), file.toString(), go.toString())
                .redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(40, TimeUnit.SECONDS));
        assumeTrue(!out.contains("ClassNotFoundException") && !out.contains("Could not find or load main class"),
                "user nobody cannot read this test's class path: " + out);
        assertTrue(out.contains("cannot be read (permission denied)") && out.contains("chmod 600 " + file), out);
    }
}
