package org.jccl.cuda.internal;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.PathMatcher;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.jccl.Config;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.cuda.CudaException;
import org.jccl.internal.config.Settings;

/**
 * The gate to NCCL ({@code libnccl.so.2}), through FFM: the only class that calls into that
 * library. The library is looked up the first time this class is used, never at start-up, so
 * CPU-only machines are unaffected; {@link #available()} says whether it loaded and {@link
 * #problem()} why not, naming every place that was tried.
 *
 * <p>Lookup order ({@link #locate}): the setting {@code JCCL_NCCL_LIBRARY} when set (a path that
 * does not load is an error, with no fallback); {@code libnccl.so.2} through the system loader
 * ({@code LD_LIBRARY_PATH}, ldconfig); the {@code nvidia-nccl-cu*} Python wheels' usual
 * directories; last, {@code python3 -c "import nvidia.nccl"} (10 s at most).
 *
 * <p>Every call checks its {@code ncclResult_t} and throws {@link CudaException} naming the call,
 * its arguments, NCCL's name and text for the code and the communicator's last error
 * ({@code ncclGetLastError}). Constants and signatures are those of NCCL's {@code nccl.h}
 * (checked against src/nccl.h.in of NCCL 2.28.9 and 2.30.7). Device pointers are {@code long},
 * communicators ({@code ncclComm_t}) and streams ({@code cudaStream_t} = CUstream) are {@link
 * MemorySegment} addresses. Argument checking is the callers' job ({@link DeviceArgs}): this
 * class passes values through.
 *
 * <p>Thread safety: as NCCL's. Groups ({@link #groupStart()}) are per thread; the CUDA device
 * of a communicator must be current on the calling thread.
 *
 * <p><b>Why one file of about 870 lines.</b> It is the whole FFM binding of one C library: the
 * lookup that decides which {@code libnccl.so.2} is bound, one {@code MethodHandle} per function of
 * {@code nccl.h} with its descriptor beside it, the translation of {@code ncclResult_t} into
 * messages, and one thin wrapper per call. Kept together, a reader checks each wrapper against its
 * descriptor and its C signature in one place, and "the only class that calls into libnccl" stays
 * true by construction. Split by call family (communicators, collectives, groups), each part would
 * need the handles, the checks and the error text of the others, and the boundary would be
 * nccl.h's sections rather than roles; what could leave is the library search ({@link #locate} and
 * its helpers, about 260 lines), which is kept here because it decides what the handles bind to.
 */
public final class Nccl {
    // ------------------------------------------------------------------ constants of nccl.h

    /** ncclResult_t. */
    public static final int SUCCESS = 0;
    public static final int UNHANDLED_CUDA_ERROR = 1;
    public static final int SYSTEM_ERROR = 2;
    public static final int INTERNAL_ERROR = 3;
    public static final int INVALID_ARGUMENT = 4;
    public static final int INVALID_USAGE = 5;
    public static final int REMOTE_ERROR = 6;
    public static final int IN_PROGRESS = 7;
    /** ncclTimeout: new in NCCL 2.29/2.30 (2.28 stops at ncclInProgress). */
    public static final int TIMEOUT = 8;
    private static final String[] RESULT_NAMES = {"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError",
        "ncclInternalError", "ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress", "ncclTimeout"};

    /** ncclDataType_t. */
    public static final int INT8 = 0;
    public static final int UINT8 = 1;
    public static final int INT32 = 2;
    public static final int UINT32 = 3;
    public static final int INT64 = 4;
    public static final int UINT64 = 5;
    public static final int FLOAT16 = 6;
    public static final int FLOAT32 = 7;
    public static final int FLOAT64 = 8;
    public static final int BFLOAT16 = 9;
    private static final String[] TYPE_NAMES = {"ncclInt8", "ncclUint8", "ncclInt32", "ncclUint32", "ncclInt64",
        "ncclUint64", "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16"};

    /** ncclRedOp_t (built-in operators). */
    public static final int SUM = 0;
    public static final int PROD = 1;
    public static final int MAX = 2;
    public static final int MIN = 3;
    public static final int AVG = 4;
    private static final String[] OP_NAMES = {"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"};

    /** NCCL_UNIQUE_ID_BYTES. */
    public static final int UNIQUE_ID_BYTES = 128;
    /** {@code typedef struct { char internal[128]; } ncclUniqueId;}, passed by value to ncclCommInitRank. */
    private static final StructLayout UNIQUE_ID = MemoryLayout.structLayout(MemoryLayout.sequenceLayout(UNIQUE_ID_BYTES, JAVA_BYTE));

    /** The library's file name, as the system loader and the wheels spell it. */
    public static final String LIBRARY_NAME = "libnccl.so.2";

    /** Where the {@code nvidia-nccl-cu*} wheels put the library, as globs ({@code ~} is the home directory). */
    public static final List<String> WHEEL_PATTERNS = List.of(
            "/opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
            "$VIRTUAL_ENV/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
            "/usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2",
            "/usr/local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
            "/usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2",
            "/usr/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
            "~/.local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2");

    /** Interpreters asked {@code import nvidia.nccl} as the last resort ({@code python3} alone: the first on PATH). */
    public static final List<String> PYTHONS = List.of("/opt/torch/.venv/bin/python3", "$VIRTUAL_ENV/bin/python3", "python3");

    private static final String PYTHON_SNIPPET = "import nvidia.nccl;print(list(nvidia.nccl.__path__)[0])";
    private static final long PYTHON_TIMEOUT_MS = 10_000;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final Located LIB = locate(System.getenv(), WHEEL_PATTERNS, PYTHONS);

    private Nccl() {
    }

    // ------------------------------------------------------------------ lookup

    /**
     * The outcome of the library lookup.
     *
     * @param lookup the loaded library, or null
     * @param path the file loaded (as the process maps it when the system loader found it), or null
     * @param tried one line per place looked at, with what was found there
     * @param problem why nothing usable was loaded, or null
     */
    public record Located(SymbolLookup lookup, String path, List<String> tried, String problem) {
        public Located {
            tried = List.copyOf(tried);
        }
    }

    /**
     * Looks for libnccl.so.2 as described in the class comment, without touching the state of
     * this class: {@code env} stands for the process environment ({@code JCCL_NCCL_LIBRARY},
     * {@code HOME}, {@code VIRTUAL_ENV}, {@code PATH}), {@code wheelPatterns} for {@link
     * #WHEEL_PATTERNS} and {@code pythons} for {@link #PYTHONS} (empty: do not run Python).
     */
    public static Located locate(Map<String, String> env, List<String> wheelPatterns, List<String> pythons) {
        return locate(env, LIBRARY_NAME, wheelPatterns, pythons);
    }

    /**
     * {@link #locate(Map, List, List)} asking the system loader for {@code loaderName} instead of
     * libnccl.so.2 (tests pass a name that is nowhere, to reach the later places).
     */
    public static Located locate(Map<String, String> env, String loaderName, List<String> wheelPatterns, List<String> pythons) {
        List<String> tried = new ArrayList<>();
        String configured = Settings.NCCL_LIBRARY.getString(Config.fromEnvironment(env));
        if (configured != null && !configured.isBlank()) {
            String name = configured.trim();
            try {
                SymbolLookup l = name.contains("/") ? loadFile(Path.of(name))
                        : SymbolLookup.libraryLookup(name, Arena.global());
                tried.add(Settings.NCCL_LIBRARY.name() + "=" + name + ": loaded");
                return new Located(l, name.contains("/") ? name : mappedPath(name), tried, null);
            } catch (IllegalArgumentException | SecurityException e) {
                String why = name.contains("/") && !Files.exists(Path.of(name)) ? "no such file" : loaderMessage(e);
                tried.add(Settings.NCCL_LIBRARY.name() + "=" + name + ": " + why);
                return new Located(null, null, tried, Settings.NCCL_LIBRARY.name() + "=" + name + " could not be loaded ("
                        + why + "); point it at libnccl.so.2 (e.g. <site-packages>/nvidia/nccl/lib/libnccl.so.2) or unset it");
            }
        }
        tried.add(Settings.NCCL_LIBRARY.name() + ": not set");
        try {
            SymbolLookup l = SymbolLookup.libraryLookup(loaderName, Arena.global());
            String path = mappedPath(loaderName);
            tried.add(loaderName + " through the system loader: loaded " + path);
            return new Located(l, path, tried, null);
        } catch (IllegalArgumentException | SecurityException e) {
            String ld = env.get("LD_LIBRARY_PATH");
            tried.add(loaderName + " through the system loader (LD_LIBRARY_PATH=" + (ld == null ? "unset" : ld)
                    + ", ldconfig): not found");
        }
        for (String pattern : wheelPatterns) {
            String expanded = expandVariables(pattern, env);
            if (expanded == null) {
                tried.add(pattern + ": " + (pattern.startsWith("~") ? "HOME" : "VIRTUAL_ENV") + " not set");
                continue;
            }
            List<Path> matches = glob(expanded);
            if (matches.isEmpty()) {
                tried.add(expanded + ": none");
                continue;
            }
            for (Path p : matches) {
                try {
                    SymbolLookup l = loadFile(p);
                    tried.add(p + ": loaded");
                    return new Located(l, p.toString(), tried, null);
                } catch (IllegalArgumentException | SecurityException e) {
                    tried.add(p + ": found but did not load (" + loaderMessage(e) + ")");
                }
            }
        }
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(PYTHON_TIMEOUT_MS);
        Set<String> seen = new LinkedHashSet<>();
        for (String py : pythons) {
            String exe = findExecutable(expandVariables(py, env), env);
            if (exe == null || !seen.add(exe)) {
                continue;
            }
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                tried.add(exe + " -c 'import nvidia.nccl': skipped, the 10 s for Python were spent");
                continue;
            }
            String dir = askPython(exe, left, tried);
            if (dir == null) {
                continue;
            }
            Path p = Path.of(dir, "lib", LIBRARY_NAME);
            try {
                SymbolLookup l = loadFile(p);
                tried.add(p + " (from " + exe + "): loaded");
                return new Located(l, p.toString(), tried, null);
            } catch (IllegalArgumentException | SecurityException e) {
                tried.add(p + " (from " + exe + "): " + (Files.exists(p) ? "did not load (" + loaderMessage(e) + ")" : "no such file"));
            }
        }
        if (pythons.isEmpty()) {
            tried.add("python3 -c 'import nvidia.nccl': not asked");
        } else if (seen.isEmpty()) {
            tried.add("python3 -c 'import nvidia.nccl': no python3 found (" + String.join(", ", pythons) + ")");
        }
        return new Located(null, null, tried, LIBRARY_NAME + " (NCCL) was not found; tried: " + String.join("; ", tried)
                + ". Install it (pip install nvidia-nccl-cu12 or -cu13, or the libnccl2 package) or set "
                + Settings.NCCL_LIBRARY.name() + " to its path");
    }

    /**
     * Loads a library file. A file that does not start with the ELF magic is refused before
     * dlopen sees it (HotSpot would warn about its stack guard for such a file).
     */
    private static SymbolLookup loadFile(Path p) {
        if (Files.isRegularFile(p)) {
            byte[] head = new byte[4];
            int got;
            try (InputStream in = Files.newInputStream(p)) {
                got = in.readNBytes(head, 0, 4);
            } catch (IOException e) {
                throw new IllegalArgumentException("cannot read it: " + e.getMessage(), e);
            }
            if (got < 4 || head[0] != 0x7f || head[1] != 'E' || head[2] != 'L' || head[3] != 'F') {
                throw new IllegalArgumentException("not an ELF shared library");
            }
        }
        return SymbolLookup.libraryLookup(p, Arena.global());
    }

    /** Replaces a leading {@code ~} (HOME) and {@code $VIRTUAL_ENV}; null when the variable is not set. */
    private static String expandVariables(String pattern, Map<String, String> env) {
        String s = pattern;
        if (s.startsWith("~/")) {
            String home = env.get("HOME");
            if (home == null || home.isBlank()) {
                return null;
            }
            s = home + s.substring(1);
        }
        if (s.contains("$VIRTUAL_ENV")) {
            String venv = env.get("VIRTUAL_ENV");
            if (venv == null || venv.isBlank()) {
                return null;
            }
            s = s.replace("$VIRTUAL_ENV", venv);
        }
        return s;
    }

    /** Existing files matching an absolute path whose components may hold {@code *}; newest Python first. */
    public static List<Path> glob(String pattern) {
        List<Path> current = List.of(Path.of("/"));
        for (String part : pattern.split("/")) {
            if (part.isEmpty()) {
                continue;
            }
            List<Path> next = new ArrayList<>();
            for (Path dir : current) {
                if (!part.contains("*") && !part.contains("?")) {
                    Path p = dir.resolve(part);
                    if (Files.exists(p)) {
                        next.add(p);
                    }
                    continue;
                }
                if (!Files.isDirectory(dir)) {
                    continue;
                }
                PathMatcher m = FileSystems.getDefault().getPathMatcher("glob:" + part);
                try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir)) {
                    List<Path> found = new ArrayList<>();
                    for (Path p : ds) {
                        if (m.matches(p.getFileName())) {
                            found.add(p);
                        }
                    }
                    found.sort(Comparator.comparing((Path p) -> p.getFileName().toString()).reversed());
                    next.addAll(found);
                } catch (IOException | SecurityException e) {
                    // unreadable directory: nothing there for us
                }
            }
            current = next;
            if (current.isEmpty()) {
                break;
            }
        }
        return current.stream().filter(Files::isRegularFile).toList();
    }

    private static String findExecutable(String name, Map<String, String> env) {
        if (name == null) {
            return null;
        }
        if (name.contains("/")) {
            return Files.isExecutable(Path.of(name)) ? name : null;
        }
        String path = env.get("PATH");
        if (path == null) {
            return null;
        }
        for (String dir : path.split(":")) {
            if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, name))) {
                return Path.of(dir, name).toString();
            }
        }
        return null;
    }

    /** The nvidia.nccl package directory as {@code exe} reports it, or null (with a line in {@code tried}). */
    private static String askPython(String exe, long timeoutNanos, List<String> tried) {
        String what = exe + " -c 'import nvidia.nccl'";
        Process p;
        try {
            p = new ProcessBuilder(exe, "-c", PYTHON_SNIPPET).redirectErrorStream(false)
                    .redirectError(ProcessBuilder.Redirect.DISCARD).redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
                    .start();
        } catch (IOException | SecurityException e) {
            tried.add(what + ": could not run (" + e.getMessage() + ")");
            return null;
        }
        try (InputStream out = p.getInputStream()) {
            if (!p.waitFor(timeoutNanos, TimeUnit.NANOSECONDS)) {
                p.destroyForcibly();
                tried.add(what + ": no answer in time");
                return null;
            }
            String text = new String(out.readNBytes(64 * 1024), StandardCharsets.UTF_8).trim();
            if (p.exitValue() != 0 || text.isEmpty()) {
                tried.add(what + ": not installed (exit " + p.exitValue() + ")");
                return null;
            }
            String[] lines = text.split("\n");
            return lines[lines.length - 1].trim();
        } catch (IOException e) {
            tried.add(what + ": " + e.getMessage());
            return null;
        } catch (InterruptedException e) {
            p.destroyForcibly();
            Thread.currentThread().interrupt();
            tried.add(what + ": interrupted");
            return null;
        }
    }

    /** The file the process mapped for a library loaded by name (from /proc/self/maps), else the name. */
    private static String mappedPath(String name) {
        String stem = name.contains(".so") ? name.substring(0, name.indexOf(".so") + 3) : name;
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
                int slash = line.indexOf('/');
                if (slash >= 0 && line.substring(slash).contains("/" + stem)) {
                    return line.substring(slash).trim();
                }
            }
        } catch (IOException | SecurityException | java.io.UncheckedIOException e) {
            // not Linux, or not readable: fall through
        }
        return name + " (system loader)";
    }

    private static String loaderMessage(RuntimeException e) {
        return e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
    }

    // ------------------------------------------------------------------ bindings

    private static MethodHandle fn(String name, FunctionDescriptor fd) {
        if (LIB.lookup() == null) {
            return null;
        }
        Optional<MemorySegment> sym = LIB.lookup().find(name);
        return sym.map(s -> LINKER.downcallHandle(s, fd)).orElse(null);
    }

    private static FunctionDescriptor rc(MemoryLayout... args) {
        return FunctionDescriptor.of(JAVA_INT, args);
    }

    private static final MethodHandle ncclGetVersion = fn("ncclGetVersion", rc(ADDRESS));
    private static final MethodHandle ncclGetUniqueId = fn("ncclGetUniqueId", rc(ADDRESS));
    private static final MethodHandle ncclCommInitRank = fn("ncclCommInitRank", rc(ADDRESS, JAVA_INT, UNIQUE_ID, JAVA_INT));
    private static final MethodHandle ncclCommInitAll = fn("ncclCommInitAll", rc(ADDRESS, JAVA_INT, ADDRESS));
    private static final MethodHandle ncclCommDestroy = fn("ncclCommDestroy", rc(ADDRESS));
    private static final MethodHandle ncclCommAbort = fn("ncclCommAbort", rc(ADDRESS));
    private static final MethodHandle ncclCommGetAsyncError = fn("ncclCommGetAsyncError", rc(ADDRESS, ADDRESS));
    private static final MethodHandle ncclGetErrorString = fn("ncclGetErrorString", FunctionDescriptor.of(ADDRESS, JAVA_INT));
    private static final MethodHandle ncclGetLastError = fn("ncclGetLastError", FunctionDescriptor.of(ADDRESS, ADDRESS));
    private static final MethodHandle ncclAllReduce = fn("ncclAllReduce",
            rc(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS));
    private static final MethodHandle ncclBroadcast = fn("ncclBroadcast",
            rc(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS));
    private static final MethodHandle ncclReduce = fn("ncclReduce",
            rc(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS));
    private static final MethodHandle ncclAllGather = fn("ncclAllGather",
            rc(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, ADDRESS, ADDRESS));
    private static final MethodHandle ncclReduceScatter = fn("ncclReduceScatter",
            rc(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS));
    /** Optional: NCCL 2.28 and later. */
    private static final MethodHandle ncclAlltoAll = fn("ncclAlltoAll",
            rc(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, ADDRESS, ADDRESS));
    private static final MethodHandle ncclSend = fn("ncclSend", rc(JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS));
    private static final MethodHandle ncclRecv = fn("ncclRecv", rc(JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS));
    private static final MethodHandle ncclGroupStart = fn("ncclGroupStart", rc());
    private static final MethodHandle ncclGroupEnd = fn("ncclGroupEnd", rc());

    /** Version code from ncclGetVersion (e.g. 22809), or -1. */
    private static final int VERSION_CODE;
    /** Why NCCL cannot be used, or null. */
    private static final String PROBLEM;

    static {
        String problem = LIB.problem();
        int version = -1;
        if (problem == null) {
            List<String> missing = new ArrayList<>();
            String[] names = {"ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRank", "ncclCommInitAll", "ncclCommDestroy",
                "ncclCommAbort", "ncclCommGetAsyncError", "ncclGetErrorString", "ncclGetLastError", "ncclAllReduce",
                "ncclBroadcast", "ncclReduce", "ncclAllGather", "ncclReduceScatter", "ncclSend", "ncclRecv",
                "ncclGroupStart", "ncclGroupEnd"};
            MethodHandle[] handles = {ncclGetVersion, ncclGetUniqueId, ncclCommInitRank, ncclCommInitAll, ncclCommDestroy,
                ncclCommAbort, ncclCommGetAsyncError, ncclGetErrorString, ncclGetLastError, ncclAllReduce,
                ncclBroadcast, ncclReduce, ncclAllGather, ncclReduceScatter, ncclSend, ncclRecv,
                ncclGroupStart, ncclGroupEnd};
            for (int i = 0; i < names.length; i++) {
                if (handles[i] == null) {
                    missing.add(names[i]);
                }
            }
            if (!missing.isEmpty()) {
                problem = LIB.path() + " lacks " + String.join(", ", missing) + ": it is not NCCL, or an NCCL older than 2.13;"
                        + " set " + Settings.NCCL_LIBRARY.name() + " to a newer libnccl.so.2";
            } else {
                try (Arena a = Arena.ofConfined()) {
                    MemorySegment v = a.allocate(JAVA_INT);
                    int r = (int) ncclGetVersion.invokeExact(v);
                    if (r != SUCCESS) {
                        problem = "ncclGetVersion() of " + LIB.path() + " failed: " + resultName(r);
                    } else {
                        version = v.get(JAVA_INT, 0);
                    }
                } catch (Throwable t) {
                    problem = "ncclGetVersion() of " + LIB.path() + " could not be called: " + t;
                }
            }
        }
        PROBLEM = problem;
        VERSION_CODE = version;
    }

    /** Whether libnccl.so.2 loaded, has every function used here, and answered ncclGetVersion. */
    public static boolean available() {
        return PROBLEM == null;
    }

    /** Why NCCL cannot be used (naming the places tried), or null. */
    public static String problem() {
        return PROBLEM;
    }

    /** The places looked at, in order, with what was found. */
    public static List<String> tried() {
        return LIB.tried();
    }

    /** The library file loaded, or null. */
    public static String path() {
        return LIB.path();
    }

    /** NCCL_VERSION_CODE of the loaded library (e.g. 22809), or -1. */
    public static int versionCode() {
        return VERSION_CODE;
    }

    /** The loaded library's version as "major.minor.patch", e.g. "2.28.9", or null. */
    public static String version() {
        return VERSION_CODE < 0 ? null : versionString(VERSION_CODE);
    }

    /** Decodes an NCCL_VERSION_CODE: X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z after (NCCL_VERSION in nccl.h). */
    public static String versionString(int code) {
        if (code >= 10000) {
            return code / 10000 + "." + code % 10000 / 100 + "." + code % 100;
        }
        return code / 1000 + "." + code % 1000 / 100 + "." + code % 100;
    }

    /** Whether the library has ncclAlltoAll (NCCL 2.28 and later). */
    public static boolean hasAlltoAll() {
        return PROBLEM == null && ncclAlltoAll != null;
    }

    private static void require() {
        if (PROBLEM != null) {
            throw new CudaException("NCCL is not available: " + PROBLEM);
        }
    }

    // ------------------------------------------------------------------ mapping

    /** ncclDataType_t of a jccl type. */
    public static int dataType(DataType t) {
        return switch (t) {
            case INT8 -> INT8;
            case UINT8 -> UINT8;
            case INT32 -> INT32;
            case UINT32 -> UINT32;
            case INT64 -> INT64;
            case UINT64 -> UINT64;
            case FLOAT16 -> FLOAT16;
            case FLOAT32 -> FLOAT32;
            case FLOAT64 -> FLOAT64;
            case BFLOAT16 -> BFLOAT16;
        };
    }

    /** ncclRedOp_t of a jccl operator. */
    public static int redOp(ReduceOp op) {
        return switch (op) {
            case SUM -> SUM;
            case PROD -> PROD;
            case MAX -> MAX;
            case MIN -> MIN;
            case AVG -> AVG;
        };
    }

    /** "ncclFloat32" for 7, as nccl.h spells it. */
    public static String typeName(int type) {
        return type >= 0 && type < TYPE_NAMES.length ? TYPE_NAMES[type] : "ncclDataType_t " + type;
    }

    /** "ncclSum" for 0, as nccl.h spells it. */
    public static String opName(int op) {
        return op >= 0 && op < OP_NAMES.length ? OP_NAMES[op] : "ncclRedOp_t " + op;
    }

    /** "ncclInvalidUsage" for 5, as nccl.h spells it. */
    public static String resultName(int r) {
        return r >= 0 && r < RESULT_NAMES.length ? RESULT_NAMES[r] : "ncclResult_t " + r;
    }

    // ------------------------------------------------------------------ errors

    /** NCCL's text for a result code (ncclGetErrorString). */
    public static String errorString(int r) {
        if (ncclGetErrorString == null) {
            return "";
        }
        try {
            MemorySegment s = (MemorySegment) ncclGetErrorString.invokeExact(r);
            return s.equals(MemorySegment.NULL) ? "" : s.reinterpret(Integer.MAX_VALUE).getString(0);
        } catch (Throwable t) {
            return "";
        }
    }

    /** NCCL's last error message for {@code comm} (or the thread's last when comm is NULL), or "". */
    public static String lastError(MemorySegment comm) {
        if (ncclGetLastError == null) {
            return "";
        }
        try {
            // A local, not a conditional in the call: as an argument of invokeExact a conditional is typed Object.
            MemorySegment c = comm == null ? MemorySegment.NULL : comm;
            MemorySegment s = (MemorySegment) ncclGetLastError.invokeExact(c);
            return s.equals(MemorySegment.NULL) ? "" : s.reinterpret(Integer.MAX_VALUE).getString(0).trim();
        } catch (Throwable t) {
            return "";
        }
    }

    /** The exception for a failed call: the call with its arguments, NCCL's name and text, its last error and a hint. */
    static CudaException failure(int r, MemorySegment comm, String call) {
        String last = lastError(comm);
        String text = errorString(r);
        return new CudaException(call + " failed: " + resultName(r) + (text.isEmpty() ? "" : " (" + text + ")")
                + (last.isEmpty() ? "" : "; NCCL says: " + last) + hint(r), r);
    }

    private static String hint(int r) {
        return switch (r) {
            case UNHANDLED_CUDA_ERROR -> "; a CUDA call inside NCCL failed: rerun with NCCL_DEBUG=WARN for the CUDA error";
            case SYSTEM_ERROR -> "; a system call failed (sockets, /dev/shm, memory): rerun with NCCL_DEBUG=WARN";
            case REMOTE_ERROR -> "; a peer failed or the network between the ranks broke";
            case INVALID_USAGE -> "; check that every rank issues the same calls in the same order, and groups are balanced";
            default -> "";
        };
    }

    private static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException re) {
            return re;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return new CudaException("native call into NCCL failed: " + t);
    }

    private static String hex(long p) {
        return "0x" + Long.toHexString(p);
    }

    private static String describe(MemorySegment comm, MemorySegment stream) {
        return "comm=" + hex(comm.address()) + ", stream=" + hex(stream.address());
    }

    // ------------------------------------------------------------------ communicators

    /** ncclGetUniqueId: the 128 bytes every rank passes to {@link #commInitRank}. */
    public static byte[] getUniqueId() {
        require();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment id = a.allocate(UNIQUE_ID);
            int r = (int) ncclGetUniqueId.invokeExact(id);
            if (r != SUCCESS) {
                throw failure(r, MemorySegment.NULL, "ncclGetUniqueId()");
            }
            return id.toArray(JAVA_BYTE);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** ncclCommInitRank on the calling thread's current device; blocks until all {@code nranks} ranks joined. */
    public static MemorySegment commInitRank(int nranks, byte[] uniqueId, int rank) {
        require();
        if (uniqueId.length != UNIQUE_ID_BYTES) {
            throw new IllegalArgumentException("an ncclUniqueId has " + UNIQUE_ID_BYTES + " bytes, got " + uniqueId.length);
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS);
            MemorySegment id = a.allocate(UNIQUE_ID);
            MemorySegment.copy(uniqueId, 0, id, JAVA_BYTE, 0, UNIQUE_ID_BYTES);
            int r = (int) ncclCommInitRank.invokeExact(out, nranks, id, rank);
            if (r != SUCCESS) {
                throw failure(r, MemorySegment.NULL, "ncclCommInitRank(nranks=" + nranks + ", rank=" + rank + ")");
            }
            return out.get(ADDRESS, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** ncclCommInitAll: one communicator per device ordinal, rank i on {@code devices[i]}. */
    public static MemorySegment[] commInitAll(int[] devices) {
        require();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ADDRESS, devices.length);
            MemorySegment list = a.allocateFrom(JAVA_INT, devices);
            int r = (int) ncclCommInitAll.invokeExact(out, devices.length, list);
            if (r != SUCCESS) {
                throw failure(r, MemorySegment.NULL, "ncclCommInitAll(ndev=" + devices.length + ", devlist="
                        + java.util.Arrays.toString(devices) + ")");
            }
            MemorySegment[] comms = new MemorySegment[devices.length];
            for (int i = 0; i < comms.length; i++) {
                comms[i] = out.getAtIndex(ADDRESS, i);
            }
            return comms;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** ncclCommDestroy: waits for the communicator's enqueued work, then frees it. */
    public static void commDestroy(MemorySegment comm) {
        require();
        try {
            int r = (int) ncclCommDestroy.invokeExact(comm);
            if (r != SUCCESS) {
                throw failure(r, MemorySegment.NULL, "ncclCommDestroy(comm=" + hex(comm.address()) + ")");
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** ncclCommAbort: stops the communicator's work on the device and frees it. */
    public static void commAbort(MemorySegment comm) {
        require();
        try {
            int r = (int) ncclCommAbort.invokeExact(comm);
            if (r != SUCCESS) {
                throw failure(r, MemorySegment.NULL, "ncclCommAbort(comm=" + hex(comm.address()) + ")");
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** ncclCommGetAsyncError: ncclSuccess, ncclInProgress, or the error the communicator hit in the background. */
    public static int commGetAsyncError(MemorySegment comm) {
        require();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(JAVA_INT);
            int r = (int) ncclCommGetAsyncError.invokeExact(comm, v);
            if (r != SUCCESS) {
                throw failure(r, comm, "ncclCommGetAsyncError(comm=" + hex(comm.address()) + ")");
            }
            return v.get(JAVA_INT, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    // ------------------------------------------------------------------ collectives and point-to-point

    public static void allReduce(long send, long recv, long count, int type, int op, MemorySegment comm, MemorySegment stream) {
        try {
            int r = (int) ncclAllReduce.invokeExact(send, recv, count, type, op, comm, stream);
            if (r != SUCCESS) {
                throw failure(r, comm, "ncclAllReduce(send=" + hex(send) + ", recv=" + hex(recv) + ", count=" + count + ", "
                        + typeName(type) + ", " + opName(op) + ", " + describe(comm, stream) + ")");
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void broadcast(long send, long recv, long count, int type, int root, MemorySegment comm, MemorySegment stream) {
        try {
            int r = (int) ncclBroadcast.invokeExact(send, recv, count, type, root, comm, stream);
            if (r != SUCCESS) {
                throw failure(r, comm, "ncclBroadcast(send=" + hex(send) + ", recv=" + hex(recv) + ", count=" + count + ", "
                        + typeName(type) + ", root=" + root + ", " + describe(comm, stream) + ")");
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void reduce(long send, long recv, long count, int type, int op, int root, MemorySegment comm, MemorySegment stream) {
        try {
            int r = (int) ncclReduce.invokeExact(send, recv, count, type, op, root, comm, stream);
            if (r != SUCCESS) {
                throw failure(r, comm, "ncclReduce(send=" + hex(send) + ", recv=" + hex(recv) + ", count=" + count + ", "
                        + typeName(type) + ", " + opName(op) + ", root=" + root + ", " + describe(comm, stream) + ")");
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code sendCount} elements from every rank; recv holds nranks x sendCount. */
    public static void allGather(long send, long recv, long sendCount, int type, MemorySegment comm, MemorySegment stream) {
        try {
            int r = (int) ncclAllGather.invokeExact(send, recv, sendCount, type, comm, stream);
            if (r != SUCCESS) {
                throw failure(r, comm, "ncclAllGather(send=" + hex(send) + ", recv=" + hex(recv) + ", sendcount=" + sendCount + ", "
                        + typeName(type) + ", " + describe(comm, stream) + ")");
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code recvCount} elements to every rank; send holds nranks x recvCount. */
    public static void reduceScatter(long send, long recv, long recvCount, int type, int op, MemorySegment comm, MemorySegment stream) {
        try {
            int r = (int) ncclReduceScatter.invokeExact(send, recv, recvCount, type, op, comm, stream);
            if (r != SUCCESS) {
                throw failure(r, comm, "ncclReduceScatter(send=" + hex(send) + ", recv=" + hex(recv) + ", recvcount=" + recvCount
                        + ", " + typeName(type) + ", " + opName(op) + ", " + describe(comm, stream) + ")");
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** ncclAlltoAll (NCCL 2.28+, see {@link #hasAlltoAll()}): {@code count} elements to and from every rank. */
    public static void alltoAll(long send, long recv, long count, int type, MemorySegment comm, MemorySegment stream) {
        if (ncclAlltoAll == null) {
            throw new CudaException("ncclAlltoAll is not in " + LIB.path() + " (NCCL " + version() + "; it came with 2.28)");
        }
        try {
            int r = (int) ncclAlltoAll.invokeExact(send, recv, count, type, comm, stream);
            if (r != SUCCESS) {
                throw failure(r, comm, "ncclAlltoAll(send=" + hex(send) + ", recv=" + hex(recv) + ", count=" + count + ", "
                        + typeName(type) + ", " + describe(comm, stream) + ")");
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void send(long buf, long count, int type, int peer, MemorySegment comm, MemorySegment stream) {
        try {
            int r = (int) ncclSend.invokeExact(buf, count, type, peer, comm, stream);
            if (r != SUCCESS) {
                throw failure(r, comm, "ncclSend(buf=" + hex(buf) + ", count=" + count + ", " + typeName(type) + ", peer=" + peer
                        + ", " + describe(comm, stream) + ")");
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void recv(long buf, long count, int type, int peer, MemorySegment comm, MemorySegment stream) {
        try {
            int r = (int) ncclRecv.invokeExact(buf, count, type, peer, comm, stream);
            if (r != SUCCESS) {
                throw failure(r, comm, "ncclRecv(buf=" + hex(buf) + ", count=" + count + ", " + typeName(type) + ", peer=" + peer
                        + ", " + describe(comm, stream) + ")");
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void groupStart() {
        require();
        try {
            int r = (int) ncclGroupStart.invokeExact();
            if (r != SUCCESS) {
                throw failure(r, MemorySegment.NULL, "ncclGroupStart()");
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void groupEnd() {
        require();
        try {
            int r = (int) ncclGroupEnd.invokeExact();
            if (r != SUCCESS) {
                throw failure(r, MemorySegment.NULL, "ncclGroupEnd()");
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }
}
