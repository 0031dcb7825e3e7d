package org.jccl.internal.net;

import java.net.InetAddress;
import org.jccl.Config;

/** SKELETON - to be implemented by the TCP work package. */
public final class Interfaces {
    private Interfaces() {
    }

    public static InetAddress selectAddress(Config config) {
        return InetAddress.getLoopbackAddress();
    }
}
