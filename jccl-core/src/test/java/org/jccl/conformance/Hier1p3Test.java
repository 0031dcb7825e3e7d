package org.jccl.conformance;

/** {@link HierConformance} with JCCL_HOSTID=a,b,b,b: one rank alone on its host, three on the other. */
class Hier1p3Test extends HierConformance {
    @Override
    protected String layout() {
        return "a,b,b,b";
    }
}
