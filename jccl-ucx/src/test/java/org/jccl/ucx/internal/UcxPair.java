package org.jccl.ucx.internal;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/** Test helper: a UCX endpoint from one worker to another's address, in the peer-failure mode. */
final class UcxPair {
    private UcxPair() {
    }

    /** ucp_ep_create's status (the endpoint, when made, is left to the worker's destruction). */
    static int createEp(UcxWorker from, byte[] to) {
        synchronized (from.lock) {
            try (Arena a = Arena.ofConfined()) {
                MemorySegment addr = a.allocate(to.length);
                MemorySegment.copy(to, 0, addr, JAVA_BYTE, 0, to.length);
                MemorySegment params = a.allocate(Layouts.STRUCT_BYTES, 8);
                params.set(JAVA_LONG, Layouts.EP_FIELD_MASK, Layouts.UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | Layouts.UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE);
                params.set(ADDRESS, Layouts.EP_ADDRESS, addr);
                params.set(JAVA_INT, Layouts.EP_ERR_MODE, Layouts.UCP_ERR_HANDLING_MODE_PEER);
                MemorySegment out = a.allocate(ADDRESS);
                return from.ucp.epCreate(from.worker, params, out);
            }
        }
    }
}
