package org.jccl.internal.runtime;

import java.util.List;
import org.jccl.Communicator;
import org.jccl.Config;
import org.jccl.JcclId;

/** SKELETON - runtime. */
public final class CommunicatorFactory {
    private CommunicatorFactory() {
    }

    public static Communicator init(JcclId id, int rank, int size, Config config, boolean startRoot) {
        throw new UnsupportedOperationException("runtime");
    }

    public static List<Communicator> initLocal(int n, Config config) {
        throw new UnsupportedOperationException("runtime");
    }
}
