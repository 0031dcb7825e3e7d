package org.jccl.internal.util;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Turns the operating system's "out of file descriptors" and "cannot lock memory" into words a user
 * can act on: which limit was reached, its value now (from /proc/self/limits) and how to raise it.
 * Used where jccl opens sockets, selectors and files for a peer, and where jccl-cuda page-locks
 * host memory for staging (jccl-core itself locks no memory: no mlock, no pinned segments).
 */
public final class ResourceLimits {
    private ResourceLimits() {
    }

    /**
     * Read when the class loads (the runtime loads it with the first communicator): once descriptors
     * are exhausted, neither /proc/self/limits nor a class file could be opened any more.
     */
    private static final String[] OPEN_FILES = limit("Max open files");
    private static final Class<?> PRELOADED = org.jccl.ResourceException.class;

    /** Loads this class and what its messages need while descriptors are still available. */
    public static void preload() {
        if (PRELOADED == null || OPEN_FILES == null) {
            throw new IllegalStateException();
        }
        openFilesAdvice();
        outOfFileDescriptors(new IOException("preload"));
    }

    /** True when {@code t} or one of its causes is EMFILE/ENFILE ("Too many open files"). */
    public static boolean outOfFileDescriptors(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            String m = c.getMessage();
            if (m != null && (m.contains("Too many open files") || m.contains("EMFILE") || m.contains("ENFILE"))) {
                return true;
            }
        }
        return false;
    }

    /** "this process reached its limit of open files (ulimit -n, now 1024; hard limit 4096): raise it ..." */
    public static String openFilesAdvice() {
        String[] fresh = limit("Max open files"); // may have been changed (prlimit) since; unreadable without descriptors
        String[] now = fresh[0].equals("unknown") ? OPEN_FILES : fresh;
        return "this process reached its limit of open files (ulimit -n, now " + now[0] + "; hard limit " + now[1] + ", "
                + openFds() + " open): raise it, e.g. `ulimit -n 65536` in the shell that starts the job (up to the hard limit),"
                + " LimitNOFILE=65536 for a systemd service, `docker run --ulimit nofile=65536:65536`, or nofile in"
                + " /etc/security/limits.conf; each rank needs about one descriptor per socket to each peer"
                + " (JCCL_SOCKET_NTHREADS x JCCL_NSOCKS_PERTHREAD, twice with JCCL_SOCKET_SPLIT=1) plus a few of its own";
    }

    /**
     * Why page-locking {@code bytes} of host memory failed and how to fix it: "... RLIMIT_MEMLOCK (ulimit -l) is now
     * 65536 bytes (64 KiB), hard limit ...: raise it, e.g. `ulimit -l unlimited` ...". The values are read now
     * (prlimit may have changed them since the process started).
     */
    public static String lockedMemoryAdvice(long bytes) {
        String[] now = limit("Max locked memory");
        return "the host could not page-lock " + bytes + " bytes (" + binary(bytes) + ") of memory: either host memory is short, or"
                + " the locked-memory limit stops it: RLIMIT_MEMLOCK (ulimit -l) is now " + bytesLimit(now[0]) + ", hard limit "
                + bytesLimit(now[1]) + ". Raise it: `ulimit -l unlimited` in the shell that starts the job (up to the hard limit"
                + " without root), LimitMEMLOCK=infinity for a systemd service, `docker run --ulimit memlock=-1`, '* - memlock"
                + " unlimited' in /etc/security/limits.conf; on Kubernetes, where pod specs cannot set ulimits, raise the container"
                + " runtime's default (LimitMEMLOCK=infinity in containerd.service or docker.service on the node). Or free host"
                + " memory, or use smaller messages";
    }

    private static String bytesLimit(String v) {
        if (v.equals("unlimited") || v.equals("unknown")) {
            return v;
        }
        try {
            long b = Long.parseLong(v);
            return b + " bytes (" + binary(b) + ")";
        } catch (NumberFormatException e) {
            return v;
        }
    }

    /** 65536 -> "64 KiB", 1536 -> "1.5 KiB". */
    public static String binary(long b) {
        String[] units = {"B", "KiB", "MiB", "GiB", "TiB"};
        double v = b;
        int u = 0;
        while (v >= 1024 && u < units.length - 1) {
            v /= 1024;
            u++;
        }
        return (v == Math.rint(v) ? Long.toString((long) v) : String.format(java.util.Locale.ROOT, "%.1f", v)) + " " + units[u];
    }

    /** The soft and hard value of a line of /proc/self/limits, or "unknown". */
    public static String[] limit(String name) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/limits"))) {
                if (line.startsWith(name)) {
                    String[] f = line.substring(name.length()).trim().split("\\s+");
                    if (f.length >= 2) {
                        return new String[] {f[0], f[1]};
                    }
                }
            }
        } catch (IOException | RuntimeException e) {
            // not Linux
        }
        return new String[] {"unknown", "unknown"};
    }

    private static String openFds() {
        try (var s = Files.list(Path.of("/proc/self/fd"))) {
            return Long.toString(s.count());
        } catch (IOException | RuntimeException e) {
            return "unknown";
        }
    }
}
