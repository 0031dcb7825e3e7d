package org.jccl.cuda.internal;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.jccl.Buffer;
import org.jccl.Communicator;
import org.jccl.DataType;
import org.jccl.ReduceOp;

/**
 * A {@link HierDevice} of host memory for tests without a GPU: "device" addresses are native host
 * addresses, the local group's collectives are a real host communicator's, copies happen at once.
 * It checks the slot discipline the GPU implementation relies on: a slot is written by copies out
 * only when it is free (released, or never used) or within its own step's copies out, the CPU's
 * cross-host leg touches it only after {@link #awaitHost}, and no more slots are busy than prepared.
 */
final class HostMemoryDevice implements HierDevice {
    private enum State { FREE, OUT, AWAITED, IN }

    private final Communicator local;
    private final Arena arena = Arena.ofShared();
    private MemorySegment shared;
    private final List<MemorySegment> perSlot = new ArrayList<>();
    private final List<MemorySegment[]> host = new ArrayList<>();
    private State[] state = new State[0];
    final List<String> trace = new ArrayList<>();

    HostMemoryDevice(Communicator local) {
        this.local = local;
    }

    private static MemorySegment at(long address, long bytes) {
        return MemorySegment.ofAddress(address).reinterpret(bytes);
    }

    private static Buffer buf(long address, long count, DataType t) {
        return address == 0 ? null : Buffer.of(at(address, t.bytes(count)), count, t);
    }

    @Override
    public int localRank() {
        return local.rank();
    }

    @Override
    public int localSize() {
        return local.size();
    }

    @Override
    public void localAllReduce(long send, long recv, long count, DataType t, ReduceOp op) {
        local.allReduce(buf(send, count, t), buf(recv, count, t), op);
    }

    @Override
    public void localReduceScatter(long send, long recv, long recvCount, DataType t, ReduceOp op) {
        local.reduceScatter(buf(send, recvCount * local.size(), t), buf(recv, recvCount, t), op);
    }

    @Override
    public void localAllGather(long send, long recv, long sendCount, DataType t) {
        local.allGather(buf(send, sendCount, t), buf(recv, sendCount * local.size(), t));
    }

    @Override
    public void localReduce(long send, long recv, long count, DataType t, ReduceOp op, int localRoot) {
        local.reduce(buf(send, count, t), buf(recv, count, t), op, localRoot);
    }

    @Override
    public void localBroadcast(long send, long recv, long count, DataType t, int localRoot) {
        local.broadcast(buf(send, count, t), buf(recv, count, t), localRoot);
    }

    @Override
    public void copy(long dst, long src, long bytes) {
        MemorySegment.copy(at(src, bytes), 0, at(dst, bytes), 0, bytes);
    }

    @Override
    public void prepare(long sharedBytes, long perSlotBytes, long hostPerSlot, int slots) {
        shared = arena.allocate(Math.max(16, sharedBytes), 256);
        perSlot.clear();
        host.clear();
        state = new State[slots];
        for (int s = 0; s < slots; s++) {
            perSlot.add(arena.allocate(Math.max(16, perSlotBytes), 256));
            host.add(new MemorySegment[] {arena.allocate(Math.max(16, hostPerSlot), 256), arena.allocate(Math.max(16, hostPerSlot), 256)});
            state[s] = State.FREE;
        }
    }

    @Override
    public long scratch(int which) {
        return (which < 0 ? shared : perSlot.get(which)).address();
    }

    @Override
    public MemorySegment slot(int slot, int half) {
        return host.get(slot)[half];
    }

    @Override
    public void toHost(int slot, MemorySegment dst, long src, long bytes) {
        assertTrue(state[slot] == State.FREE || state[slot] == State.OUT, "copy out into slot " + slot + " while it is " + state[slot]);
        state[slot] = State.OUT;
        trace.add("out" + slot);
        MemorySegment.copy(at(src, bytes), 0, dst, 0, bytes);
    }

    @Override
    public void awaitHost(int slot) {
        state[slot] = State.AWAITED;
        trace.add("await" + slot);
    }

    @Override
    public void toDevice(int slot, long dst, MemorySegment src, long bytes) {
        assertTrue(state[slot] == State.AWAITED || state[slot] == State.IN, "copy in from slot " + slot + " while it is " + state[slot]);
        state[slot] = State.IN;
        trace.add("in" + slot);
        MemorySegment.copy(src, 0, at(dst, bytes), 0, bytes);
    }

    @Override
    public void released(int slot) {
        long busy = java.util.Arrays.stream(state).filter(s -> s != State.FREE).count();
        assertTrue(busy <= state.length, "more slots busy than prepared");
        state[slot] = State.FREE;
        trace.add("release" + slot);
    }

    void close() {
        arena.close();
    }
}
