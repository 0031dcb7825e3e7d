package org.jccl.internal.bootstrap;

import org.jccl.Config;
import org.jccl.JcclId;
import org.jccl.spi.PeerInfo;

/** SKELETON - to be implemented by the bootstrap work package. */
public final class Bootstrap {
    private Bootstrap() {
    }

    public static PeerInfo[] rendezvous(JcclId id, int rank, int size, PeerInfo self, Config config) {
        throw new UnsupportedOperationException("bootstrap");
    }
}
