package org.jccl.conformance;

/** {@link HierConformance} with JCCL_HOSTID=a,a,a,b,b: three ranks on one host and two on the other: unequal hosts, the leader form of all-reduce. */
class Hier3p2Test extends HierConformance {
    @Override
    protected String layout() {
        return "a,a,a,b,b";
    }
}
