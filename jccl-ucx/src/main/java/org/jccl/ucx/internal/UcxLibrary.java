package org.jccl.ucx.internal;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The one gate to UCX (Lucene's pattern for optional native code): {@link #get()} either yields a working
 * {@link Ucp} or says why UCX is unavailable, and never throws, so that a host without UCX, or with one too
 * old, runs every other transport as before. Loading happens once per process, on first use, in this order:
 *
 * <ol>
 *   <li>the JVM's handlers of SIGSEGV, SIGBUS, SIGILL and SIGFPE are read ({@code sigaction});</li>
 *   <li>libucs is loaded and {@code ucs_debug_disable_signals()} called at once: libucs's constructor installs
 *       its own handlers for {@code UCX_ERROR_SIGNALS}, and the JVM's implicit null checks in JIT-compiled
 *       code (a SIGSEGV the JVM turns into a NullPointerException) would then kill the process;</li>
 *   <li>the handlers are compared with the JVM's and put back where they still differ (in case this UCX's
 *       disable call missed one);</li>
 *   <li>{@code setlocale(LC_NUMERIC, "C")}: the JVM sets the C locale from the environment, and under a
 *       comma-decimal locale (de_DE) UCX cannot parse its own defaults such as {@code 1.5s} (worker creation
 *       fails); jccl's Java code does not depend on the C numeric locale;</li>
 *   <li>libucp is loaded, its version read ({@code ucp_get_version}), below 1.13 refused.</li>
 * </ol>
 *
 * <p>Where: {@code $JCCL_UCX_HOME/lib} (or {@code $JCCL_UCX_HOME} itself, HPC-X's {@code $HPCX_UCX_DIR})
 * when that variable is set, else the system loader's path ({@code libucp.so.0}).
 */
public final class UcxLibrary {
    /** The oldest UCX the binding's layouts and calls were checked against (Debian 12's 1.13.1). */
    static final int MIN_MAJOR = 1;
    static final int MIN_MINOR = 13;

    private static final int SIGILL = 4;
    private static final int SIGBUS = 7;
    private static final int SIGFPE = 8;
    private static final int SIGSEGV = 11;
    private static final int[] GUARDED_SIGNALS = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
    private static final int LC_NUMERIC = 1; // glibc

    private UcxLibrary() {
    }

    /**
     * The outcome of loading.
     *
     * @param ucp the binding, or null when unavailable
     * @param reason why UCX is unavailable (null when available)
     * @param notes what the load did about the hazards, for the INFO log ("signal handlers: ...")
     */
    record Loaded(Ucp ucp, String reason, List<String> notes) {
        boolean available() {
            return ucp != null;
        }
    }

    private static final class Holder {
        static final Loaded LOADED = load(true, true);
    }

    /** The process's UCX, loaded on the first call. Never throws. */
    static Loaded get() {
        return Holder.LOADED;
    }

    /** Whether UCX loaded here; {@link #reason()} says why not. */
    public static boolean available() {
        return get().available();
    }

    /** Why UCX is unavailable, or null. */
    public static String reason() {
        return get().reason();
    }

    /** The version, "1.13.1", or null when unavailable. */
    public static String version() {
        Loaded l = get();
        return l.available() ? l.ucp().version() : null;
    }

    /** The library loaded, or null. */
    public static String libraryPath() {
        Loaded l = get();
        return l.available() ? l.ucp().libraryPath : null;
    }

    /** What the load did about the signal and locale hazards. */
    public static List<String> notes() {
        return get().notes();
    }

    /**
     * Loads UCX. The two flags exist for the hazard tests only, which show in a forked JVM that each fix is
     * needed (with the flag false the hazard strikes); production code passes true for both.
     */
    @SuppressWarnings("restricted")
    static Loaded load(boolean signalFix, boolean localeFix) {
        List<String> notes = new ArrayList<>();
        try {
            if (ValueLayout.ADDRESS.byteSize() != 8 || !System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux")) {
                return new Loaded(null, "UCX is supported on 64-bit Linux only (this is " + System.getProperty("os.name") + " "
                        + System.getProperty("os.arch") + ")", notes);
            }
            Linker linker = Linker.nativeLinker();
            SymbolLookup libc = linker.defaultLookup();
            MethodHandle sigaction = linker.downcallHandle(libc.find("sigaction").orElseThrow(),
                    FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, ADDRESS));
            MethodHandle setlocale = linker.downcallHandle(libc.find("setlocale").orElseThrow(), FunctionDescriptor.of(ADDRESS, JAVA_INT, ADDRESS));

            Path dir = home();
            String ucsName = dir == null ? "libucs.so.0" : dir.resolve("libucs.so.0").toString();
            String ucpName = dir == null ? "libucp.so.0" : dir.resolve("libucp.so.0").toString();
            if (dir != null && !Files.exists(Path.of(ucpName))) {
                return new Loaded(null, "JCCL_UCX_HOME=" + System.getenv("JCCL_UCX_HOME") + " has no libucp.so.0 (looked in " + dir
                        + "); fix: point it at UCX's installation (the directory holding lib/libucp.so.0)", notes);
            }

            Arena global = Arena.global();
            MemorySegment saved = global.allocate(Layouts.SIGACTION_BYTES * GUARDED_SIGNALS.length, 16);
            for (int i = 0; i < GUARDED_SIGNALS.length; i++) {
                int r = (int) sigaction.invokeExact(GUARDED_SIGNALS[i], MemorySegment.NULL, slot(saved, i));
                if (r != 0) {
                    throw new IllegalStateException("sigaction(" + GUARDED_SIGNALS[i] + ") query failed");
                }
            }

            SymbolLookup ucs;
            try {
                ucs = SymbolLookup.libraryLookup(ucsName, global);
            } catch (IllegalArgumentException e) {
                return new Loaded(null, "UCX not found: cannot load " + ucsName + " (" + e.getMessage()
                        + "); fix: install UCX 1.13 or newer (Debian/Ubuntu: apt-get install libucx0; or HPC-X, and set JCCL_UCX_HOME"
                        + " to its UCX directory)", notes);
            }
            if (signalFix) {
                MemorySegment disable = ucs.find("ucs_debug_disable_signals").orElse(null);
                if (disable != null) {
                    linker.downcallHandle(disable, FunctionDescriptor.ofVoid()).invokeExact();
                    notes.add("ucs_debug_disable_signals() called");
                } else {
                    notes.add("libucs has no ucs_debug_disable_signals");
                }
                try (Arena a = Arena.ofConfined()) {
                    MemorySegment now = a.allocate(Layouts.SIGACTION_BYTES, 16);
                    List<String> restored = new ArrayList<>();
                    for (int i = 0; i < GUARDED_SIGNALS.length; i++) {
                        int r = (int) sigaction.invokeExact(GUARDED_SIGNALS[i], MemorySegment.NULL, now);
                        long mine = now.get(JAVA_LONG, Layouts.SIGACTION_HANDLER);
                        long jvm = slot(saved, i).get(JAVA_LONG, Layouts.SIGACTION_HANDLER);
                        if (r == 0 && mine != jvm) {
                            r = (int) sigaction.invokeExact(GUARDED_SIGNALS[i], slot(saved, i), MemorySegment.NULL);
                            restored.add(signalName(GUARDED_SIGNALS[i]) + (r == 0 ? "" : " (failed)"));
                        }
                    }
                    notes.add(restored.isEmpty() ? "the JVM's SIGSEGV/SIGBUS/SIGILL/SIGFPE handlers are in place"
                            : "the JVM's handlers of " + String.join(", ", restored) + " put back after UCX replaced them");
                }
            } else {
                notes.add("signal fix skipped (hazard test)");
            }
            if (localeFix) {
                try (Arena a = Arena.ofConfined()) {
                    MemorySegment before = (MemorySegment) setlocale.invokeExact(LC_NUMERIC, MemorySegment.NULL);
                    String was = before.address() == 0 ? "?" : before.reinterpret(256).getString(0);
                    MemorySegment r = (MemorySegment) setlocale.invokeExact(LC_NUMERIC, a.allocateFrom("C"));
                    notes.add("LC_NUMERIC " + was + " -> C" + (r.address() == 0 ? " (failed)" : ""));
                }
            } else {
                notes.add("locale fix skipped (hazard test)");
            }

            SymbolLookup ucp;
            try {
                ucp = SymbolLookup.libraryLookup(ucpName, global);
            } catch (IllegalArgumentException e) {
                return new Loaded(null, "UCX not found: cannot load " + ucpName + " (" + e.getMessage()
                        + "); fix: install UCX 1.13 or newer (Debian/Ubuntu: apt-get install libucx0)", notes);
            }
            MemorySegment getVersion = ucp.find("ucp_get_version").orElse(null);
            if (getVersion == null) {
                return new Loaded(null, ucpName + " has no ucp_get_version: not a UCX libucp", notes);
            }
            int major;
            int minor;
            int release;
            try (Arena a = Arena.ofConfined()) {
                MemorySegment v = a.allocate(JAVA_INT, 3);
                linker.downcallHandle(getVersion, FunctionDescriptor.ofVoid(ADDRESS, ADDRESS, ADDRESS))
                        .invokeExact(v, v.asSlice(4), v.asSlice(8));
                major = v.getAtIndex(JAVA_INT, 0);
                minor = v.getAtIndex(JAVA_INT, 1);
                release = v.getAtIndex(JAVA_INT, 2);
            }
            String version = major + "." + minor + "." + release;
            if (major != MIN_MAJOR || minor < MIN_MINOR) {
                return new Loaded(null, "UCX " + version + " at " + ucpName + " is too old: jccl needs UCX " + MIN_MAJOR + "." + MIN_MINOR
                        + " or newer (1.x); fix: install a newer UCX and set JCCL_UCX_HOME to it", notes);
            }
            String versionString = version;
            MemorySegment vs = ucp.find("ucp_get_version_string").orElse(null);
            if (vs != null) {
                MemorySegment s = (MemorySegment) linker.downcallHandle(vs, FunctionDescriptor.of(ADDRESS)).invokeExact();
                versionString = s.reinterpret(256).getString(0);
            }
            return new Loaded(new Ucp(ucp, major, minor, release, versionString, ucpName), null, notes);
        } catch (Throwable t) {
            return new Loaded(null, "UCX could not be bound: " + t, notes);
        }
    }

    private static MemorySegment slot(MemorySegment saved, int i) {
        return saved.asSlice(i * Layouts.SIGACTION_BYTES, Layouts.SIGACTION_BYTES);
    }

    private static String signalName(int sig) {
        return switch (sig) {
            case SIGSEGV -> "SIGSEGV";
            case SIGBUS -> "SIGBUS";
            case SIGILL -> "SIGILL";
            case SIGFPE -> "SIGFPE";
            default -> "signal " + sig;
        };
    }

    private static Path home() {
        String h = System.getenv("JCCL_UCX_HOME");
        if (h == null || h.isBlank()) {
            return null;
        }
        Path p = Path.of(h);
        return Files.isDirectory(p.resolve("lib")) ? p.resolve("lib") : p;
    }

    /** Sets the C numeric locale to "C" again (before UCX parses configuration: someone may have changed it). */
    @SuppressWarnings("restricted")
    static void numericLocaleC() {
        try (Arena a = Arena.ofConfined()) {
            Linker linker = Linker.nativeLinker();
            MethodHandle setlocale = linker.downcallHandle(linker.defaultLookup().find("setlocale").orElseThrow(),
                    FunctionDescriptor.of(ADDRESS, JAVA_INT, ADDRESS));
            MemorySegment r = (MemorySegment) setlocale.invokeExact(LC_NUMERIC, a.allocateFrom("C"));
        } catch (Throwable t) {
            throw new IllegalStateException("setlocale(LC_NUMERIC, \"C\") failed", t);
        }
    }
}
