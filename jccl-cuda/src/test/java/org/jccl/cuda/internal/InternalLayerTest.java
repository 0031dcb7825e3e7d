package org.jccl.cuda.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Without a GPU: org.jccl.cuda.internal works with raw pointers, stream handles and its own
 * {@link Gpu} description, below the public package. The one public type it may name is
 * CudaException, the exception every CUDA and NCCL call throws and callers catch (translating an
 * internal one at every public entry point would change what tests and users catch). A new reference
 * to another public type (CudaDevice, DeviceBuffer, CudaStream, ...) fails here: hand the internal
 * code what it needs instead.
 */
class InternalLayerTest {
    private static final Path INTERNAL = Path.of("").toAbsolutePath().resolve("src/main/java/org/jccl/cuda/internal");
    private static final Set<String> ALLOWED = Set.of("CudaException");
    private static final Pattern COMMENTS_AND_STRINGS = Pattern.compile("//[^\\n]*|/\\*.*?\\*/|\"(?:\\\\.|[^\"\\\\])*\"", Pattern.DOTALL);
    private static final Pattern PUBLIC_TYPE = Pattern.compile("\\borg\\.jccl\\.cuda\\.([A-Z]\\w*)");

    /** File -> public org.jccl.cuda types it names (imports and qualified names), comments and strings left out. */
    private static Map<String, Set<String>> references() throws IOException {
        Map<String, Set<String>> out = new TreeMap<>();
        List<Path> files;
        try (Stream<Path> s = Files.list(INTERNAL)) {
            files = s.filter(p -> p.toString().endsWith(".java")).toList();
        }
        assertTrue(files.size() > 10, "no sources found in " + INTERNAL);
        for (Path f : files) {
            String code = COMMENTS_AND_STRINGS.matcher(Files.readString(f)).replaceAll(" ");
            Matcher m = PUBLIC_TYPE.matcher(code);
            while (m.find()) {
                out.computeIfAbsent(f.getFileName().toString(), k -> new TreeSet<>()).add(m.group(1));
            }
        }
        return out;
    }

    @Test
    void theInternalPackageNamesNoPublicTypeButCudaException() throws IOException {
        Map<String, Set<String>> bad = new TreeMap<>();
        for (Map.Entry<String, Set<String>> e : references().entrySet()) {
            Set<String> other = new TreeSet<>(e.getValue());
            other.removeAll(ALLOWED);
            if (!other.isEmpty()) {
                bad.put(e.getKey(), other);
            }
        }
        assertEquals(Map.of(), bad, "org.jccl.cuda.internal must not depend on the public package (but CudaException)");
    }

    @Test
    void theScanFindsWhatItLooksFor() throws IOException {
        assertTrue(references().getOrDefault("CudaDriver.java", Set.of()).contains("CudaException"),
                "the scan no longer sees CudaDriver's import of CudaException");
    }
}
