package org.jccl.conformance;

/** {@link HierConformance} with JCCL_HOSTID=a,b,c,a,b,c: three hosts of two ranks, interleaved: an odd number of hosts in the cross-host stage. */
class Hier3HostsTest extends HierConformance {
    @Override
    protected String layout() {
        return "a,b,c,a,b,c";
    }
}
