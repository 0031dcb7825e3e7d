package org.jccl.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.cuda.internal.Nccl;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * NCCL's lookup and constant tables, on any machine: where NCCL is missing (CI) the reason names
 * every place tried; {@code JCCL_NCCL_LIBRARY} that does not load is an error naming it; the wheel
 * globs and the Python fallback are followed; jccl's types and operators map to nccl.h's values.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class NcclLibraryTest {

    /** A library name the system loader finds nowhere, so that the later places are reached. */
    private static final String NOWHERE = "libjccl-test-no-such-library.so.2";

    @TempDir
    Path tmp;

    /** The lookup as the process did it: here (no NCCL) unavailable, with every place named. */
    @Test
    void unavailableWhereNcclIsMissingAndTheReasonNamesThePlacesTried() {
        assumeFalse(Nccl.available(), "NCCL " + Nccl.version() + " is installed here (" + Nccl.path() + ")");
        assertFalse(NcclCommunicator.isAvailable());
        String why = NcclCommunicator.unavailableReason();
        assertNotNull(why);
        assertTrue(why.contains("libnccl.so.2"), why);
        assertTrue(why.contains("JCCL_NCCL_LIBRARY"), why);
        assertTrue(why.contains("system loader"), why);
        assertTrue(why.contains("/opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2"), why);
        assertTrue(why.contains("/usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2"), why);
        assertTrue(why.contains("import nvidia.nccl"), why);
        assertTrue(NcclCommunicator.librarySearch().size() >= 4, NcclCommunicator.librarySearch().toString());
        CudaException e = assertThrows(CudaException.class, NcclCommunicator::version);
        assertTrue(e.getMessage().contains("not available"), e.getMessage());
    }

    @Test
    void whereNcclIsInstalledItsVersionAndPathAreKnown() {
        assumeTrue(Nccl.available(), "skipped: no NCCL here: " + Nccl.problem());
        assertTrue(NcclCommunicator.version().matches("\\d+\\.\\d+\\.\\d+"), NcclCommunicator.version());
        assertTrue(Files.exists(Path.of(NcclCommunicator.libraryPath())), NcclCommunicator.libraryPath());
        assertNull(Nccl.problem());
    }

    @Test
    void configuredPathThatDoesNotExistIsAnErrorNamingIt() {
        String path = tmp.resolve("no/such/dir/libnccl.so.2").toString();
        Nccl.Located l = Nccl.locate(Map.of("JCCL_NCCL_LIBRARY", path), Nccl.WHEEL_PATTERNS, Nccl.PYTHONS);
        assertNull(l.lookup());
        assertNotNull(l.problem());
        assertTrue(l.problem().contains("JCCL_NCCL_LIBRARY=" + path), l.problem());
        assertTrue(l.problem().contains("no such file"), l.problem());
        // No fallback: the setting says where NCCL is, so nothing else was looked at.
        assertEquals(1, l.tried().size(), l.tried().toString());
    }

    @Test
    void configuredFileThatIsNotALibraryIsAnErrorNamingIt() throws IOException {
        Path fake = Files.writeString(tmp.resolve("libnccl.so.2"), "not an ELF file");
        Nccl.Located l = Nccl.locate(Map.of("JCCL_NCCL_LIBRARY", fake.toString()), Nccl.WHEEL_PATTERNS, List.of());
        assertNull(l.lookup());
        assertTrue(l.problem().contains(fake.toString()), l.problem());
        assertTrue(l.problem().contains("could not be loaded"), l.problem());
    }

    @Test
    void blankSettingMeansNotSet() {
        Nccl.Located l = Nccl.locate(Map.of("JCCL_NCCL_LIBRARY", "  "), List.of(), List.of());
        assertTrue(l.tried().get(0).contains("JCCL_NCCL_LIBRARY: not set"), l.tried().toString());
    }

    /** The wheel patterns are globs: python3* matches a directory, and a file found there is tried. */
    @Test
    void wheelGlobsAreExpandedAndAFileThatDoesNotLoadIsReported() throws IOException {
        Path lib = tmp.resolve("home/.local/lib/python3.99/site-packages/nvidia/nccl/lib/libnccl.so.2");
        Files.createDirectories(lib.getParent());
        Files.writeString(lib, "garbage");
        Map<String, String> env = Map.of("HOME", tmp.resolve("home").toString());
        List<String> patterns = List.of("~/.local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
                "$VIRTUAL_ENV/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2");
        Nccl.Located l = Nccl.locate(env, NOWHERE, patterns, List.of());
        assertNull(l.lookup());
        String all = String.join("\n", l.tried());
        assertTrue(all.contains(NOWHERE + " through the system loader"), all);
        assertTrue(all.contains(lib + ": found but did not load (not an ELF shared library)"), all);
        assertTrue(all.contains("VIRTUAL_ENV not set"), all);
        assertTrue(all.contains("import nvidia.nccl': not asked"), all);
        assertTrue(l.problem().contains(lib.toString()), l.problem());
    }

    /** Last resort: a python3 that knows nvidia.nccl names the directory; one that does not is reported. */
    @Test
    void pythonIsAskedLastAndItsAnswersAreReported() throws IOException {
        Path pkg = Files.createDirectories(tmp.resolve("site/nvidia/nccl"));
        Path knows = script("knows", "#!/bin/sh\necho " + pkg + "\n");
        Path lacks = script("lacks", "#!/bin/sh\necho 'No module named nvidia' >&2\nexit 1\n");
        Nccl.Located l = Nccl.locate(Map.of("PATH", ""), NOWHERE, List.of(), List.of(lacks.toString(), knows.toString(), "python3"));
        assertNull(l.lookup());
        String all = String.join("\n", l.tried());
        assertTrue(all.contains(lacks + " -c 'import nvidia.nccl': not installed (exit 1)"), all);
        assertTrue(all.contains(pkg.resolve("lib/libnccl.so.2") + " (from " + knows + "): no such file"), all);
    }

    @Test
    void globMatchesOnlyExistingFiles() throws IOException {
        Files.createDirectories(tmp.resolve("a/python3.11/x"));
        Files.createDirectories(tmp.resolve("a/python3.12/x"));
        Files.createDirectories(tmp.resolve("a/perl5/x"));
        Files.writeString(tmp.resolve("a/python3.11/x/f"), "");
        Files.writeString(tmp.resolve("a/python3.12/x/f"), "");
        Files.writeString(tmp.resolve("a/perl5/x/f"), "");
        Nccl.Located l = Nccl.locate(Map.of(), NOWHERE, List.of(tmp + "/a/python3*/x/f"), List.of());
        assertNull(l.lookup());
        String all = String.join("\n", l.tried());
        // Newest first, the perl directory not matched.
        int i12 = all.indexOf("python3.12/x/f: found");
        int i11 = all.indexOf("python3.11/x/f: found");
        assertTrue(i12 >= 0 && i11 > i12, all);
        assertFalse(all.contains("perl5"), all);
        assertEquals(List.of(tmp.resolve("a/python3.12/x/f"), tmp.resolve("a/python3.11/x/f")), Nccl.glob(tmp + "/a/python3*/x/f"));
    }

    /** Where an nvidia-nccl wheel is installed (the GPU machines), its glob finds it and it loads. */
    @Test
    void theInstalledWheelIsFoundByItsGlob() {
        List<Path> found = Nccl.WHEEL_PATTERNS.stream().filter(p -> p.startsWith("/")).flatMap(p -> Nccl.glob(p).stream()).toList();
        assumeFalse(found.isEmpty(), "skipped: no nvidia-nccl wheel here");
        Nccl.Located l = Nccl.locate(Map.of(), NOWHERE, Nccl.WHEEL_PATTERNS, List.of());
        assertNotNull(l.lookup(), l.tried().toString());
        assertEquals(found.get(0).toString(), l.path());
        assertTrue(l.tried().get(l.tried().size() - 1).endsWith(": loaded"), l.tried().toString());
    }

    /** Where a python3 with nvidia.nccl exists (the GPU machines), asking it finds the library. */
    @Test
    void theInstalledPythonIsAskedAndItsAnswerLoads() {
        assumeTrue(Files.isExecutable(Path.of("/opt/torch/.venv/bin/python3")), "skipped: no /opt/torch/.venv/bin/python3 here");
        Nccl.Located l = Nccl.locate(Map.of(), NOWHERE, List.of(), List.of("/opt/torch/.venv/bin/python3"));
        assumeTrue(l.lookup() != null, () -> "skipped: that python3 has no nvidia.nccl: " + l.tried());
        assertTrue(l.path().endsWith("/nvidia/nccl/lib/libnccl.so.2"), l.path());
        assertTrue(l.tried().get(l.tried().size() - 1).contains("(from /opt/torch/.venv/bin/python3): loaded"), l.tried().toString());
    }

    private Path script(String name, String text) throws IOException {
        Path p = Files.writeString(tmp.resolve(name), text);
        Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rwxr-xr-x"));
        return p;
    }


    // ------------------------------------------------------------------ constant tables

    /** Values of ncclDataType_t in nccl.h (2.28.9, 2.30.7). */
    @Test
    void dataTypesMapToNcclValues() {
        Map<DataType, Integer> expected = Map.of(DataType.INT8, 0, DataType.UINT8, 1, DataType.INT32, 2, DataType.UINT32, 3,
                DataType.INT64, 4, DataType.UINT64, 5, DataType.FLOAT16, 6, DataType.FLOAT32, 7, DataType.FLOAT64, 8,
                DataType.BFLOAT16, 9);
        assertEquals(EnumSet.allOf(DataType.class), expected.keySet(), "every jccl type has an NCCL type");
        for (DataType t : DataType.values()) {
            assertEquals(expected.get(t), Nccl.dataType(t), t.toString());
        }
        assertEquals("ncclFloat32", Nccl.typeName(Nccl.dataType(DataType.FLOAT32)));
        assertEquals("ncclBfloat16", Nccl.typeName(Nccl.dataType(DataType.BFLOAT16)));
        assertEquals("ncclFloat16", Nccl.typeName(Nccl.dataType(DataType.FLOAT16)));
        assertEquals("ncclUint64", Nccl.typeName(Nccl.dataType(DataType.UINT64)));
    }

    /** Values of ncclRedOp_t in nccl.h: note MAX=2, MIN=3, not jccl's declaration order. */
    @Test
    void reduceOpsMapToNcclValues() {
        Map<ReduceOp, Integer> expected = Map.of(ReduceOp.SUM, 0, ReduceOp.PROD, 1, ReduceOp.MAX, 2, ReduceOp.MIN, 3, ReduceOp.AVG, 4);
        assertEquals(EnumSet.allOf(ReduceOp.class), expected.keySet());
        Set<Integer> seen = new HashSet<>();
        for (ReduceOp op : ReduceOp.values()) {
            assertEquals(expected.get(op), Nccl.redOp(op), op.toString());
            assertTrue(seen.add(Nccl.redOp(op)));
            assertEquals("nccl" + op.ncclName().substring(0, 1).toUpperCase() + op.ncclName().substring(1), Nccl.opName(Nccl.redOp(op)));
        }
    }

    @Test
    void resultNamesAndVersionCodes() {
        assertEquals("ncclSuccess", Nccl.resultName(0));
        assertEquals("ncclUnhandledCudaError", Nccl.resultName(1));
        assertEquals("ncclInvalidUsage", Nccl.resultName(5));
        assertEquals("ncclInProgress", Nccl.resultName(7));
        assertEquals("ncclTimeout", Nccl.resultName(8));
        assertEquals("ncclResult_t 42", Nccl.resultName(42));
        assertEquals("2.28.9", Nccl.versionString(22809));
        assertEquals("2.19.3", Nccl.versionString(21903));
        assertEquals("2.8.4", Nccl.versionString(2804));
        assertEquals("2.30.7", Nccl.versionString(23007));
        assertEquals(128, Nccl.UNIQUE_ID_BYTES);
    }
}
