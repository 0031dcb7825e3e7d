package org.jccl.cuda.internal;

/**
 * The layout of one rank's peer-mapped area: the signal words through which the ranks' kernels
 * synchronise, then the one-shot all-reduce's inbox and the push scratch (every offset in one place,
 * like jccl-core's ShmRingDescriptor and {@link KernelArgs}). Every rank allocates one area
 * ({@link #bytes()}); each peer maps it (CUDA IPC or peer access) and stores into it. The signal words
 * are zeroed before first use and only grow afterwards (epochs, sequence numbers), so no word is ever
 * reset between operations.
 *
 * <pre>
 *  word                                                   (uint64 words; jccl_kernels.cu #define SIG_*)
 *      0 +-----------------------------------------------------------------+
 *        | START [block 256][src rank 8]  start barriers, per-block flags   |  block_barrier, flag_round,
 *   2048 +-----------------------------------------------------------------+  one-shot flags, chain-async
 *        | END [block][src rank]          end barriers                      |  "started"
 *   4096 +-----------------------------------------------------------------+
 *        | READY [receiver rank] (8) | DONE [sender rank] (8) | COUNTER (1)  |  jccl_p2p
 *   4113 +-----------------------------------------------------------------+
 *        | (free)                                                           |
 *   4200 +-----------------------------------------------------------------+
 *        | SELFTEST [src rank][2]: patterns written by the peers            |  creation's self-test (host
 *   4216 | SELFTEST own pattern (2) | read back (2)                         |  copies only, no kernel)
 *   4220 +-----------------------------------------------------------------+
 *        | (free)                                                           |
 *   4352 +-----------------------------------------------------------------+
 *        | PIPE: broadcast rounds, stored by the predecessor:               |  jccl_bcast
 *        |   chain [block], chain-async [block][parity], warp chain [warp]  |  (at most 1792 warps)
 *   6144 +-----------------------------------------------------------------+
 *        | CE arrived [lane 4][src rank] | freed [src] | done/ready [src]    |  jccl_flags (copy engines)
 *   6192 +-----------------------------------------------------------------+
 *        | (free)                                                           |
 *   6208 +-----------------------------------------------------------------+
 *        | RING_ARRIVED [block] | RING_FREED [block]                        |  ring all-reduce
 *   6720 +-----------------------------------------------------------------+
 *        | (free)                                                           |
 *   8192 +-----------------------------------------------------------------+
 *        | GUARD [epoch parity][block][src rank]: the one-shot's guard words |  oneshot, oneshot_release
 *  12288 +-----------------------------------------------------------------+  = WORDS (96 KiB)
 *
 *  byte
 *  WORDS x 8 +-------------------------------------------------------------+
 *        | one-shot inbox [epoch parity 2][src rank 8] x JCCL_CUDA_ONESHOT_MAX |  oneshot (pointers passed
 *        +-------------------------------------------------------------+        in its arguments)
 *        | push scratch [src rank, ranks] x JCCL_CUDA_PUSH_SLOT         |  push (a slot per source),
 *        +-------------------------------------------------------------+  ring (the whole region),
 *                                                                         copy engines (4 slots per source)
 * </pre>
 *
 * The kernels know only the word indices (jccl_kernels.cu {@code #define SIG_*}, mirrored here and
 * compared by SignalAreaTest, which parses the kernel source); the inbox and the scratch reach them
 * as pointers in their argument blocks.
 */
public final class SignalArea {
    public static final int MAX_RANKS = KernelArgs.MAX_RANKS;
    public static final int MAX_BLOCKS = KernelArgs.MAX_BLOCKS;

    /** Start barriers and per-block flags: [block][src rank]. */
    public static final int START = 0;
    /** End barriers: [block][src rank]. */
    public static final int END = MAX_BLOCKS * MAX_RANKS;
    /** jccl_p2p: [receiver rank], stored at the sender. */
    public static final int READY = 2 * MAX_BLOCKS * MAX_RANKS;
    /** jccl_p2p: [sender rank], stored at the receiver. */
    public static final int DONE = READY + MAX_RANKS;
    /** jccl_p2p: local count of finished blocks. */
    public static final int COUNTER = DONE + MAX_RANKS;
    /** The creation self-test's words: [src rank][2] written by the peers, then this rank's pattern (2) and read-back (2). */
    public static final int SELFTEST = 4200;
    /** Broadcast pipeline flags: [block], [block][parity] or [warp]. */
    public static final int PIPE = 4352;
    /** Copy-engine flags (jccl_flags): "arrived" [lane][src rank]. */
    public static final int CE = 6144;
    /** Lanes with "arrived" words of their own (JCCL_CUDA_CE_LANES is at most this). */
    public static final int CE_LANES = 4;
    /** Copy-engine flags: "slot freed" [src rank]. */
    public static final int CE_FREED = CE + CE_LANES * MAX_RANKS;
    /** Copy-engine flags: "done" [src rank] (the broadcast's "ready" too). */
    public static final int CE_DONE = CE_FREED + MAX_RANKS;
    /** Ring all-reduce: [block], transfers landed here, stored by the predecessor. */
    public static final int RING_ARRIVED = 6208;
    /** Ring all-reduce: [block], stored by the successor. */
    public static final int RING_FREED = 6464;
    /** The one-shot all-reduce's mismatch guard words: [epoch parity][block][src rank]. */
    public static final int GUARD = 8192;
    /** Words of each rank's signal area. */
    public static final int WORDS = GUARD + 2 * MAX_BLOCKS * MAX_RANKS;
    /** Bytes of the signal words (96 KiB). */
    public static final long WORDS_BYTES = 8L * WORDS;
    /** Most pipeline flags of the broadcasts (the warp chain's warps: the host caps its grid at this / 16 blocks). */
    public static final int PIPE_FLAGS = CE - PIPE;

    /** Slots per block of the ring all-reduce in the push scratch region (jccl_kernels.cu RING_SLOTS). */
    public static final int RING_SLOTS = 4;
    /** Slots per source of the copy-engine reductions in that source's push scratch slot. */
    public static final int CE_SLOTS = 4;

    /** Index of {@code src}'s guard word for block {@code block} of operations of epoch parity {@code parity}. */
    public static int guardWord(long parity, int block, int src) {
        return GUARD + (int) (((parity & 1) * MAX_BLOCKS + block) * MAX_RANKS + src);
    }

    /** Index of the copy-engine "arrived" word of {@code lane} for data from {@code src}. */
    public static int ceArrived(int lane, int src) {
        return CE + MAX_RANKS * lane + src;
    }

    /** Index of the copy-engine "slot freed" word stored by {@code src}. */
    public static int ceFreed(int src) {
        return CE_FREED + src;
    }

    /** Index of the copy-engine "done" (broadcast: "ready") word stored by {@code src}. */
    public static int ceDone(int src) {
        return CE_DONE + src;
    }

    /** Index of the first of the two self-test words peer {@code src} writes into this area. */
    public static int selfTestFrom(int src) {
        return SELFTEST + 2 * src;
    }

    /** Index of the first of this rank's own self-test words: its pattern (2 words), then the read-back (2 words). */
    public static final int SELFTEST_OWN = SELFTEST + 2 * MAX_RANKS;

    /** Device address of word {@code index} of the area at {@code area}. */
    public static long word(long area, int index) {
        return area + 8L * index;
    }

    private final long oneshotMax;
    private final long pushSlot;
    private final int ranks;

    /**
     * The area of a communicator of {@code ranks} ranks: {@code oneshotMax} bytes per inbox slot
     * (JCCL_CUDA_ONESHOT_MAX, already rounded and capped), {@code pushSlot} per push scratch slot.
     */
    public SignalArea(long oneshotMax, long pushSlot, int ranks) {
        this.oneshotMax = oneshotMax;
        this.pushSlot = pushSlot;
        this.ranks = ranks;
    }

    /** Bytes of each rank's area. */
    public long bytes() {
        return WORDS_BYTES + 2L * MAX_RANKS * oneshotMax + (long) ranks * pushSlot;
    }

    /** Bytes of one inbox slot (JCCL_CUDA_ONESHOT_MAX). */
    public long oneshotMax() {
        return oneshotMax;
    }

    /** Bytes of one push scratch slot (JCCL_CUDA_PUSH_SLOT). */
    public long pushSlot() {
        return pushSlot;
    }

    /** Address of the inbox slot, in the area at {@code area}, for data from {@code src} in operations of {@code parity}. */
    public long inbox(long area, long parity, int src) {
        return area + WORDS_BYTES + (parity * MAX_RANKS + src) * oneshotMax;
    }

    /** Address of the push scratch slot, in the area at {@code area}, for data from {@code src}. */
    public long pushScratch(long area, int src) {
        return area + WORDS_BYTES + 2L * MAX_RANKS * oneshotMax + src * pushSlot;
    }
}
