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
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
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
    // ------------------------------------------------------------------ the bindings, against a stub libnccl

    /**
     * A stand-in for libnccl.so.2 with NCCL's signatures: it records every call's arguments as
     * text, so that a JVM loading it through JCCL_NCCL_LIBRARY shows what the FFM bindings pass
     * (the 128-byte ncclUniqueId by value, size_t counts, enum values, handles).
     */
    private static final String STUB_SOURCE = """
            #include <stdio.h>
            #include <string.h>
            #include <stddef.h>
            typedef struct { char internal[128]; } ncclUniqueId;
            static char last[1024] = "";
            static char calls[16384] = "";
            #define REC(...) snprintf(calls + strlen(calls), sizeof calls - strlen(calls), __VA_ARGS__)
            const char* stubCalls(void) { return calls; }
            int ncclGetVersion(int* v) { *v = 22809; return 0; }
            int ncclGetUniqueId(ncclUniqueId* u) { for (int i = 0; i < 128; i++) u->internal[i] = (char) i; return 0; }
            int ncclCommInitRank(void** comm, int nranks, ncclUniqueId id, int rank) {
              REC("initRank nranks=%d rank=%d id0=%d id127=%d;", nranks, rank, id.internal[0], id.internal[127]);
              if (rank >= nranks) { snprintf(last, sizeof last, "Invalid rank requested : %d/%d", rank, nranks); return 4; }
              *comm = (void*) 0x1230; return 0; }
            int ncclCommInitAll(void** c, int n, const int* d) {
              for (int i = 0; i < n; i++) { c[i] = (void*) (size_t) (0x100 + d[i]); REC("initAll dev=%d;", d[i]); } return 0; }
            int ncclCommDestroy(void* c) { REC("destroy %p;", c); return 0; }
            int ncclCommAbort(void* c) { REC("abort %p;", c); return 0; }
            int ncclCommGetAsyncError(void* c, int* e) { *e = c == (void*) 0x666 ? 6 : 0; return 0; }
            const char* ncclGetErrorString(int r) { return r == 4 ? "invalid argument" : r == 5 ? "invalid usage" : "other"; }
            const char* ncclGetLastError(void* comm) { return last; }
            int ncclAllReduce(const void* s, void* r, size_t n, int t, int o, void* c, void* st) {
              REC("allReduce %p %p %zu %d %d %p %p;", s, r, n, t, o, c, st);
              if (n == 666) { snprintf(last, sizeof last, "stub: count 666 refused"); return 5; } return 0; }
            int ncclBroadcast(const void* s, void* r, size_t n, int t, int root, void* c, void* st) {
              REC("broadcast %p %p %zu %d %d %p %p;", s, r, n, t, root, c, st); return 0; }
            int ncclReduce(const void* s, void* r, size_t n, int t, int o, int root, void* c, void* st) {
              REC("reduce %p %p %zu %d %d %d %p %p;", s, r, n, t, o, root, c, st); return 0; }
            int ncclAllGather(const void* s, void* r, size_t n, int t, void* c, void* st) {
              REC("allGather %p %p %zu %d %p %p;", s, r, n, t, c, st); return 0; }
            int ncclReduceScatter(const void* s, void* r, size_t n, int t, int o, void* c, void* st) {
              REC("reduceScatter %p %p %zu %d %d %p %p;", s, r, n, t, o, c, st); return 0; }
            int ncclAlltoAll(const void* s, void* r, size_t n, int t, void* c, void* st) {
              REC("alltoAll %p %p %zu %d %p %p;", s, r, n, t, c, st); return 0; }
            int ncclSend(const void* s, size_t n, int t, int p, void* c, void* st) {
              REC("send %p %zu %d %d %p %p;", s, n, t, p, c, st); return 0; }
            int ncclRecv(void* r, size_t n, int t, int p, void* c, void* st) {
              REC("recv %p %zu %d %d %p %p;", r, n, t, p, c, st); return 0; }
            int ncclGroupStart(void) { REC("groupStart;"); return 0; }
            int ncclGroupEnd(void) { REC("groupEnd;"); return 0; }
            """;

    /** What the child JVM does against the stub: every binding once, then the stub's record. */
    public static final class StubMain {
        public static void main(String[] args) throws Throwable {
            System.out.println("available=" + Nccl.available() + " version=" + Nccl.version() + " alltoall=" + Nccl.hasAlltoAll());
            byte[] id = Nccl.getUniqueId();
            System.out.println("id=" + id.length + "," + id[0] + "," + id[127]);
            java.lang.foreign.MemorySegment comm = Nccl.commInitRank(2, id, 1);
            System.out.println("comm=" + Long.toHexString(comm.address()));
            java.lang.foreign.MemorySegment[] all = Nccl.commInitAll(new int[] {3, 5});
            System.out.println("all=" + Long.toHexString(all[0].address()) + "," + Long.toHexString(all[1].address()));
            java.lang.foreign.MemorySegment st = java.lang.foreign.MemorySegment.ofAddress(0x5000);
            long big = 5_000_000_000L; // more than an int: size_t must travel as 64 bits
            Nccl.allReduce(0x1000, 0x2000, big, Nccl.FLOAT32, Nccl.MAX, comm, st);
            Nccl.broadcast(0, 0x2000, 3, Nccl.BFLOAT16, 1, comm, st);
            Nccl.reduce(0x1000, 0, 4, Nccl.INT64, Nccl.AVG, 0, comm, st);
            Nccl.allGather(0x1000, 0x2000, 5, Nccl.UINT8, comm, st);
            Nccl.reduceScatter(0x1000, 0x2000, 6, Nccl.FLOAT16, Nccl.MIN, comm, st);
            Nccl.alltoAll(0x1000, 0x2000, 7, Nccl.INT32, comm, st);
            Nccl.groupStart();
            Nccl.send(0x1000, 8, Nccl.FLOAT64, 1, comm, st);
            Nccl.recv(0x2000, 9, Nccl.UINT64, 0, comm, st);
            Nccl.groupEnd();
            System.out.println("async=" + Nccl.commGetAsyncError(comm) + "," + Nccl.commGetAsyncError(java.lang.foreign.MemorySegment.ofAddress(0x666)));
            Nccl.commAbort(all[0]);
            Nccl.commDestroy(all[1]);
            try {
                Nccl.commInitRank(2, id, 7);
            } catch (CudaException e) {
                System.out.println("error1=" + e.result() + ":" + e.getMessage());
            }
            try {
                Nccl.allReduce(0x1000, 0x2000, 666, Nccl.FLOAT32, Nccl.SUM, comm, st);
            } catch (CudaException e) {
                System.out.println("error2=" + e.result() + ":" + e.getMessage());
            }
            java.lang.foreign.SymbolLookup lib = java.lang.foreign.SymbolLookup.libraryLookup(Path.of(Nccl.path()),
                    java.lang.foreign.Arena.global());
            java.lang.invoke.MethodHandle calls = java.lang.foreign.Linker.nativeLinker().downcallHandle(
                    lib.find("stubCalls").orElseThrow(), java.lang.foreign.FunctionDescriptor.of(java.lang.foreign.ValueLayout.ADDRESS));
            java.lang.foreign.MemorySegment text = (java.lang.foreign.MemorySegment) calls.invokeExact();
            for (String call : text.reinterpret(Integer.MAX_VALUE).getString(0).split(";")) {
                System.out.println("call: " + call);
            }
        }
    }

    /** The FFM bindings against a stub libnccl (built with the machine's C compiler), in a child JVM. */
    @Test
    void bindingsPassNcclsArgumentsAndReportItsErrors() throws Exception {
        String cc = Stream.of("cc", "gcc", "clang").filter(c -> onPath(c)).findFirst().orElse(null);
        assumeTrue(cc != null, "skipped: no C compiler here to build the stub libnccl.so.2");
        Path src = Files.writeString(tmp.resolve("stub.c"), STUB_SOURCE);
        Path lib = tmp.resolve("stub/libnccl.so.2");
        Files.createDirectories(lib.getParent());
        Process build = new ProcessBuilder(cc, "-shared", "-fPIC", "-O1", "-o", lib.toString(), src.toString())
                .redirectErrorStream(true).start();
        String buildOut = new String(build.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(build.waitFor(30, TimeUnit.SECONDS) && build.exitValue() == 0, "stub build failed: " + buildOut);

        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        ProcessBuilder pb = new ProcessBuilder(java, "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"),
                StubMain.class.getName()).redirectErrorStream(true);
        pb.environment().put("JCCL_NCCL_LIBRARY", lib.toString());
        Process child = pb.start();
        String out = new String(child.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(child.waitFor(50, TimeUnit.SECONDS), "child JVM did not finish: " + out);
        assertEquals(0, child.exitValue(), out);

        assertTrue(out.contains("available=true version=2.28.9 alltoall=true"), out);
        assertTrue(out.contains("id=128,0,127"), out);
        assertTrue(out.contains("comm=1230"), out);
        assertTrue(out.contains("all=103,105"), out);
        assertTrue(out.contains("async=0,6"), out);
        // The ncclUniqueId arrived by value, whole.
        assertTrue(out.contains("call: initRank nranks=2 rank=1 id0=0 id127=127"), out);
        assertTrue(out.contains("call: initAll dev=3\ncall: initAll dev=5"), out);
        assertTrue(out.contains("call: allReduce 0x1000 0x2000 5000000000 7 2 0x1230 0x5000"), out);
        assertTrue(out.contains("call: broadcast (nil) 0x2000 3 9 1 0x1230 0x5000"), out);
        assertTrue(out.contains("call: reduce 0x1000 (nil) 4 4 4 0 0x1230 0x5000"), out);
        assertTrue(out.contains("call: allGather 0x1000 0x2000 5 1 0x1230 0x5000"), out);
        assertTrue(out.contains("call: reduceScatter 0x1000 0x2000 6 6 3 0x1230 0x5000"), out);
        assertTrue(out.contains("call: alltoAll 0x1000 0x2000 7 2 0x1230 0x5000"), out);
        assertTrue(out.contains("call: groupStart\ncall: send 0x1000 8 8 1 0x1230 0x5000\ncall: recv 0x2000 9 5 0 0x1230 0x5000\ncall: groupEnd"), out);
        assertTrue(out.contains("call: abort 0x103\ncall: destroy 0x105"), out);
        // Errors name the call, its arguments, NCCL's code and text, and NCCL's last message.
        assertTrue(out.contains("error1=4:ncclCommInitRank(nranks=2, rank=7) failed: ncclInvalidArgument (invalid argument);"
                + " NCCL says: Invalid rank requested : 7/2"), out);
        assertTrue(out.contains("error2=5:ncclAllReduce(send=0x1000, recv=0x2000, count=666, ncclFloat32, ncclSum, comm=0x1230,"
                + " stream=0x5000) failed: ncclInvalidUsage (invalid usage); NCCL says: stub: count 666 refused"), out);
    }

    private static boolean onPath(String exe) {
        String path = System.getenv("PATH");
        return path != null && Stream.of(path.split(":")).anyMatch(d -> !d.isEmpty() && Files.isExecutable(Path.of(d, exe)));
    }
}
