package org.jccl.cuda.internal;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.internal.config.Setting;
import org.jccl.internal.config.Settings;

/**
 * The JCCL_CUDA_* settings of jccl's GPU communicator, read and checked once at creation into typed
 * values (sizes rounded as the kernels need them, algorithm names turned into {@link GpuTuner}'s
 * variants). A bad value fails here, naming the setting and what it may be.
 *
 * @param timeoutNs JCCL_CUDA_WAIT_TIMEOUT: how long a kernel waits for a peer
 * @param nblocks JCCL_CUDA_NBLOCKS: thread blocks of every kernel, 0: by size
 * @param oneshotMax JCCL_CUDA_ONESHOT_MAX rounded up to 256 bytes, at most 8 MiB (the inbox holds 2 x 8 slots of it)
 * @param guardOn JCCL_CHECK is not "none": calls carry the mismatch guard's word
 * @param pushSlot JCCL_CUDA_PUSH_SLOT rounded down to 256 bytes
 * @param allReduce JCCL_CUDA_ALLREDUCE; null: auto
 * @param reduceScatter JCCL_CUDA_REDUCE_SCATTER; null: auto
 * @param ceChunk JCCL_CUDA_CE_CHUNK rounded down to 256 bytes
 * @param ceLanes JCCL_CUDA_CE_LANES
 * @param ringSlice JCCL_CUDA_RING_SLICE rounded down to 256 bytes
 * @param bcastPart JCCL_CUDA_BCAST_PART rounded up to 16 bytes, 0: the tuner's
 * @param broadcast JCCL_CUDA_BROADCAST; null: auto
 * @param allToAll JCCL_CUDA_ALLTOALL; null: auto
 */
public record GpuSettings(long timeoutNs, int nblocks, long oneshotMax, boolean guardOn, long pushSlot,
                          GpuTuner.AllReduce allReduce, GpuTuner.ReduceScatter reduceScatter, long ceChunk, int ceLanes,
                          long ringSlice, long bcastPart, GpuTuner.Broadcast broadcast, GpuTuner.AllToAll allToAll) {

    /** Reads every setting from {@code config} (in this order: with two bad values, the first one's error is thrown). */
    public static GpuSettings from(Config config) {
        long timeoutNs = Settings.CUDA_WAIT_TIMEOUT.getDuration(config).toNanos();
        int nblocks = Settings.CUDA_NBLOCKS.getInt(config);
        long oneshotMax = oneshotMax(config);
        boolean guardOn = Settings.checkLevel(config) != Settings.CHECK_NONE;
        long pushSlot = pushSlot(config);
        GpuTuner.AllReduce allReduce = choice(Settings.CUDA_ALLREDUCE, config, GpuTuner.AllReduce.values());
        GpuTuner.ReduceScatter reduceScatter = choice(Settings.CUDA_REDUCE_SCATTER, config, GpuTuner.ReduceScatter.values());
        long ceChunk = Settings.CUDA_CE_CHUNK.getLong(config) / 256 * 256;
        int ceLanes = Settings.CUDA_CE_LANES.getInt(config);
        long ringSlice = Settings.CUDA_RING_SLICE.getLong(config) / 256 * 256;
        long bcastPart = Align.roundUp(Settings.CUDA_BCAST_PART.getLong(config), 16);
        GpuTuner.Broadcast broadcast = choice(Settings.CUDA_BROADCAST, config, GpuTuner.Broadcast.values());
        GpuTuner.AllToAll allToAll = choice(Settings.CUDA_ALLTOALL, config, GpuTuner.AllToAll.values());
        return new GpuSettings(timeoutNs, nblocks, oneshotMax, guardOn, pushSlot, allReduce, reduceScatter, ceChunk, ceLanes,
                ringSlice, bcastPart, broadcast, allToAll);
    }

    /** JCCL_CUDA_ONESHOT_MAX rounded to 256 bytes and capped at 8 MiB (the inbox holds 2 x 8 slots of it). */
    static long oneshotMax(Config config) {
        long v = Settings.CUDA_ONESHOT_MAX.getLong(config);
        return Math.min(8L << 20, (v + 255) / 256 * 256);
    }

    static long pushSlot(Config config) {
        return Settings.CUDA_PUSH_SLOT.getLong(config) / 256 * 256;
    }

    /** The area of a communicator of {@code ranks} ranks with these settings. */
    public SignalArea area(int ranks) {
        return new SignalArea(oneshotMax, pushSlot, ranks);
    }

    /** A setting whose value names a variant: "auto" (null) or one of {@code variants} by its name. */
    static <E extends Enum<E> & GpuTuner.Named> E choice(Setting setting, Config config, E[] variants) {
        String a = setting.getString(config).trim().toLowerCase(Locale.ROOT);
        List<String> allowed = new ArrayList<>();
        allowed.add("auto");
        for (E v : variants) {
            allowed.add(v.settingName());
        }
        if (!allowed.contains(a)) {
            throw new ConfigException(setting.name() + "=" + a + " is not one of " + String.join(", ", allowed));
        }
        for (E v : variants) {
            if (v.settingName().equals(a)) {
                return v;
            }
        }
        return null;
    }
}
