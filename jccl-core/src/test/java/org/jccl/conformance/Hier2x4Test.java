package org.jccl.conformance;

/** {@link HierConformance} with JCCL_HOSTID=a*4,b*4: two hosts of four ranks (a deeper same-host stage). */
class Hier2x4Test extends HierConformance {
    @Override
    protected String layout() {
        return "a*4,b*4";
    }
}
