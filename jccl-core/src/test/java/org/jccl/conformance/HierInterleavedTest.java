package org.jccl.conformance;

/** {@link HierConformance} with JCCL_HOSTID=a,b,a,b: ranks 0,2 on one host and 1,3 on the other: hosts that are not contiguous rank ranges. */
class HierInterleavedTest extends HierConformance {
    @Override
    protected String layout() {
        return "a,b,a,b";
    }
}
