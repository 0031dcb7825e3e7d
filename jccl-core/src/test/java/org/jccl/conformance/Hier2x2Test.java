package org.jccl.conformance;

/** {@link HierConformance} with JCCL_HOSTID=a,a,b,b: two hosts of two ranks each (ranks 0,1 | 2,3): the slice form of all-reduce. */
class Hier2x2Test extends HierConformance {
    @Override
    protected String layout() {
        return "a,a,b,b";
    }
}
