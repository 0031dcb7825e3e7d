package org.jccl.ucx.internal;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The endpoints' error handler ({@code ucp_err_handler_cb_t}, the one upcall of the transport, off the hot path):
 * UCX calls it from the worker's progress when a peer-failure endpoint fails (the peer died, the link broke; in
 * 1.13 often well after the requests on it failed with the same status, which fail the connection by themselves). Its
 * argument is a key into {@link #BY_KEY}; the handler only records the status on the connection, which fails its
 * pending requests (receives included, which no endpoint error completes otherwise) at the end of that progress
 * call. Without a handler UCX 1.13 prints "error ... will not be handled since no error callback is installed".
 */
final class EpErrors {
    private EpErrors() {
    }

    private static final ConcurrentHashMap<Long, UcxConnection> BY_KEY = new ConcurrentHashMap<>();
    private static final AtomicLong NEXT = new AtomicLong(1);
    /** {@code void (*)(void *arg, ucp_ep_h ep, ucs_status_t status)}, made once per process. */
    static final MemorySegment STUB = stub();

    private static MemorySegment stub() {
        try {
            var handle = MethodHandles.lookup().findStatic(EpErrors.class, "failed",
                    MethodType.methodType(void.class, MemorySegment.class, MemorySegment.class, byte.class));
            return Linker.nativeLinker().upcallStub(handle, FunctionDescriptor.ofVoid(ADDRESS, ADDRESS, JAVA_BYTE), Arena.global());
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    /** A fresh key for an endpoint about to be made; {@link #bind} it to the connection once made. */
    static long newKey() {
        return NEXT.getAndIncrement();
    }

    static void bind(long key, UcxConnection c) {
        BY_KEY.put(key, c);
    }

    static void unregister(long key) {
        BY_KEY.remove(key);
    }

    /** The upcall: never throws (an exception here would end the JVM). */
    private static void failed(MemorySegment arg, MemorySegment ep, byte status) {
        try {
            UcxConnection c = BY_KEY.get(arg.address());
            if (c != null) {
                c.endpointFailed(status);
            }
        } catch (Throwable t) {
            // nothing may escape into UCX; the connection's requests still fail through their own statuses
        }
    }
}
