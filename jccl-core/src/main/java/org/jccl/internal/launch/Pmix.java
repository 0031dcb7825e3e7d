package org.jccl.internal.launch;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jccl.internal.util.NativeAccess;

/**
 * The one gate to a PMIx client library ({@code libpmix.so.2}), loaded through FFM: the process
 * management interface that Open MPI's {@code mpirun} (4.x through its PMIx component, 5.x through
 * PRRTE), Slurm's {@code srun --mpi=pmix} and other launchers serve to the processes they start.
 * jccl uses it for one thing: rank 0 publishes where its bootstrap root listens (and the job's
 * secret), every rank joins a fence that collects what was published, and the others read it.
 *
 * <p>Optional, like {@code Nvml}: {@link #unavailable(Map)} says in one sentence why PMIx cannot be
 * used here (no PMIx server named by the environment, library missing, unknown version), and nothing
 * calls into the library then. <b>A process that no PMIx server started never calls
 * {@code PMIx_Init}</b>: the environment must name the server ({@code PMIX_NAMESPACE} and one of the
 * {@code PMIX_SERVER_URI*} variables) first, since an init without a server may wait for one.
 *
 * <p><b>Layout.</b> The structs are laid out per {@code include/pmix_common.h.in} of OpenPMIx 3.x,
 * 4.x, 5.x and 6.x, which agree on the parts used here (x86-64 and aarch64 LP64):
 * <pre>
 *   pmix_proc_t  { char nspace[256]; uint32_t rank; }                               260 bytes, align 4
 *   pmix_value_t { uint16_t type; union { ...; char *string; pmix_byte_object_t bo;
 *                  pmix_envar_t envar (char*, char*, char: the largest member) } data; }  32 bytes, data at 8
 *   pmix_info_t  { char key[512]; uint32_t flags; pmix_value_t value; }             552 bytes, value at 520
 * </pre>
 * The major version comes from {@code PMIx_Get_version()} ({@code "3.2.5"} in 3.x, {@code "OpenPMIx 4.2.2, ..."}
 * from 4.x on); any other major version is refused before any struct is passed. Where the library
 * has {@code PMIx_Info_load} (4.x on) the layout is also checked at load: an info struct filled by
 * the library must have its key, type and data where this class reads them and nothing written
 * past its end. After {@code PMIx_Init} the process name the library returns must match
 * {@code PMIX_NAMESPACE}/{@code PMIX_RANK}.
 *
 * <p><b>Lifetime.</b> One client per process ({@link #client}), initialised on first use and
 * finalised by a shutdown hook, so a process that initialised PMIx always finalises it (Open MPI's
 * mpirun reports a process that exits without doing so as a failed job) and several
 * communicators in one process share it. Blocking calls ({@code PMIx_Fence}) are made on a helper
 * thread with a deadline: when it passes, the caller gets a {@link PmixException} naming the call
 * and the deadline (the stuck call is abandoned, and finalisation is skipped).
 *
 * <p><b>Why one file of about 610 lines.</b> It is the whole FFM binding of one C library for one
 * use: the struct layouts above, the function handles, the version gate and layout self-check, the
 * client's lifetime (init, finalise at exit) and the put/commit/fence/get calls with their deadline
 * thread. These parts share the layouts and the one client's state; splitting them would spread
 * the offsets that must agree with {@code pmix_common.h} over several files, and "the one gate to
 * libpmix" would no longer hold by construction. What PMIx is used for (publishing the root's
 * address) is already apart, in {@link PmixExchange}.
 */
public final class Pmix {

    /** The library's name on Linux (soname of OpenPMIx 2.x on; 3.x to 6.x are supported). */
    public static final String LIBRARY = "libpmix.so.2";
    /** The oldest and newest major versions whose headers this class follows. */
    static final int MIN_MAJOR = 3;
    static final int MAX_MAJOR = 6;

    static final int NSPACE_BYTES = 256;
    static final int PROC_SIZE = 260;
    static final int PROC_RANK_OFFSET = 256;
    static final int VALUE_SIZE = 32;
    static final int VALUE_DATA_OFFSET = 8;
    static final int KEY_BYTES = 512;
    static final int INFO_FLAGS_OFFSET = 512;
    static final int INFO_VALUE_OFFSET = 520;
    static final int INFO_SIZE = 552;

    // pmix_data_type_t values (identical in 3.x to 6.x)
    static final short PMIX_BOOL = 1;
    static final short PMIX_STRING = 3;
    static final short PMIX_INT = 6;
    static final short PMIX_UINT16 = 13;
    static final short PMIX_UINT32 = 14;
    static final short PMIX_BYTE_OBJECT = 27;
    static final short PMIX_PROC_RANK = 40;
    /** pmix_scope_t PMIX_GLOBAL: share with every process of the job, local and remote. */
    static final byte PMIX_GLOBAL = 3;
    static final int PMIX_RANK_WILDCARD = 0xFFFFFFFE;
    static final int PMIX_SUCCESS = 0;
    static final int PMIX_ERR_NOT_FOUND = -46;

    /** Attribute keys (strings in the headers). */
    static final String KEY_COLLECT_DATA = "pmix.collect";
    static final String KEY_TIMEOUT = "pmix.timeout";
    /** Look only in the client's local store (filled by the fence): a key nobody put is PMIX_ERR_NOT_FOUND at once. */
    static final String KEY_OPTIONAL = "pmix.optional";
    public static final String KEY_JOB_SIZE = "pmix.job.size";
    public static final String KEY_LOCAL_RANK = "pmix.lrank";
    public static final String KEY_LOCAL_SIZE = "pmix.local.size";

    private static final Pattern VERSION = Pattern.compile("(\\d+)\\.(\\d+)(?:\\.(\\d+))?");
    private static final AtomicReference<Pmix> CLIENT = new AtomicReference<>();

    private final Functions fn;
    private final String namespace;
    private final int rank;
    private final String version;
    private volatile boolean stuck;
    private boolean finalized;

    private Pmix(Functions fn, String namespace, int rank, String version) {
        this.fn = fn;
        this.namespace = namespace;
        this.rank = rank;
        this.version = version;
    }

    /**
     * Why PMIx cannot be used by a process with environment {@code env}, or empty when it can be
     * tried: a PMIx server is named ({@code PMIX_NAMESPACE} and a {@code PMIX_SERVER_URI*}
     * variable) and the library loads with a supported version. Calls nothing that blocks.
     */
    public static Optional<String> unavailable(Map<String, String> env) {
        String server = serverMissing(env);
        if (server != null) {
            return Optional.of(server);
        }
        Object f = Functions.load();
        return f instanceof String why ? Optional.of(why) : Optional.empty();
    }

    /** Why {@code env} names no PMIx server, or null when it names one. */
    static String serverMissing(Map<String, String> env) {
        String ns = env.get("PMIX_NAMESPACE");
        boolean uri = env.keySet().stream().anyMatch(k -> k.startsWith("PMIX_SERVER_URI") && !env.get(k).isBlank());
        if ((ns == null || ns.isBlank()) && !uri) {
            return "no PMIx server started this process (PMIX_NAMESPACE and PMIX_SERVER_URI* are not set; mpirun and"
                    + " srun --mpi=pmix set them)";
        }
        if (ns == null || ns.isBlank()) {
            return "PMIX_NAMESPACE is not set although a PMIx server URI is: the launcher's PMIx environment is incomplete";
        }
        if (!uri) {
            return "PMIX_NAMESPACE is set but no PMIX_SERVER_URI* variable is: no PMIx server to connect to (was the variable"
                    + " inherited from an outer job?)";
        }
        return null;
    }

    /**
     * This process's PMIx client, initialised on first use ({@code PMIx_Init}) and finalised at exit.
     *
     * @throws PmixException when PMIx is {@link #unavailable unavailable} or {@code PMIx_Init} fails;
     *         the message says why
     */
    public static Pmix client(Map<String, String> env) {
        Pmix p = CLIENT.get();
        if (p != null) {
            return p;
        }
        synchronized (CLIENT) {
            p = CLIENT.get();
            if (p == null) {
                p = init(env);
                CLIENT.set(p);
                Pmix hooked = p;
                Runtime.getRuntime().addShutdownHook(new Thread(hooked::finalizeAtExit, "jccl-pmix-finalize"));
            }
            return p;
        }
    }

    private static Pmix init(Map<String, String> env) {
        String server = serverMissing(env);
        if (server != null) {
            throw new PmixException(server, 0);
        }
        Object loaded = Functions.load();
        if (loaded instanceof String why) {
            throw new PmixException(why, 0);
        }
        Functions f = (Functions) loaded;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment proc = a.allocate(PROC_SIZE, 8);
            int rc = (int) f.init.invokeExact(proc, MemorySegment.NULL, 0L);
            if (rc != PMIX_SUCCESS) {
                throw new PmixException("PMIx_Init failed: " + f.error(rc) + " (server " + serverUri(env) + ")", rc);
            }
            String ns = cString(proc, 0, NSPACE_BYTES);
            int r = proc.get(JAVA_INT, PROC_RANK_OFFSET);
            String envNs = env.get("PMIX_NAMESPACE");
            String envRank = env.get("PMIX_RANK");
            if (!ns.equals(envNs) || (envRank != null && !envRank.trim().equals(Integer.toUnsignedString(r)))) {
                throw new PmixException("PMIx_Init returned process " + ns + ":" + Integer.toUnsignedString(r) + " but the environment says "
                        + envNs + ":" + envRank + "; " + LIBRARY + " (" + f.version + ") does not have the pmix_proc_t layout jccl expects", 0);
            }
            return new Pmix(f, ns, r, f.version);
        } catch (PmixException e) {
            throw e;
        } catch (Throwable t) {
            throw new PmixException("PMIx_Init failed: " + t, 0);
        }
    }

    private static String serverUri(Map<String, String> env) {
        return new TreeSet<>(env.keySet()).stream().filter(k -> k.startsWith("PMIX_SERVER_URI")).map(k -> k + "=" + env.get(k))
                .findFirst().orElse("unknown");
    }

    /** The job's namespace. */
    public String namespace() {
        return namespace;
    }

    /** This process's rank in its namespace. */
    public int rank() {
        return rank;
    }

    /** The library's version string ({@code PMIx_Get_version}). */
    public String version() {
        return version;
    }

    /** Publishes {@code value} under {@code key} to every process of the job (PMIX_GLOBAL); visible after {@link #commit} and a fence. */
    public void putString(String key, String value) {
        checkKey(key);
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(VALUE_SIZE, 8);
            v.set(JAVA_SHORT, 0, PMIX_STRING);
            v.set(ADDRESS, VALUE_DATA_OFFSET, a.allocateFrom(value));
            int rc = (int) fn.put.invokeExact(PMIX_GLOBAL, a.allocateFrom(key), v);
            check(rc, "PMIx_Put(" + key + ")");
        } catch (PmixException e) {
            throw e;
        } catch (Throwable t) {
            throw new PmixException("PMIx_Put(" + key + ") failed: " + t, 0);
        }
    }

    /** Pushes what was put to the local PMIx server. */
    public void commit() {
        try {
            check((int) fn.commit.invokeExact(), "PMIx_Commit");
        } catch (PmixException e) {
            throw e;
        } catch (Throwable t) {
            throw new PmixException("PMIx_Commit failed: " + t, 0);
        }
    }

    /**
     * A fence over every process of the job with data collection: returns when every process has
     * called it, with what each committed readable by {@link #getString}. Fails after
     * {@code timeout} (passed to the server as {@code PMIX_TIMEOUT}, and enforced here).
     */
    public void fence(Duration timeout) {
        int seconds = (int) Math.max(1, Math.min(Integer.MAX_VALUE, timeout.toSeconds()));
        Integer rc = blocking("PMIx_Fence", timeout.plusSeconds(2), () -> {
            try (Arena a = Arena.ofConfined()) {
                MemorySegment proc = proc(a, PMIX_RANK_WILDCARD);
                MemorySegment info = a.allocate((long) INFO_SIZE * 2, 8);
                setKey(info, 0, KEY_COLLECT_DATA);
                info.set(JAVA_SHORT, INFO_VALUE_OFFSET, PMIX_BOOL);
                info.set(JAVA_BYTE, INFO_VALUE_OFFSET + VALUE_DATA_OFFSET, (byte) 1);
                setKey(info, INFO_SIZE, KEY_TIMEOUT);
                info.set(JAVA_SHORT, INFO_SIZE + INFO_VALUE_OFFSET, PMIX_INT);
                info.set(JAVA_INT, INFO_SIZE + INFO_VALUE_OFFSET + VALUE_DATA_OFFSET, seconds);
                return (int) fn.fence.invokeExact(proc, 1L, info, 2L);
            }
        });
        check(rc, "PMIx_Fence (every process of namespace " + namespace + ", " + seconds + " s)");
    }

    /**
     * The string that rank {@code fromRank} of this job put under {@code key}, or empty when it put
     * none ({@code PMIX_ERR_NOT_FOUND}). Looks only at what this client already holds
     * ({@code PMIX_OPTIONAL}): the job's own data, and what a {@link #fence} collected.
     */
    public Optional<String> getString(int fromRank, String key, Duration timeout) {
        Object v = get(fromRank, key, timeout);
        if (v == null) {
            return Optional.empty();
        }
        if (v instanceof String s) {
            return Optional.of(s);
        }
        throw new PmixException("PMIx_Get(" + key + ") of rank " + fromRank + " returned a " + v.getClass().getSimpleName()
                + ", not a string", 0);
    }

    /** A number the server knows about the job ({@code fromRank = -1}: the job; e.g. {@link #KEY_JOB_SIZE}), or empty. */
    public OptionalLong getNumber(int fromRank, String key, Duration timeout) {
        Object v = get(fromRank, key, timeout);
        if (v == null) {
            return OptionalLong.empty();
        }
        if (v instanceof Long n) {
            return OptionalLong.of(n);
        }
        throw new PmixException("PMIx_Get(" + key + ") returned a " + v.getClass().getSimpleName() + ", not a number", 0);
    }

    /** The value of {@code key} of {@code fromRank} (-1 = wildcard) as String, byte[] or Long; null when not found. */
    private Object get(int fromRank, String key, Duration timeout) {
        checkKey(key);
        int r = fromRank < 0 ? PMIX_RANK_WILDCARD : fromRank;
        Object[] out = new Object[1];
        Integer rc = blocking("PMIx_Get(" + key + ")", timeout, () -> {
            try (Arena a = Arena.ofConfined()) {
                MemorySegment ptr = a.allocate(ADDRESS);
                MemorySegment info = a.allocate(INFO_SIZE, 8);
                setKey(info, 0, KEY_OPTIONAL);
                info.set(JAVA_SHORT, INFO_VALUE_OFFSET, PMIX_BOOL);
                info.set(JAVA_BYTE, INFO_VALUE_OFFSET + VALUE_DATA_OFFSET, (byte) 1);
                int s = (int) fn.get.invokeExact(proc(a, r), a.allocateFrom(key), info, 1L, ptr);
                if (s == PMIX_SUCCESS) {
                    out[0] = unloadAndFree(ptr.get(ADDRESS, 0));
                }
                return s;
            }
        });
        if (rc == PMIX_ERR_NOT_FOUND) {
            return null;
        }
        check(rc, "PMIx_Get(" + key + ") of rank " + (fromRank < 0 ? "*" : Integer.toString(fromRank)));
        return out[0];
    }

    /** Copies a pmix_value_t the library allocated into Java and frees it (what PMIX_VALUE_RELEASE does). */
    private Object unloadAndFree(MemorySegment value) throws Throwable {
        if (value.equals(MemorySegment.NULL)) {
            return null;
        }
        MemorySegment v = value.reinterpret(VALUE_SIZE);
        short type = v.get(JAVA_SHORT, 0);
        Object result;
        switch (type) {
            case PMIX_STRING -> {
                MemorySegment s = v.get(ADDRESS, VALUE_DATA_OFFSET);
                result = s.equals(MemorySegment.NULL) ? "" : s.reinterpret(Integer.MAX_VALUE).getString(0, StandardCharsets.UTF_8);
                fn.free(s);
            }
            case PMIX_BYTE_OBJECT -> {
                MemorySegment b = v.get(ADDRESS, VALUE_DATA_OFFSET);
                long n = v.get(JAVA_LONG, VALUE_DATA_OFFSET + 8);
                result = b.equals(MemorySegment.NULL) ? new byte[0] : b.reinterpret(n).toArray(JAVA_BYTE);
                fn.free(b);
            }
            case PMIX_UINT32, PMIX_PROC_RANK -> result = Integer.toUnsignedLong(v.get(JAVA_INT, VALUE_DATA_OFFSET));
            case PMIX_INT -> result = (long) v.get(JAVA_INT, VALUE_DATA_OFFSET);
            case PMIX_UINT16 -> result = (long) Short.toUnsignedInt(v.get(JAVA_SHORT, VALUE_DATA_OFFSET));
            default -> result = "type " + type;
        }
        fn.free(value);
        if (result instanceof String s && s.startsWith("type ") && type != PMIX_STRING) {
            throw new PmixException("PMIx_Get returned a value of PMIx data type " + type + ", which jccl does not read", 0);
        }
        return result;
    }

    private MemorySegment proc(Arena a, int r) {
        MemorySegment p = a.allocate(PROC_SIZE, 8);
        byte[] ns = namespace.getBytes(StandardCharsets.UTF_8);
        MemorySegment.copy(ns, 0, p, JAVA_BYTE, 0, Math.min(ns.length, NSPACE_BYTES - 1));
        p.set(JAVA_INT, PROC_RANK_OFFSET, r);
        return p;
    }

    private static void setKey(MemorySegment info, long at, String key) {
        byte[] k = key.getBytes(StandardCharsets.UTF_8);
        MemorySegment.copy(k, 0, info, JAVA_BYTE, at, k.length);
    }

    private static void checkKey(String key) {
        if (key.isEmpty() || key.getBytes(StandardCharsets.UTF_8).length >= KEY_BYTES) {
            throw new IllegalArgumentException("a PMIx key has 1 to " + (KEY_BYTES - 1) + " bytes: " + key);
        }
    }

    private void check(int rc, String what) {
        if (rc != PMIX_SUCCESS) {
            throw new PmixException(what + " failed: " + fn.error(rc), rc);
        }
    }

    /** A native call that may block, run on a helper thread so the caller can give up after {@code limit}. */
    private Integer blocking(String what, Duration limit, NativeCall call) {
        if (stuck) {
            throw new PmixException(what + " not tried: an earlier PMIx call never returned", 0);
        }
        Object[] result = new Object[1];
        Thread t = Thread.ofPlatform().daemon().name("jccl-pmix").unstarted(() -> {
            try {
                result[0] = call.run();
            } catch (Throwable e) {
                result[0] = e;
            }
        });
        t.start();
        try {
            if (!t.join(limit)) {
                stuck = true;
                throw new PmixException(what + " did not return within " + limit.toSeconds() + " s (JCCL_INIT_TIMEOUT): a process"
                        + " of the job never reached it, or the PMIx server is unresponsive", 0);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new PmixException(what + " interrupted", 0);
        }
        if (result[0] instanceof Throwable e) {
            throw e instanceof PmixException pe ? pe : new PmixException(what + " failed: " + e, 0);
        }
        return (Integer) result[0];
    }

    @FunctionalInterface
    private interface NativeCall {
        int run() throws Throwable;
    }

    /** {@link #finalizeClient} with at most {@value #FINALIZE_WAIT_MS} ms of the exit spent on it (a server that no longer answers must not hold the JVM). */
    private void finalizeAtExit() {
        Thread t = Thread.ofPlatform().daemon().name("jccl-pmix-finalize-call").start(this::finalizeClient);
        try {
            t.join(FINALIZE_WAIT_MS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static final long FINALIZE_WAIT_MS = 5000;

    /** PMIx_Finalize once, unless a call is stuck inside the library (finalising then could block the exit). */
    void finalizeClient() {
        synchronized (this) {
            if (finalized || stuck) {
                return;
            }
            finalized = true;
        }
        try {
            int ignored = (int) fn.finalize.invokeExact(MemorySegment.NULL, 0L);
        } catch (Throwable t) {
            // Exiting anyway: the server sees the connection close.
        }
    }

    // ------------------------------------------------------------------------------------------ version and layout

    /** The major version in a PMIx_Get_version() string, or -1. */
    static int majorVersion(String version) {
        Matcher m = VERSION.matcher(version == null ? "" : version);
        return m.find() ? Integer.parseInt(m.group(1)) : -1;
    }

    /** Why a library of {@code version} is refused, or null when its major version is supported. */
    static String unsupported(String version) {
        int major = majorVersion(version);
        if (major < MIN_MAJOR || major > MAX_MAJOR) {
            return LIBRARY + " is PMIx '" + version + "' (major version " + (major < 0 ? "unknown" : major) + "); jccl reads the structs"
                    + " of PMIx " + MIN_MAJOR + ".x to " + MAX_MAJOR + ".x only and does not call it; set JCCL_COMM_ID (and JCCL_AUTH_TOKEN)"
                    + " instead";
        }
        return null;
    }

    private static String cString(MemorySegment s, long offset, int max) {
        int n = 0;
        while (n < max && s.get(JAVA_BYTE, offset + n) != 0) {
            n++;
        }
        byte[] b = new byte[n];
        MemorySegment.copy(s, JAVA_BYTE, offset, b, 0, n);
        return new String(b, StandardCharsets.UTF_8);
    }

    /** The library's functions, looked up once per process. */
    private static final class Functions {
        private static volatile Object loaded;

        final String version;
        final MethodHandle init;
        final MethodHandle finalize;
        final MethodHandle put;
        final MethodHandle commit;
        final MethodHandle fence;
        final MethodHandle get;
        final MethodHandle errorString;
        final MethodHandle free;

        private Functions(SymbolLookup lib, Linker linker, String version) {
            this.version = version;
            this.init = fn(lib, linker, "PMIx_Init", JAVA_INT, ADDRESS, ADDRESS, JAVA_LONG);
            this.finalize = fn(lib, linker, "PMIx_Finalize", JAVA_INT, ADDRESS, JAVA_LONG);
            this.put = fn(lib, linker, "PMIx_Put", JAVA_INT, JAVA_BYTE, ADDRESS, ADDRESS);
            this.commit = fn(lib, linker, "PMIx_Commit", JAVA_INT);
            this.fence = fn(lib, linker, "PMIx_Fence", JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS, JAVA_LONG);
            this.get = fn(lib, linker, "PMIx_Get", JAVA_INT, ADDRESS, ADDRESS, ADDRESS, JAVA_LONG, ADDRESS);
            this.errorString = fn(lib, linker, "PMIx_Error_string", ADDRESS, JAVA_INT);
            this.free = fn(linker.defaultLookup(), linker, "free", null, ADDRESS);
        }

        /** The functions, or a String saying why not. */
        static Object load() {
            Object l = loaded;
            if (l == null) {
                synchronized (Functions.class) {
                    l = loaded;
                    if (l == null) {
                        l = doLoad();
                        loaded = l;
                    }
                }
            }
            return l;
        }

        @SuppressWarnings("restricted")
        private static Object doLoad() {
            SymbolLookup lib;
            Linker linker;
            try {
                linker = Linker.nativeLinker();
                lib = SymbolLookup.libraryLookup(LIBRARY, Arena.global());
            } catch (IllegalArgumentException e) {
                return LIBRARY + " (the PMIx client library; Debian/Ubuntu: libpmix2, RHEL: pmix) was not found on the loader path";
            } catch (IllegalCallerException e) {
                return "native access is denied to jccl (run java with " + NativeAccess.flag() + "), so PMIx is not used";
            } catch (RuntimeException | LinkageError e) {
                return LIBRARY + " could not be loaded: " + e;
            }
            try {
                MethodHandle getVersion = fn(lib, linker, "PMIx_Get_version", ADDRESS);
                MemorySegment v = (MemorySegment) getVersion.invokeExact();
                String version = v.equals(MemorySegment.NULL) ? "" : v.reinterpret(4096).getString(0, StandardCharsets.UTF_8);
                String refused = unsupported(version);
                if (refused != null) {
                    return refused;
                }
                Functions f = new Functions(lib, linker, version);
                String layout = checkLayout(lib, linker, f);
                return layout != null ? layout : f;
            } catch (Throwable t) {
                return LIBRARY + " is unusable: " + t;
            }
        }

        /**
         * With {@code PMIx_Info_load} (PMIx 4 on): lets the library fill a pmix_info_t inside a
         * guarded buffer and checks key, flags, type and data at the offsets this class uses and no
         * byte written past {@value #INFO_SIZE}. Returns why the layout differs, or null.
         */
        @SuppressWarnings("restricted")
        private static String checkLayout(SymbolLookup lib, Linker linker, Functions f) throws Throwable {
            Optional<MemorySegment> sym = lib.find("PMIx_Info_load");
            if (sym.isEmpty()) {
                return null; // PMIx 3.x: the header layout above is all there is to go by
            }
            MethodHandle load = linker.downcallHandle(sym.get(), FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, JAVA_SHORT));
            try (Arena a = Arena.ofConfined()) {
                long guard = 64;
                MemorySegment buf = a.allocate(INFO_SIZE + guard, 16);
                buf.fill((byte) 0x5A);
                MemorySegment data = a.allocateFrom(JAVA_INT, 0x1234ABCD);
                int rc = (int) load.invokeExact(buf, a.allocateFrom("jccl.layout"), data, PMIX_UINT32);
                String problem = null;
                if (rc != PMIX_SUCCESS) {
                    problem = "PMIx_Info_load returned " + f.error(rc);
                } else if (!cString(buf, 0, KEY_BYTES).equals("jccl.layout")) {
                    problem = "the key is not at offset 0";
                } else if (buf.get(JAVA_SHORT, INFO_VALUE_OFFSET) != PMIX_UINT32) {
                    problem = "the value's type is not at offset " + INFO_VALUE_OFFSET;
                } else if (buf.get(JAVA_INT, INFO_VALUE_OFFSET + VALUE_DATA_OFFSET) != 0x1234ABCD) {
                    problem = "the value's data is not at offset " + (INFO_VALUE_OFFSET + VALUE_DATA_OFFSET);
                } else if (buf.get(JAVA_INT, INFO_FLAGS_OFFSET) != 0) {
                    problem = "the flags are not at offset " + INFO_FLAGS_OFFSET;
                } else {
                    for (long i = INFO_SIZE; i < INFO_SIZE + guard; i++) {
                        if (buf.get(JAVA_BYTE, i) != 0x5A) {
                            problem = "the library wrote past byte " + INFO_SIZE;
                            break;
                        }
                    }
                }
                return problem == null ? null : LIBRARY + " (" + f.version + ") does not lay out pmix_info_t as jccl expects (" + problem
                        + "); PMIx is not used: set JCCL_COMM_ID (and JCCL_AUTH_TOKEN) instead";
            }
        }

        @SuppressWarnings("restricted")
        private static MethodHandle fn(SymbolLookup lib, Linker linker, String name, MemoryLayout ret, MemoryLayout... args) {
            MemorySegment sym = lib.find(name).orElseThrow(() -> new UnsatisfiedLinkError(LIBRARY + " has no " + name));
            return linker.downcallHandle(sym, ret == null ? FunctionDescriptor.ofVoid(args) : FunctionDescriptor.of(ret, args));
        }

        void free(MemorySegment p) throws Throwable {
            if (!p.equals(MemorySegment.NULL)) {
                free.invokeExact(p);
            }
        }

        String error(int rc) {
            try {
                MemorySegment s = (MemorySegment) errorString.invokeExact(rc);
                String text = s.equals(MemorySegment.NULL) ? "" : s.reinterpret(1024).getString(0, StandardCharsets.UTF_8);
                return text + " (PMIx status " + rc + ")";
            } catch (Throwable t) {
                return "PMIx status " + rc;
            }
        }
    }
}
