package org.jccl.ucx.internal;

import java.util.Map;

/**
 * The forked JVM of {@link UcxHazardsTest}: loads UCX with or without one of the binding's fixes, then meets the
 * hazard. {@code signals fix|nofix}: after loading, a null check in JIT-compiled code must still throw a
 * NullPointerException (prints {@code NPE OK n}); {@code locale fix|nofix}: a worker must be created under the
 * environment's (comma-decimal) locale with {@code UCX_TCP_KEEPINTVL=1.5s} (prints {@code WORKER OK}).
 */
public final class HazardProbe {
    private HazardProbe() {
    }

    static int length(int[] a) {
        return a.length; // an implicit null check once compiled: a SIGSEGV the JVM turns into an NPE
    }

    public static void main(String[] args) {
        if (args[0].equals("absent")) {
            absent();
            return;
        }
        if (args[0].equals("tcpsettings")) {
            // the settings the transport gives a tcp-only rank: UCX says "invalid configuration" for any it drops
            Map<String, String> s = UcxSettings.translate(org.jccl.Config.defaults().with("JCCL_UCX_TLS", "tcp"), java.util.List.of(), null,
                    Map.of());
            try (UcxWorker w = UcxWorker.open(UcxLibrary.get().ucp(), s, "settings-probe", true)) {
                System.out.println("WORKER OK " + s + " " + w.resources);
            }
            return;
        }
        boolean fix = args[1].equals("fix");
        UcxLibrary.Loaded l = args[0].equals("signals") ? UcxLibrary.load(fix, true) : UcxLibrary.load(true, fix);
        if (!l.available()) {
            System.out.println("UNAVAILABLE " + l.reason());
            System.exit(3);
        }
        System.out.println("LOADED " + l.notes());
        if (args[0].equals("signals")) {
            int[] a = new int[3];
            long sum = 0;
            for (int i = 0; i < 2_000_000; i++) {
                sum += length(a); // compiled by C1 and C2 long before the end
            }
            int npes = 0;
            for (int i = 0; i < 5; i++) {
                try {
                    sum += length(i < 5 ? null : a);
                } catch (NullPointerException e) {
                    npes++;
                }
            }
            System.out.println("NPE OK " + npes + " " + sum);
        } else {
            try (UcxWorker w = UcxWorker.open(l.ucp(), Map.of("TLS", "tcp"), "hazard-probe", fix)) {
                System.out.println("WORKER OK " + w.resources);
            } catch (RuntimeException e) {
                System.out.println("WORKER FAILED " + e.getMessage());
                System.exit(2);
            }
        }
    }

    /**
     * With UCX not loadable (the test points JCCL_UCX_HOME at an empty directory): the gate says why; JCCL_NET=UCX fails
     * creation naming it; JCCL_NET=Socket and auto still run ranks of "two hosts" (JCCL_HOSTID=a,b) over TCP.
     */
    private static void absent() {
        System.out.println("REASON " + UcxLibrary.reason());
        org.jccl.Config base = org.jccl.Config.defaults().with("JCCL_LOCAL_DISABLE", "1").with("JCCL_SHM_DISABLE", "1")
                .with("JCCL_HOSTID", "a,b");
        try {
            org.jccl.Jccl.initLocal(2, base.with("JCCL_NET", "UCX")).forEach(org.jccl.Communicator::close);
            System.out.println("UCX NOT REFUSED");
        } catch (RuntimeException e) {
            System.out.println("REFUSED " + e.getMessage());
        }
        for (String net : new String[] {"Socket", "auto"}) {
            java.util.List<org.jccl.Communicator> cs = org.jccl.Jccl.initLocal(2, base.with("JCCL_NET", net));
            java.util.List<Thread> ts = new java.util.ArrayList<>();
            float[][] sums = new float[2][];
            for (org.jccl.Communicator c : cs) {
                ts.add(Thread.ofPlatform().start(() -> {
                    float[] x = {c.rank() + 1};
                    c.allReduce(x, org.jccl.ReduceOp.SUM);
                    sums[c.rank()] = x;
                }));
            }
            for (Thread t : ts) {
                try {
                    t.join();
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            }
            cs.forEach(org.jccl.Communicator::close);
            System.out.println(net + " OK " + sums[0][0] + " " + sums[1][0]);
        }
    }
}
