package org.jccl.cuda;

import org.jccl.ReduceOp;

/**
 * Argument checks of the {@link DeviceCommunicator} calls, shared by its implementations so they
 * reject the same mistakes with the same words, before anything is enqueued. Each method throws
 * {@link IllegalArgumentException} naming the collective, the argument and what is wrong (a
 * missing required argument included), and returns the element count the library is called with.
 *
 * <p>The rules are those of {@link DeviceCommunicator}: counts come from the buffers, recv may be
 * larger than needed, send and recv have the same type, every buffer and the stream belong to the
 * communicator's GPU, roots and peers lie in [0, size). Buffers that overlap must be exactly in
 * place (same address; for allGather and reduceScatter, the small buffer is this rank's slot of
 * the large one).
 */
final class DeviceArgs {
    private DeviceArgs() {
    }

    /** allReduce: returns send.count(); recv must hold as many. */
    static long checkAllReduce(DeviceCommunicator c, DeviceBuffer send, DeviceBuffer recv, ReduceOp op, CudaStream s) {
        final String coll = "allReduce";
        required(coll, "send", send);
        required(coll, "recv", recv);
        required(coll, "op", op);
        common(c, coll, s, send, recv);
        sameType(coll, send, recv);
        atLeast(coll, "recv", recv, send.count());
        overlap(coll, send, recv, 0);
        return send.count();
    }

    /** broadcast: returns recv.count(); send is required (and must hold as many) only on the root. */
    static long checkBroadcast(DeviceCommunicator c, DeviceBuffer send, DeviceBuffer recv, int root, CudaStream s) {
        final String coll = "broadcast";
        required(coll, "recv", recv);
        root(c, coll, root);
        if (c.rank() == root) {
            required(coll, "send (required on the root)", send);
            common(c, coll, s, send, recv);
            sameType(coll, send, recv);
            atLeast(coll, "send", send, recv.count());
            overlap(coll, send, recv, 0);
        } else {
            common(c, coll, s, recv, null);
        }
        return recv.count();
    }

    /** reduce: returns send.count(); recv is required (and must hold as many) only on the root. */
    static long checkReduce(DeviceCommunicator c, DeviceBuffer send, DeviceBuffer recv, ReduceOp op, int root, CudaStream s) {
        final String coll = "reduce";
        required(coll, "send", send);
        required(coll, "op", op);
        root(c, coll, root);
        if (c.rank() == root) {
            required(coll, "recv (required on the root)", recv);
            common(c, coll, s, send, recv);
            sameType(coll, send, recv);
            atLeast(coll, "recv", recv, send.count());
            overlap(coll, send, recv, 0);
        } else {
            common(c, coll, s, send, null);
        }
        return send.count();
    }

    /** allGather: returns send.count() (per rank); recv must hold size() times as many. */
    static long checkAllGather(DeviceCommunicator c, DeviceBuffer send, DeviceBuffer recv, CudaStream s) {
        final String coll = "allGather";
        required(coll, "send", send);
        required(coll, "recv", recv);
        common(c, coll, s, send, recv);
        sameType(coll, send, recv);
        atLeast(coll, "recv", recv, Math.multiplyExact(send.count(), (long) c.size()));
        // In place: send is this rank's slot of recv.
        overlap(coll, send, recv, send.byteSize() * c.rank());
        return send.count();
    }

    /** reduceScatter: returns recv.count() (per rank); send must hold size() times as many. */
    static long checkReduceScatter(DeviceCommunicator c, DeviceBuffer send, DeviceBuffer recv, ReduceOp op, CudaStream s) {
        final String coll = "reduceScatter";
        required(coll, "send", send);
        required(coll, "recv", recv);
        required(coll, "op", op);
        common(c, coll, s, send, recv);
        sameType(coll, send, recv);
        atLeast(coll, "send", send, Math.multiplyExact(recv.count(), (long) c.size()));
        // In place: recv is this rank's slot of send.
        overlap(coll, recv, send, recv.byteSize() * c.rank());
        return recv.count();
    }

    /**
     * allToAll: returns the block, send.count() / size() elements to and from each rank;
     * send.count() must be a multiple of size() and recv must hold send.count().
     */
    static long checkAllToAll(DeviceCommunicator c, DeviceBuffer send, DeviceBuffer recv, CudaStream s) {
        final String coll = "allToAll";
        required(coll, "send", send);
        required(coll, "recv", recv);
        common(c, coll, s, send, recv);
        sameType(coll, send, recv);
        if (send.count() % c.size() != 0) {
            throw new IllegalArgumentException(coll + ": send holds " + send.count() + " elements, not a multiple of the "
                    + c.size() + " ranks (each rank gets send.count()/size elements)");
        }
        atLeast(coll, "recv", recv, send.count());
        overlap(coll, send, recv, 0);
        return send.count() / c.size();
    }

    /** send or recv ({@code coll}): returns buf.count(). */
    static long checkPointToPoint(DeviceCommunicator c, String coll, DeviceBuffer buf, int peer, CudaStream s) {
        required(coll, "buf", buf);
        common(c, coll, s, buf, null);
        if (peer < 0 || peer >= c.size()) {
            throw new IllegalArgumentException(coll + ": peer " + peer + " is outside [0, " + c.size() + ")");
        }
        return buf.count();
    }

    /** Whether send and recv are the in-place form: send starts {@code slotOffsetBytes} into recv (both non-null). */
    static boolean inPlace(DeviceBuffer send, DeviceBuffer recv, long slotOffsetBytes) {
        return send != null && recv != null && send.device().ordinal() == recv.device().ordinal()
                && send.address() - recv.address() == slotOffsetBytes;
    }

    // ------------------------------------------------------------------ pieces

    private static void required(String coll, String name, Object o) {
        if (o == null) {
            throw new IllegalArgumentException(coll + ": " + name + " is null");
        }
    }

    /** Stream present and of the communicator's GPU; every non-null buffer on that GPU. */
    private static void common(DeviceCommunicator c, String coll, CudaStream s, DeviceBuffer a, DeviceBuffer b) {
        required(coll, "stream", s);
        int gpu = c.device().ordinal();
        if (s.device().ordinal() != gpu) {
            throw new IllegalArgumentException(coll + ": the stream belongs to GPU " + s.device().ordinal()
                    + " but this rank (" + c.rank() + ") runs on GPU " + gpu + "; use a stream of " + c.device());
        }
        onDevice(c, coll, a, gpu);
        onDevice(c, coll, b, gpu);
    }

    private static void onDevice(DeviceCommunicator c, String coll, DeviceBuffer b, int gpu) {
        if (b != null && b.device().ordinal() != gpu) {
            throw new IllegalArgumentException(coll + ": buffer " + b + " is on GPU " + b.device().ordinal()
                    + " but this rank (" + c.rank() + ") runs on GPU " + gpu);
        }
    }

    private static void root(DeviceCommunicator c, String coll, int root) {
        if (root < 0 || root >= c.size()) {
            throw new IllegalArgumentException(coll + ": root " + root + " is outside [0, " + c.size() + ")");
        }
    }

    private static void sameType(String coll, DeviceBuffer send, DeviceBuffer recv) {
        if (send.type() != recv.type()) {
            throw new IllegalArgumentException(coll + ": send holds " + send.type() + " but recv holds " + recv.type()
                    + "; both buffers must have the same data type");
        }
    }

    private static void atLeast(String coll, String name, DeviceBuffer b, long needed) {
        if (b.count() < needed) {
            throw new IllegalArgumentException(coll + ": " + name + " holds " + b.count() + " elements but " + needed
                    + " are needed");
        }
    }

    /**
     * Overlapping {@code small} and {@code large} must be the in-place form: small starts {@code
     * slotOffsetBytes} into large. Empty ranges never overlap.
     */
    private static void overlap(String coll, DeviceBuffer small, DeviceBuffer large, long slotOffsetBytes) {
        long sa = small.address();
        long sb = small.byteSize();
        long la = large.address();
        long lb = large.byteSize();
        if (sb == 0 || lb == 0 || sa >= la + lb || la >= sa + sb) {
            return;
        }
        long off = sa - la;
        if (off != slotOffsetBytes) {
            throw new IllegalArgumentException(coll + ": send and recv overlap without being in place: "
                    + (slotOffsetBytes == 0 ? "send starts " + off + " bytes into recv, while in place they must be the same memory"
                    : "the small buffer starts " + off + " bytes into the large one, while in place it must be this rank's slot, at byte "
                    + slotOffsetBytes));
        }
    }
}
