package org.jccl.cli.perf;

import java.lang.foreign.MemorySegment;
import org.jccl.DataType;

/**
 * The data check shared by the host ({@link Benchmark}) and GPU ({@link GpuBenchmark}) benchmarks:
 * what one rank writes before a check run, and how many of its result elements are wrong. Both
 * work on host memory; the GPU benchmark stages its device buffers through host segments.
 */
final class DataCheck {
    private DataCheck() {
    }

    /**
     * Poisons the receive region ({@code counts.sizeBytes} bytes from the start of {@code recv})
     * and writes rank {@code rank}'s send data: at the start of {@code send} out of place, at the
     * rank's slot of {@code recv} in place. For broadcast only the root writes send data.
     */
    static void initData(Collective c, DataPattern p, Collective.Counts counts, int rank, int root, boolean inPlace,
            MemorySegment send, MemorySegment recv) {
        int ws = p.type().size();
        DataPattern.poison(recv, counts.sizeBytes(ws));
        MemorySegment data = inPlace ? recv.asSlice(counts.sendInPlaceOffset() * rank * ws) : send;
        if (c == Collective.BROADCAST) {
            if (rank == root) {
                p.fill(data, root, 0, counts.sendCount());
            }
        } else {
            p.fill(data, rank, 0, counts.sendCount());
        }
    }

    /**
     * Elements of rank {@code rank}'s result that differ from what the pattern says they must be;
     * {@code recv} is the start of the receive buffer (the result is read at the rank's slot in place).
     */
    static long countWrong(Collective c, DataPattern p, Collective.Counts counts, int rank, int nranks, int root,
            boolean inPlace, MemorySegment recv) {
        DataType t = p.type();
        MemorySegment r = recv.asSlice(inPlace ? counts.recvInPlaceOffset() * rank * t.size() : 0);
        long base = counts.paramCount();
        long poison = Elements.mask(t) & 0xA5A5_A5A5_A5A5_A5A5L;
        long wrong = 0;
        for (long i = 0; i < counts.recvCount(); i++) {
            long expected = switch (c) {
                case ALL_REDUCE -> p.reducedBits(i);
                // Only the root's receive buffer is written: elsewhere it must be left as it was.
                case REDUCE -> rank == root ? p.reducedBits(i) : inPlace ? p.bits(rank, i) : poison;
                case BROADCAST -> p.bits(root, i);
                case ALL_GATHER -> p.bits((int) (i / base), i % base);
                case REDUCE_SCATTER -> p.reducedBits(rank * base + i);
                case ALLTOALL -> p.bits((int) (i / base), rank * base + i % base);
                case SENDRECV -> p.bits((rank - 1 + nranks) % nranks, i);
            };
            if (!p.matches(expected, Elements.getBits(r, i, t))) {
                wrong++;
            }
        }
        return wrong;
    }
}
