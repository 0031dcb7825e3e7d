package org.jccl.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.jccl.cuda.internal.Kernels;
import org.junit.jupiter.api.Test;

/**
 * The committed fatbin matches its sources: the stamp written by scripts/build-kernels.sh records
 * the SHA-256 of the CUDA sources (and of the nvcc flags) and of the fatbin itself. Editing a .cu
 * file without rebuilding, or replacing the fatbin, fails here (on every machine; no GPU needed).
 */
class CudaKernelsTest {
    private static final Path MODULE = Path.of("").toAbsolutePath();
    private static final Path SOURCES = MODULE.resolve("src/main/cuda");
    private static final Path RESOURCES = MODULE.resolve("src/main/resources/org/jccl/cuda");
    private static final Path SCRIPT = MODULE.resolve("../scripts/build-kernels.sh").normalize();

    @Test
    void fatbinMatchesItsSources() throws IOException {
        String stamp = Files.readString(RESOURCES.resolve("jccl_kernels.stamp"));
        String want = field(stamp, "sources");
        String have = sha256(sourcesImage(flags()));
        assertEquals(want, have, "jccl-cuda/src/main/cuda changed since the fatbin was built: run scripts/build-kernels.sh"
                + " (needs nvcc) and commit the fatbin and its stamp");
    }

    @Test
    void stampNamesTheCommittedFatbin() throws IOException {
        String stamp = Files.readString(RESOURCES.resolve("jccl_kernels.stamp"));
        byte[] fatbin = Files.readAllBytes(RESOURCES.resolve("jccl_kernels.fatbin"));
        assertEquals(field(stamp, "fatbin"), sha256(fatbin), "jccl_kernels.fatbin is not the file scripts/build-kernels.sh built");
        assertEquals(fatbin.length, Kernels.image().length, "the class path holds another fatbin than the sources' one");
    }

    @Test
    void everyKernelTheJavaSideLooksUpIsInTheSource() throws IOException {
        String cu = Files.readString(SOURCES.resolve("jccl_kernels.cu"));
        for (String name : List.of("jccl_copy", "jccl_p2p", "jccl_reduce_##TNAME##_##OPNAME", "jccl_oneshot_##TNAME##_##OPNAME",
                "jccl_push_##TNAME##_##OPNAME", "jccl_oneshot_release")) {
            assertTrue(cu.contains(name), name + " is missing from jccl_kernels.cu");
        }
    }

    /** The byte stream build-kernels.sh hashes: for each source in C-locale order, its name, a newline and its bytes; then the flags line. */
    private static byte[] sourcesImage(String flags) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        List<Path> files;
        try (Stream<Path> s = Files.list(SOURCES)) {
            files = s.filter(p -> p.getFileName().toString().endsWith(".cu") || p.getFileName().toString().endsWith(".cuh"))
                    .sorted((a, b) -> compareBytes(a.getFileName().toString(), b.getFileName().toString()))
                    .toList();
        }
        for (Path f : files) {
            out.write((f.getFileName().toString() + "\n").getBytes(StandardCharsets.UTF_8));
            out.write(Files.readAllBytes(f));
        }
        out.write(("flags: " + flags + "\n").getBytes(StandardCharsets.UTF_8));
        return out.toByteArray();
    }

    private static int compareBytes(String a, String b) {
        return java.util.Arrays.compare(a.getBytes(StandardCharsets.UTF_8), b.getBytes(StandardCharsets.UTF_8));
    }

    private static String flags() throws IOException {
        Matcher m = Pattern.compile("(?m)^flags=\"([^\"]*)\"").matcher(Files.readString(SCRIPT));
        assertTrue(m.find(), "no flags=\"...\" line in " + SCRIPT);
        return m.group(1);
    }

    private static String field(String stamp, String name) {
        Matcher m = Pattern.compile("(?m)^" + name + ": (\\S+)").matcher(stamp);
        assertTrue(m.find(), "no '" + name + ":' line in the stamp:\n" + stamp);
        String v = m.group(1);
        assertNotNull(v);
        return v;
    }

    private static String sha256(byte[] b) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
        } catch (NoSuchAlgorithmException e) {
            throw new AssertionError(e);
        }
    }
}
