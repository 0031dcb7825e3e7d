package org.jccl.internal.control;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Description;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;

/**
 * A JFR event per operation of a communicator (shown by JDK Mission Control under "jccl"): the
 * collective, its sequence number, bytes, element type, algorithm, transport and, as every JFR
 * duration event, how long it ran. Disabled unless a recording enables {@code org.jccl.Collective};
 * then {@link #isEnabled()} is false and the operation path skips it after one check.
 */
@Name("org.jccl.Collective")
@Label("jccl Collective")
@Category("jccl")
@Description("One operation (collective or point-to-point) of a jccl communicator")
@StackTrace(false)
public final class CollectiveEvent extends jdk.jfr.Event {
    @Label("Communicator")
    public String comm;
    @Label("Rank")
    public int rank;
    @Label("Ranks")
    public int ranks;
    @Label("Sequence Number")
    public long seq;
    @Label("Operation")
    public String op;
    @Label("Bytes")
    @DataAmount
    public long bytes;
    @Label("Data Type")
    public String dtype;
    @Label("Algorithm")
    public String algorithm;
    @Label("Transport")
    public String transport;
    @Label("Succeeded")
    public boolean ok;
}
