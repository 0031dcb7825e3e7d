package org.jccl.conformance;

import org.junit.jupiter.api.Test;

class TmpHierZeroTest extends HierGuardTest {
    @Test
    void zero4() throws Exception {
        java.lang.reflect.Method m = MismatchGuardConformance.class.getDeclaredMethod("mismatch", int.class, Case.class, boolean.class);
        m.setAccessible(true);
        for (int i = 0; i < 3; i++) {
            m.invoke(this, 4, Case.ALLREDUCE_ZERO, false);
            m.invoke(this, 4, Case.SCATTER_ROOT, false);
        }
    }
}
