package org.jccl.ucx;

import org.junit.jupiter.api.Assumptions;

/** Test helpers: skip, naming what is missing, where UCX cannot be loaded. */
public final class UcxTests {
    private UcxTests() {
    }

    /** Skips the calling test unless UCX loads here, naming why it does not. */
    public static void assumeUcx() {
        Ucx.Status s = Ucx.status();
        Assumptions.assumeTrue(s.available(), () -> "UCX is not usable here (" + s.reason() + "); apt-get install libucx0 to run this test");
    }
}
