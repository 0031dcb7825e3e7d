package org.jccl.conformance;

/** {@link HierConformance} with JCCL_HOSTID=a*2,b*2,c*2,d*2: four hosts of two ranks (a cross-host stage of four). */
class Hier4x2Test extends HierConformance {
    @Override
    protected String layout() {
        return "a*2,b*2,c*2,d*2";
    }
}
