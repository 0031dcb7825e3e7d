package org.jccl.cuda.internal;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.jccl.JcclException;
import org.jccl.cuda.CudaException;

/**
 * The host-mapped words through which a communicator's kernels report failures (jccl_kernels.cu:
 * {@code report}, {@code report_mismatch}), and their meaning for the host. Word 0 is the abort
 * word the host sets; the kernels' status words follow: code, epoch (the operation's number), the
 * peer, the block, and for a mismatch the peer's guard word and this rank's. The first failure
 * wins (an atomic compare-and-swap on the code); a kernel writes the other words right after it.
 */
public final class KernelStatus {
    /** Bytes of the host-mapped block. */
    public static final long BYTES = 64;
    /** Word indices. */
    public static final int ABORT = 0;
    public static final int CODE = 1;
    public static final int EPOCH = 2;
    public static final int PEER = 3;
    public static final int BLOCK = 4;
    public static final int THEIRS = 5;
    public static final int MINE = 6;

    /** Codes (jccl_kernels.cu ERR_*). */
    public static final long ERR_ABORTED = 1;
    public static final long ERR_TIMEOUT = 2;
    public static final long ERR_MISMATCH = 3;

    /**
     * Bit 0 of a guard word stored by {@code jccl_oneshot_release}: the rank did not run the one-shot
     * kernel at that operation (its call exchanged records and failed on the host). OpGuard's words
     * leave bit 0 clear.
     */
    public static final long RELEASED = 1;

    private KernelStatus() {
    }

    /** The recorded code, 0 when no kernel has failed. */
    public static long code(MemorySegment words) {
        return words.get(ValueLayout.JAVA_LONG, 8L * CODE);
    }

    /**
     * The exception for the failure recorded in {@code words}, or null when none is. {@code rank} and
     * {@code device} name this rank; {@code timeoutNs} is JCCL_CUDA_WAIT_TIMEOUT. For a mismatch this
     * waits (at most 1 s) for the words that follow the code, which the kernel writes just after it.
     */
    public static JcclException decode(MemorySegment words, int rank, String device, long timeoutNs) {
        long code = code(words);
        if (code == 0) {
            return null;
        }
        if (code == ERR_MISMATCH) {
            long deadline = System.nanoTime() + 1_000_000_000L;
            while (words.get(ValueLayout.JAVA_LONG, 8L * MINE) == 0 && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
        }
        long e = words.get(ValueLayout.JAVA_LONG, 8L * EPOCH);
        long peer = words.get(ValueLayout.JAVA_LONG, 8L * PEER);
        if (code == ERR_MISMATCH) {
            return mismatch(rank, e, (int) peer, words.get(ValueLayout.JAVA_LONG, 8L * THEIRS),
                    words.get(ValueLayout.JAVA_LONG, 8L * MINE));
        }
        String why = code == ERR_ABORTED ? "was aborted"
                : code == ERR_TIMEOUT ? "waited " + timeoutNs / 1_000_000_000L + " s for rank " + peer + " (JCCL_CUDA_WAIT_TIMEOUT) and gave"
                        + " up: rank " + peer + " never reached the same operation (it died, hangs, or called a different sequence of"
                        + " collectives)"
                : "failed with kernel status code " + code;
        return new CudaException("rank " + rank + " (" + device + "): GPU operation #" + e + " " + why
                + "; this communicator is unusable now, create a new one");
    }

    /**
     * The MISMATCH that rank {@code rank}'s one-shot all-reduce kernel found at operation {@code epoch}:
     * rank {@code q}'s guard word {@code theirs} (with {@link #RELEASED}: q did not run the one-shot
     * there) against this rank's {@code mine}.
     */
    static JcclException mismatch(int rank, long epoch, int q, long theirs, long mine) {
        String kept = "; no output was written: the receive buffer holds what it held";
        if ((theirs & RELEASED) != 0) {
            long call = theirs & ~RELEASED;
            if (call == mine) {
                return Exchange.sameCallOtherAlgorithm(rank, epoch, q, mine, "this rank ran it as " + Exchange.ONESHOT + " and rank " + q
                        + " did not");
            }
            return Exchange.mismatch(rank, epoch, q, call, mine, "found by the mismatch guard in this rank's one-shot all-reduce"
                    + " kernel: rank " + q + "'s call exchanges records instead, and it found the difference too" + kept);
        }
        return Exchange.mismatch(rank, epoch, q, theirs, mine, "found by the mismatch guard in the one-shot all-reduce kernel" + kept);
    }
}
