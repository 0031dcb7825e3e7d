package org.jccl.cuda.internal;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * The argument blocks of jccl's kernels, byte for byte as {@code struct Args} and {@code struct
 * P2pArgs} in jccl_kernels.cu (a descriptor class per layout: offsets are named here once; the
 * signal area the kernels synchronise through is {@link SignalArea}). Each instance owns one
 * native block plus the one-entry kernelParams array that points at it; the driver copies the block
 * at launch, so one instance is reused for every launch of a communicator. Not thread safe.
 */
public final class KernelArgs {
    public static final int MAX_RANKS = 8;
    public static final int MAX_BLOCKS = 256;

    /** Args.mode bits. */
    public static final int MODE_START = 1;
    public static final int MODE_END = 2;
    public static final int MODE_VEC = 4;
    public static final int MODE_MULTI_DST = 8;
    public static final int MODE_SPLIT = 16;
    public static final int MODE_CHAIN = 32;
    public static final int MODE_WARPS = 64;
    public static final int MODE_ROLES = 128;

    /** PushArgs.vec bits (jccl_kernels.cu PUSH_*): 16-byte accesses; phase 2 stores locally, then to one peer after another. */
    public static final int PUSH_VEC = 1;
    public static final int PUSH_SERIAL = 2;

    // struct Args
    static final long SRC = 0;
    static final long DST = 64;
    static final long SIGNAL = 128;
    static final long ABORT = 192;
    static final long STATUS = 200;
    static final long COUNT = 208;
    static final long EPOCH = 216;
    static final long TIMEOUT = 224;
    static final long NSRC = 232;
    static final long NDST = 236;
    static final long RANK = 240;
    static final long NRANKS = 244;
    static final long MODE = 248;
    static final long DIVISOR = 252;
    static final long ARGS_BYTES = 256;

    // struct P2pArgs
    static final long P_SEND_SRC = 0;
    static final long P_SEND_DST = 64;
    static final long P_SEND_BYTES = 128;
    static final long P_SEND_SEQ = 192;
    static final long P_RECV_SEQ = 256;
    static final long P_SIGNAL = 320;
    static final long P_ABORT = 384;
    static final long P_STATUS = 392;
    static final long P_TIMEOUT = 400;
    static final long P_BLOCKS_BASE = 408;
    static final long P_SEND_PEER = 416;
    static final long P_RECV_PEER = 448;
    static final long P_NSEND = 480;
    static final long P_NRECV = 484;
    static final long P_RANK = 488;
    static final long P_VEC = 492;
    static final long P2P_BYTES = 496;

    // struct OneShotArgs
    static final long O_IN = 0;
    static final long O_OUT = 8;
    static final long O_PEER_INBOX = 16;
    static final long O_MY_INBOX = 80;
    static final long O_SIGNAL = 144;
    static final long O_ABORT = 208;
    static final long O_STATUS = 216;
    static final long O_COUNT = 224;
    static final long O_EPOCH = 232;
    static final long O_TIMEOUT = 240;
    static final long O_RANK = 248;
    static final long O_NRANKS = 252;
    static final long O_DIVISOR = 256;
    static final long O_VEC = 260;
    static final long O_GUARD = 264;
    static final long ONESHOT_BYTES = 272;

    // struct PushArgs
    static final long U_IN = 0;
    static final long U_OUT = 8;
    static final long U_PEER_SCRATCH = 16;
    static final long U_MY_SCRATCH = 80;
    static final long U_PEER_OUT = 144;
    static final long U_SIGNAL = 208;
    static final long U_ABORT = 272;
    static final long U_STATUS = 280;
    static final long U_COUNT = 288;
    static final long U_SLICE = 296;
    static final long U_EPOCH = 304;
    static final long U_TIMEOUT = 312;
    static final long U_RANK = 320;
    static final long U_NRANKS = 324;
    static final long U_DIVISOR = 328;
    static final long U_VEC = 332;
    static final long PUSH_BYTES = 336;

    // struct FlagArgs
    static final long F_SET = 0;
    static final long F_WAIT = 64;
    static final long F_WAIT_VALUE = 128;
    static final long F_SET_VALUE = 192;
    static final long F_ABORT = 200;
    static final long F_STATUS = 208;
    static final long F_TIMEOUT = 216;
    static final long F_EPOCH = 224;
    static final long F_WAIT_PEER = 232;
    static final long F_NSET = 264;
    static final long F_NWAIT = 268;
    static final long FLAG_BYTES = 272;

    private final MemorySegment block;
    private final MemorySegment params;

    private KernelArgs(Arena arena, long bytes) {
        this.block = arena.allocate(bytes, 16);
        this.params = arena.allocate(ADDRESS);
        params.set(ADDRESS, 0, block);
    }

    public static KernelArgs collective(Arena arena) {
        return new KernelArgs(arena, ARGS_BYTES);
    }

    public static KernelArgs push(Arena arena) {
        return new KernelArgs(arena, PUSH_BYTES);
    }

    // ---- struct PushArgs
    public void pushCommon(long abortFlag, long status, long timeoutNs, int rank, int nranks) {
        block.set(JAVA_LONG, U_ABORT, abortFlag);
        block.set(JAVA_LONG, U_STATUS, status);
        block.set(JAVA_LONG, U_TIMEOUT, timeoutNs);
        block.set(JAVA_INT, U_RANK, rank);
        block.set(JAVA_INT, U_NRANKS, nranks);
        block.set(JAVA_INT, U_DIVISOR, nranks);
    }

    public void pushSignal(int i, long p) {
        block.set(JAVA_LONG, U_SIGNAL + 8L * i, p);
    }

    public void pushPeer(int q, long peerScratch, long myScratch, long peerOut) {
        block.set(JAVA_LONG, U_PEER_SCRATCH + 8L * q, peerScratch);
        block.set(JAVA_LONG, U_MY_SCRATCH + 8L * q, myScratch);
        block.set(JAVA_LONG, U_PEER_OUT + 8L * q, peerOut);
    }

    /** {@code serial}: phase 2 stores the reduced slice locally, then to one peer after another. */
    public void pushOp(long in, long out, long count, long slice, long epoch, boolean vec, boolean serial) {
        block.set(JAVA_LONG, U_IN, in);
        block.set(JAVA_LONG, U_OUT, out);
        block.set(JAVA_LONG, U_COUNT, count);
        block.set(JAVA_LONG, U_SLICE, slice);
        block.set(JAVA_LONG, U_EPOCH, epoch);
        block.set(JAVA_INT, U_VEC, (vec ? PUSH_VEC : 0) | (serial ? PUSH_SERIAL : 0));
    }

    public static KernelArgs flags(Arena arena) {
        return new KernelArgs(arena, FLAG_BYTES);
    }

    // ---- struct FlagArgs
    public void flagCommon(long abortFlag, long status, long timeoutNs) {
        block.set(JAVA_LONG, F_ABORT, abortFlag);
        block.set(JAVA_LONG, F_STATUS, status);
        block.set(JAVA_LONG, F_TIMEOUT, timeoutNs);
    }

    /** Starts a flags launch: nothing set, nothing waited for; {@code epoch} is reported when a wait fails. */
    public void flagReset(long epoch) {
        block.set(JAVA_LONG, F_EPOCH, epoch);
        block.set(JAVA_INT, F_NSET, 0);
        block.set(JAVA_INT, F_NWAIT, 0);
    }

    /** Adds a flag to store {@code value} into (every stored flag of one launch gets the same value). */
    public void flagSet(long addr, long value) {
        int i = block.get(JAVA_INT, F_NSET);
        block.set(JAVA_LONG, F_SET + 8L * i, addr);
        block.set(JAVA_LONG, F_SET_VALUE, value);
        block.set(JAVA_INT, F_NSET, i + 1);
    }

    /** Adds a wait until the flag at {@code addr} (set by {@code peer}) reaches {@code value}. */
    public void flagWait(long addr, long value, int peer) {
        int i = block.get(JAVA_INT, F_NWAIT);
        block.set(JAVA_LONG, F_WAIT + 8L * i, addr);
        block.set(JAVA_LONG, F_WAIT_VALUE + 8L * i, value);
        block.set(JAVA_INT, F_WAIT_PEER + 4L * i, peer);
        block.set(JAVA_INT, F_NWAIT, i + 1);
    }

    /** Whether the launch being built sets or waits for anything. */
    public boolean flagAny() {
        return block.get(JAVA_INT, F_NSET) + block.get(JAVA_INT, F_NWAIT) > 0;
    }

    public static KernelArgs oneShot(Arena arena) {
        return new KernelArgs(arena, ONESHOT_BYTES);
    }

    // ---- struct OneShotArgs
    public void oneShotCommon(long abortFlag, long status, long timeoutNs, int rank, int nranks) {
        block.set(JAVA_LONG, O_ABORT, abortFlag);
        block.set(JAVA_LONG, O_STATUS, status);
        block.set(JAVA_LONG, O_TIMEOUT, timeoutNs);
        block.set(JAVA_INT, O_RANK, rank);
        block.set(JAVA_INT, O_NRANKS, nranks);
        block.set(JAVA_INT, O_DIVISOR, nranks);
    }

    public void oneShotSignal(int i, long p) {
        block.set(JAVA_LONG, O_SIGNAL + 8L * i, p);
    }

    public void oneShotInbox(int q, long peerInbox, long myInbox) {
        block.set(JAVA_LONG, O_PEER_INBOX + 8L * q, peerInbox);
        block.set(JAVA_LONG, O_MY_INBOX + 8L * q, myInbox);
    }

    /** {@code guard}: the call's mismatch guard word (OpGuard), compared by the kernels; 0: none (JCCL_CHECK=none). */
    public void oneShotOp(long in, long out, long count, long epoch, boolean vec, long guard) {
        block.set(JAVA_LONG, O_IN, in);
        block.set(JAVA_LONG, O_OUT, out);
        block.set(JAVA_LONG, O_COUNT, count);
        block.set(JAVA_LONG, O_EPOCH, epoch);
        block.set(JAVA_INT, O_VEC, vec ? 1 : 0);
        block.set(JAVA_LONG, O_GUARD, guard);
    }

    public static KernelArgs p2p(Arena arena) {
        return new KernelArgs(arena, P2P_BYTES);
    }

    /** The argument block (tests read it back). */
    MemorySegment block() {
        return block;
    }

    /** The kernelParams array for cuLaunchKernel. */
    public MemorySegment params() {
        return params;
    }

    public KernelArgs clear() {
        block.fill((byte) 0);
        return this;
    }

    /** Zeroes the per-operation pointers of a struct Args (src, dst), keeping the communicator's fields. */
    public void clear0() {
        block.asSlice(SRC, 2L * 8 * MAX_RANKS).fill((byte) 0);
    }

    /** Zeroes the per-group fields of a struct P2pArgs, keeping the communicator's fields. */
    public void clear0p2p() {
        block.asSlice(P_SEND_SRC, P_SIGNAL).fill((byte) 0);
        block.asSlice(P_SEND_PEER, P_NSEND + 8 - P_SEND_PEER).fill((byte) 0);
    }

    // ---- struct Args
    public void src(int i, long p) {
        block.set(JAVA_LONG, SRC + 8L * i, p);
    }

    public void dst(int i, long p) {
        block.set(JAVA_LONG, DST + 8L * i, p);
    }

    public void signal(int i, long p) {
        block.set(JAVA_LONG, SIGNAL + 8L * i, p);
    }

    public void common(long abortFlag, long status, long timeoutNs, int rank, int nranks) {
        block.set(JAVA_LONG, ABORT, abortFlag);
        block.set(JAVA_LONG, STATUS, status);
        block.set(JAVA_LONG, TIMEOUT, timeoutNs);
        block.set(JAVA_INT, RANK, rank);
        block.set(JAVA_INT, NRANKS, nranks);
    }

    public void op(long count, long epoch, int nsrc, int ndst, int mode, int divisor) {
        block.set(JAVA_LONG, COUNT, count);
        block.set(JAVA_LONG, EPOCH, epoch);
        block.set(JAVA_INT, NSRC, nsrc);
        block.set(JAVA_INT, NDST, ndst);
        block.set(JAVA_INT, MODE, mode);
        block.set(JAVA_INT, DIVISOR, divisor);
    }

    // ---- struct P2pArgs
    public void p2pSignal(int i, long p) {
        block.set(JAVA_LONG, P_SIGNAL + 8L * i, p);
    }

    public void p2pCommon(long abortFlag, long status, long timeoutNs, int rank) {
        block.set(JAVA_LONG, P_ABORT, abortFlag);
        block.set(JAVA_LONG, P_STATUS, status);
        block.set(JAVA_LONG, P_TIMEOUT, timeoutNs);
        block.set(JAVA_INT, P_RANK, rank);
    }

    public void send(int i, int peer, long src, long dst, long bytes, long seq) {
        block.set(JAVA_LONG, P_SEND_SRC + 8L * i, src);
        block.set(JAVA_LONG, P_SEND_DST + 8L * i, dst);
        block.set(JAVA_LONG, P_SEND_BYTES + 8L * i, bytes);
        block.set(JAVA_LONG, P_SEND_SEQ + 8L * i, seq);
        block.set(JAVA_INT, P_SEND_PEER + 4L * i, peer);
    }

    public void recv(int i, int peer, long seq) {
        block.set(JAVA_LONG, P_RECV_SEQ + 8L * i, seq);
        block.set(JAVA_INT, P_RECV_PEER + 4L * i, peer);
    }

    public void p2pOp(int nsend, int nrecv, boolean vec, long blocksBase) {
        block.set(JAVA_INT, P_NSEND, nsend);
        block.set(JAVA_INT, P_NRECV, nrecv);
        block.set(JAVA_INT, P_VEC, vec ? 1 : 0);
        block.set(JAVA_LONG, P_BLOCKS_BASE, blocksBase);
    }
}
