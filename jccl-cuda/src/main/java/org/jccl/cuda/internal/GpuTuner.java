package org.jccl.cuda.internal;

/**
 * Which kernel variant runs a GPU collective, and on how many thread blocks: every threshold of
 * jccl's GPU communicator in one table (as NCCL keeps its in src/graph/tuning.cc), each with the
 * measurement behind it (4x H200 unless said otherwise; docs/PERFORMANCE.md has the sittings).
 * Inputs: the collective, its bytes or count, the number of ranks and the settings (a variant forced
 * by JCCL_CUDA_ALLREDUCE, _BROADCAST, _REDUCE_SCATTER, _ALLTOALL, the grid by JCCL_CUDA_NBLOCKS);
 * output: an enum variant, which the plans launch. Pure: no GPU, no state beyond its inputs.
 *
 * <p>Every rank must reach the same choice for the same call (the blocks of all ranks meet in
 * per-block flags, and the one-shot all-reduce exchanges no record), so nothing here may depend on
 * anything but the call, the rank count, the settings and {@code maxBlocks} (the smallest SM count
 * among the ranks).
 */
public final class GpuTuner {
    /** A variant's name in its setting. */
    public interface Named {
        String settingName();
    }

    /** All-reduce variants (JCCL_CUDA_ALLREDUCE), in the order the setting's error lists them. */
    public enum AllReduce implements Named {
        /** Pushes into every peer's inbox, each rank reduces its own (no record exchanged; at most JCCL_CUDA_ONESHOT_MAX). */
        ONESHOT("oneshot"),
        /** Loads slice r from every peer, stores it to every peer. */
        TWOSHOT("twoshot"),
        /** Two-shot by stores only, through the push scratch. */
        PUSH("push"),
        /** Push, the reduced slice stored locally, then to one peer after another. */
        PUSH_SERIAL("push-serial"),
        /** Copy engines write the slices into the owners' scratch, a kernel reduces, copy engines write the result. */
        CE("ce"),
        /** Reduce-scatter then all-gather around the ring: every GPU stores to its successor only. */
        RING("ring");

        private final String name;

        AllReduce(String name) {
            this.name = name;
        }

        @Override
        public String settingName() {
            return name;
        }
    }

    /** Broadcast variants (JCCL_CUDA_BROADCAST), in the order the setting's error lists them. */
    public enum Broadcast implements Named {
        /** Pipelined chain root -> root+1 -> ..., a pipeline per block. */
        CHAIN("chain"),
        /** The chain with a pipeline per warp. */
        WARP_CHAIN("warp-chain"),
        /** The block chain with its per-round flags in two signalling warps, off the copying warps' path. */
        CHAIN_ASYNC("chain-async"),
        /** The root stores slice j into rank j, which forwards it (two stages). */
        PIPE("pipe"),
        /** Rank j loads slice j from the root and stores it to the other non-roots. */
        PULL("pull"),
        /** Rank r loads slice r of the root's buffer and stores it into every output. */
        SPREAD("spread"),
        /** A chain whose copy engines forward the pieces. */
        CE("ce");

        private final String name;

        Broadcast(String name) {
            this.name = name;
        }

        @Override
        public String settingName() {
            return name;
        }
    }

    /** Reduce-scatter variants (JCCL_CUDA_REDUCE_SCATTER). */
    public enum ReduceScatter implements Named {
        /** One kernel loads every peer's block and reduces it. */
        LOAD("load"),
        /** Copy engines write each block into its owner's scratch, a kernel reduces. */
        CE("ce");

        private final String name;

        ReduceScatter(String name) {
            this.name = name;
        }

        @Override
        public String settingName() {
            return name;
        }
    }

    /** All-to-all variants (JCCL_CUDA_ALLTOALL). */
    public enum AllToAll implements Named {
        /** The blocks split over the peers: every link busy at once. */
        SPLIT("split"),
        /** One peer after another, in an order rotated by rank. */
        SERIAL("serial");

        private final String name;

        AllToAll(String name) {
            this.name = name;
        }

        @Override
        public String settingName() {
            return name;
        }
    }

    // ---- all-reduce
    /**
     * Smallest all-reduce (bytes) auto runs as a ring on 3 or more GPUs: level with push at 64 MB, ahead from 128 MB (366
     * against push's 352 and NCCL's 361-363 GB/s at 4-8 GB).
     */
    public static final long RING_MIN = 64L << 20;
    /** The same on 2 GPUs: the ring is behind push up to 128 MB, ahead from 512 MB to 8 GB. */
    public static final long RING_MIN_2 = 512L << 20;

    // ---- broadcast
    /** Broadcasts up to this many bytes use spread (latency dominates). */
    public static final long SPREAD_MAX = 512 << 10;
    /** Broadcasts up to this many bytes use pull. */
    public static final long PULL_MAX = 8L << 20;
    /**
     * Broadcasts above this many bytes and below {@link #CHAIN_ASYNC_MIN} use the warp chain: ahead of the block chain from
     * 64 MB to 128 MB (256 against 226 GB/s and 302 against 259, two sittings), level at 32 MB, behind from 256 MB
     * (sittings J/K); chain-async took over from 64 MB later.
     */
    public static final long WARP_CHAIN_ABOVE = 32L << 20;
    /**
     * Broadcasts from this many bytes up to {@link #CHAIN_ASYNC_MAX} use chain-async: 0.95x NCCL at 64 MB where the warp chain
     * was 0.78-0.80x, 0.98x at 128 MB and 256 MB, level with the chain at 512 MB and behind it from 4 GB (sittings N/O).
     */
    public static final long CHAIN_ASYNC_MIN = 64L << 20;
    public static final long CHAIN_ASYNC_MAX = 512L << 20;
    /**
     * The chain's grid: each round costs every block a flag wait whose price grows with the number of blocks, so mid sizes
     * run on fewer, larger blocks: 32 blocks best up to 128 MB (at 64 MB), 64 from 256 MB to 2 GB, every SM from 4 GB.
     */
    public static final long CHAIN_32_BLOCKS_MAX = 128L << 20;
    public static final long CHAIN_64_BLOCKS_MAX = 2L << 30;
    /** Bytes per block (chain, pipe) or warp (warp chain) per round of the pipelined broadcasts, at most. */
    public static final long BCAST_PART = 64 * 1024;
    /** The warp chain's parts, at least (every part pays a release fence). */
    public static final long WARP_PART_MIN = 512;
    /**
     * The warp chain's blocks: 32 (measured best of 16-132 from 64 MB to 512 MB: more warps mean smaller parts, and every
     * part pays a release fence); at most {@link #WARP_CHAIN_MAX_BLOCKS} even with JCCL_CUDA_NBLOCKS.
     */
    public static final int WARP_CHAIN_BLOCKS = 32;
    /** One SIG_PIPE flag per warp: 16 warps per block, {@link SignalArea#PIPE_FLAGS} flags. */
    public static final int WARP_CHAIN_MAX_BLOCKS = SignalArea.PIPE_FLAGS / (Kernels.THREADS / 32);
    /** chain-async's blocks: 32 capped the rate at ~315 GB/s, 48 and 96 measured slower than 64. */
    public static final int CHAIN_ASYNC_BLOCKS = 64;
    /**
     * chain-async's parts per block and round unless JCCL_CUDA_BCAST_PART (16 KiB: a round's barriers and flags cost as much
     * as its copy; a fixed number of rounds instead: the pipeline fill grows with the size).
     */
    public static final long CHAIN_ASYNC_PART = 64 * 1024;

    /** A kernel's grid and the bytes each block (or warp) moves per round. */
    public record Grid(int blocks, long part) {
    }

    private final GpuSettings settings;
    private final int size;
    private final int maxBlocks;

    /**
     * @param size ranks of the communicator
     * @param maxBlocks most blocks of a kernel: the smallest SM count among the ranks' GPUs, at most {@link KernelArgs#MAX_BLOCKS}
     */
    public GpuTuner(GpuSettings settings, int size, int maxBlocks) {
        this.settings = settings;
        this.size = size;
        this.maxBlocks = maxBlocks;
    }

    public GpuSettings settings() {
        return settings;
    }

    /**
     * The all-reduce of {@code count} elements ({@code bytes} bytes). auto: one-shot up to JCCL_CUDA_ONESHOT_MAX, then push
     * (ahead of two-shot at every size from 512 KB: two-shot's loads of rotating peer buffers pay remote TLB misses), the
     * ring from {@link #RING_MIN} ({@link #RING_MIN_2} on 2 GPUs). Forced: ce, ring and push only with 2+ ranks and
     * elements, oneshot only where it fits (else two-shot, which runs anything). ce and push-serial only when asked: ce
     * 240-270 GB/s against push's 351 at 1-8 GB (copy-engine reads from peers are slower than SM stores), push-serial ahead
     * in one sitting (356 against 351 GB/s from 256 MB), behind in two others (308-346).
     */
    public AllReduce allReduce(long count, long bytes) {
        AllReduce forced = settings.allReduce();
        boolean moves = size > 1 && count > 0;
        if (moves && forced == AllReduce.CE) {
            return AllReduce.CE;
        }
        if (moves && (forced == AllReduce.RING || forced == null && bytes >= (size == 2 ? RING_MIN_2 : RING_MIN))) {
            return AllReduce.RING;
        }
        boolean fitsOneShot = bytes <= settings.oneshotMax() && size > 1;
        if (moves && (forced == AllReduce.PUSH || forced == AllReduce.PUSH_SERIAL || forced == null && !fitsOneShot)) {
            return forced == AllReduce.PUSH_SERIAL ? AllReduce.PUSH_SERIAL : AllReduce.PUSH;
        }
        if (fitsOneShot && (forced == AllReduce.ONESHOT || forced == null)) {
            return AllReduce.ONESHOT;
        }
        return AllReduce.TWOSHOT;
    }

    /**
     * The broadcast of {@code bytes}: spread alone; forced as set; auto spread while latency dominates, pull up to 8 MB,
     * the chain above, with a pipeline per warp above 32 MB and chain-async from 64 MB to 512 MB (the two-stage pipe was
     * not reliably ahead of any of them anywhere; ce measured slower than the chain, so auto never picks it).
     */
    public Broadcast broadcast(long bytes) {
        if (size == 1) {
            return Broadcast.SPREAD;
        }
        if (settings.broadcast() != null) {
            return settings.broadcast();
        }
        if (bytes <= SPREAD_MAX) {
            return Broadcast.SPREAD;
        }
        if (bytes <= PULL_MAX) {
            return Broadcast.PULL;
        }
        if (bytes >= CHAIN_ASYNC_MIN && bytes <= CHAIN_ASYNC_MAX) {
            return Broadcast.CHAIN_ASYNC;
        }
        return bytes > WARP_CHAIN_ABOVE && bytes < CHAIN_ASYNC_MIN ? Broadcast.WARP_CHAIN : Broadcast.CHAIN;
    }

    /** The reduce-scatter of {@code count} elements per rank: ce only when asked (slower than load), with 2+ ranks and elements. */
    public ReduceScatter reduceScatter(long count) {
        return size > 1 && count > 0 && settings.reduceScatter() == ReduceScatter.CE ? ReduceScatter.CE : ReduceScatter.LOAD;
    }

    /** The all-to-all: split unless serial is asked for. */
    public AllToAll allToAll() {
        return settings.allToAll() == AllToAll.SERIAL ? AllToAll.SERIAL : AllToAll.SPLIT;
    }

    /**
     * Blocks for a kernel whose busiest rank moves {@code bytes}: JCCL_CUDA_NBLOCKS, else two 16-byte vectors per thread,
     * at most {@code maxBlocks}; the same on every rank (it depends on the count only).
     */
    public int blocksFor(long bytes) {
        if (settings.nblocks() > 0) {
            return Math.min(settings.nblocks(), KernelArgs.MAX_BLOCKS);
        }
        long vecs = Align.ceilDiv(Math.max(bytes, 1), 16);
        long b = Align.ceilDiv(vecs, Kernels.THREADS * 2L);
        return (int) Math.max(1, Math.min(b, maxBlocks));
    }

    /** The grid of the pipelined broadcast {@code v} (chain, warp-chain, chain-async or pipe) of {@code total} bytes. */
    public Grid broadcastGrid(Broadcast v, long total) {
        boolean fixed = settings.nblocks() > 0;
        switch (v) {
            case CHAIN -> {
                int blocks = blocksFor(total);
                if (!fixed) {
                    blocks = Math.min(blocks, total <= CHAIN_32_BLOCKS_MAX ? 32 : total <= CHAIN_64_BLOCKS_MAX ? 64 : maxBlocks);
                }
                // about 32 rounds or more; parts of at least 4 KiB where the data allows
                long part = Math.max(16, Math.min(BCAST_PART, Align.roundUp(Align.ceilDiv(total, blocks * 32L), 16)));
                part = Math.max(part, Math.min(4096, Align.roundUp(Align.ceilDiv(total, blocks), 16)));
                return new Grid(blocks, part);
            }
            case WARP_CHAIN -> {
                // about 32 rounds, parts of 512 B to 64 KiB per warp
                int blocks = Math.min(fixed ? blocksFor(total) : Math.min(blocksFor(total), WARP_CHAIN_BLOCKS), WARP_CHAIN_MAX_BLOCKS);
                long warps = (long) blocks * (Kernels.THREADS / 32);
                long part = Math.max(WARP_PART_MIN, Math.min(BCAST_PART, Align.roundUp(Align.ceilDiv(total, warps * 32L), 16)));
                return new Grid(blocks, part);
            }
            case CHAIN_ASYNC -> {
                int blocks = fixed ? blocksFor(total) : Math.min(blocksFor(total), CHAIN_ASYNC_BLOCKS);
                return new Grid(blocks, settings.bcastPart() > 0 ? settings.bcastPart() : CHAIN_ASYNC_PART);
            }
            case PIPE -> {
                // n-1 slices, one per non-root rank
                long slice = Align.roundUp(Align.ceilDiv(total, size - 1), 16);
                int blocks = blocksFor(slice);
                return new Grid(blocks, Math.min(BCAST_PART, Align.roundUp(Align.ceilDiv(slice, blocks), 16)));
            }
            default -> throw new IllegalArgumentException("no pipelined grid for broadcast " + v.settingName());
        }
    }

    /** Blocks per peer of the split all-to-all, whose blocks are {@code blockBytes} each; the grid is size() times this. */
    public int allToAllBlocksPerPeer(long blockBytes) {
        return settings.nblocks() > 0 ? Math.max(1, blocksFor(blockBytes) / size)
                : Math.max(1, Math.min(blocksFor(blockBytes), maxBlocks / size));
    }
}
