package org.jccl.internal.control;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.jccl.JcclException;

/**
 * The JVM shutdown hook of every control plane in this process ({@code jccl-ctl-exit}), for programs
 * that exit without closing their communicators: first every live communicator settles what it
 * still owes its peers (the mismatch guard's held ring confirmations, {@link ControlPlane.Host#atExit}),
 * then each one in an operation fails it (FAULT naming itself) and each idle one says goodbye. A
 * mismatch that shows only then ends the JVM with status 1 and one line per mismatch on stderr, so
 * that an exit status of 0 does not hide it.
 */
final class ExitHook {
    private static final Set<Supervisor> LIVE = ConcurrentHashMap.newKeySet();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(ExitHook::atExit, "jccl-ctl-exit"));
    }

    private ExitHook() {
    }

    /** Installs the hook (with this class; nothing more to do). */
    static void install() {
    }

    static void add(Supervisor cp) {
        LIVE.add(cp);
    }

    /** Removes {@code cp}; returns whether it was live (the first call of its shutdown). */
    static boolean remove(Supervisor cp) {
        return LIVE.remove(cp);
    }

    static boolean contains(Supervisor cp) {
        return LIVE.contains(cp);
    }

    private static void atExit() {
        // First every communicator settles its ring confirmations (their peers may be exiting too, and need them).
        List<JcclException> mismatches = new ArrayList<>();
        for (Supervisor cp : LIVE) {
            JcclException m = cp.settleAtExit();
            if (m != null) {
                mismatches.add(m);
            }
        }
        for (Supervisor cp : LIVE) {
            cp.leaveAtExit();
        }
        if (!mismatches.isEmpty()) {
            // Calls of this rank returned (their own results right) before the mismatch showed, and the program
            // did not close() its communicator: an exit status of 0 would hide it.
            for (JcclException m : mismatches) {
                System.err.println("jccl: exiting with status 1: " + m.getMessage());
            }
            System.err.flush();
            Runtime.getRuntime().halt(1);
        }
    }
}
