package org.jccl.internal.bootstrap;

import java.net.InetSocketAddress;
import org.jccl.Config;

/** SKELETON - to be implemented by the bootstrap work package. */
public final class BootstrapRoot implements AutoCloseable {
    public static BootstrapRoot start(InetSocketAddress bind, byte[] secret, Config config) {
        throw new UnsupportedOperationException("bootstrap root");
    }

    public InetSocketAddress address() {
        throw new UnsupportedOperationException("bootstrap root");
    }

    @Override
    public void close() {
    }
}
