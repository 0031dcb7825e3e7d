package org.jccl.internal.runtime;

import org.jccl.internal.transport.shm.ShmCollArea;
import org.jccl.internal.transport.shm.ShmCollectives;

/** Tests' way to SHM's shared collective segment, which the runtime knows only as a collective provider. */
final class SharedAreas {
    private SharedAreas() {
    }

    /** The communicator's shared collective segment, or null when its collective provider is not SHM's (or it has none). */
    static ShmCollArea of(CommunicatorImpl c) {
        return c.provider() instanceof ShmCollectives s ? s.area() : null;
    }
}
