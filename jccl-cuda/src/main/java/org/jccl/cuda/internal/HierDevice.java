package org.jccl.cuda.internal;

import java.lang.foreign.MemorySegment;
import org.jccl.DataType;
import org.jccl.ReduceOp;

/**
 * What the hierarchical collectives ({@link HierPrograms}) ask of one rank's GPU: the collectives of
 * its host (the local group), copies on the caller's stream, and the pinned host slots that the
 * cross-host step reads and writes. Addresses are device addresses on the GPU; a test
 * implementation takes host memory instead (every call then runs at once).
 *
 * <p>Ordering (the GPU implementation's contract): local collectives and {@link #copy} run on the
 * caller's stream in call order. {@link #toHost} copies after the stream's work enqueued so far and
 * after the slot's previous {@link #toDevice}; {@link #awaitHost} returns once the slot's copies out
 * are done (the slot's pinned memory is then the CPU's), and throws when this rank's GPU work failed.
 * {@link #toDevice} copies once the slot's previous user ({@link #released}) has passed on the stream,
 * and the stream's later work waits for it.
 */
public interface HierDevice {
    /** Index of this rank in its host's local group, and the group's size. */
    int localRank();

    int localSize();

    void localAllReduce(long send, long recv, long count, DataType t, ReduceOp op);

    /** recv: recvCount elements; send: localSize x recvCount; in place when recv is this rank's slot of send. */
    void localReduceScatter(long send, long recv, long recvCount, DataType t, ReduceOp op);

    /** recv: localSize x sendCount; in place when send is this rank's slot of recv. */
    void localAllGather(long send, long recv, long sendCount, DataType t);

    /** recv is 0 except on the local root. */
    void localReduce(long send, long recv, long count, DataType t, ReduceOp op, int localRoot);

    /** send is 0 except on the local root. */
    void localBroadcast(long send, long recv, long count, DataType t, int localRoot);

    /** Device to device on the stream. */
    void copy(long dst, long src, long bytes);

    /**
     * Makes room for a collective: {@code shared} bytes of device scratch used on the stream only, {@code perSlot} bytes of
     * device scratch and {@code hostPerSlot} bytes of pinned memory (two halves, in and out) for each of {@code slots} slots.
     * Earlier contents are lost.
     */
    void prepare(long shared, long perSlot, long hostPerSlot, int slots);

    /** Device scratch: region -1 the shared one, else slot {@code which}'s. */
    long scratch(int which);

    /** Pinned host memory of a slot: half 0 or 1 of {@code hostPerSlot}. */
    MemorySegment slot(int slot, int half);

    void toHost(int slot, MemorySegment dst, long src, long bytes);

    void awaitHost(int slot);

    void toDevice(int slot, long dst, MemorySegment src, long bytes);

    /** The stream has enqueued everything that reads or writes the slot's memory for this step. */
    void released(int slot);
}
