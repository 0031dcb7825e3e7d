package org.jccl.cuda.internal;

import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.ConcurrentHashMap;
import org.jccl.DataType;
import org.jccl.ReduceOp;
import org.jccl.cuda.CudaException;

/**
 * jccl's kernels on one GPU: the committed fatbin ({@code jccl_kernels.fatbin}, built from
 * src/main/cuda by scripts/build-kernels.sh) loaded once into the device's primary context, and
 * its functions looked up once.
 */
public final class Kernels {
    /** Resource path of the fatbin. */
    public static final String FATBIN = "/org/jccl/cuda/jccl_kernels.fatbin";
    /** Threads per block of every kernel (the kernels' __launch_bounds__). */
    public static final int THREADS = 512;

    private static final ConcurrentHashMap<Integer, Kernels> BY_DEVICE = new ConcurrentHashMap<>();
    private static volatile byte[] image;

    private final MemorySegment[] reduce = new MemorySegment[DataType.values().length * ReduceOp.values().length];
    private final MemorySegment[] oneShot = new MemorySegment[DataType.values().length * ReduceOp.values().length];
    private final MemorySegment[] push = new MemorySegment[DataType.values().length * ReduceOp.values().length];
    private final MemorySegment[] ring = new MemorySegment[DataType.values().length * ReduceOp.values().length];
    public final MemorySegment copy;
    public final MemorySegment p2p;
    public final MemorySegment bcast;
    public final MemorySegment flags;
    /** Releases peers' one-shot kernels waiting for a rank whose call failed on the host (jccl_oneshot_release). */
    public final MemorySegment oneShotRelease;

    private Kernels(Gpu device) {
        device.makeCurrent();
        byte[] bytes = image();
        MemorySegment data = Arena.global().allocate(bytes.length + 1L, 16);
        MemorySegment.copy(bytes, 0, data, ValueLayout.JAVA_BYTE, 0, bytes.length);
        MemorySegment module;
        try {
            module = CudaDriver.moduleLoadData(data);
        } catch (CudaException e) {
            throw new CudaException("cannot load jccl's GPU kernels on " + device + " (compute capability "
                    + device.computeCapability() + "): " + e.getMessage() + "; the kernels are built for sm_90 with compute_90 PTX,"
                    + " which needs a Hopper or newer GPU and a driver for CUDA 12.4+", e.result());
        }
        for (DataType t : DataType.values()) {
            for (ReduceOp op : ReduceOp.values()) {
                reduce[t.ordinal() * ReduceOp.values().length + op.ordinal()] =
                        CudaDriver.moduleGetFunction(module, "jccl_reduce_" + t.ncclName() + "_" + op.ncclName());
                oneShot[t.ordinal() * ReduceOp.values().length + op.ordinal()] =
                        CudaDriver.moduleGetFunction(module, "jccl_oneshot_" + t.ncclName() + "_" + op.ncclName());
                push[t.ordinal() * ReduceOp.values().length + op.ordinal()] =
                        CudaDriver.moduleGetFunction(module, "jccl_push_" + t.ncclName() + "_" + op.ncclName());
                ring[t.ordinal() * ReduceOp.values().length + op.ordinal()] =
                        CudaDriver.moduleGetFunction(module, "jccl_ring_" + t.ncclName() + "_" + op.ncclName());
            }
        }
        copy = CudaDriver.moduleGetFunction(module, "jccl_copy");
        p2p = CudaDriver.moduleGetFunction(module, "jccl_p2p");
        bcast = CudaDriver.moduleGetFunction(module, "jccl_bcast");
        flags = CudaDriver.moduleGetFunction(module, "jccl_flags");
        oneShotRelease = CudaDriver.moduleGetFunction(module, "jccl_oneshot_release");
    }

    /** The kernels on {@code device}, loaded on first use. */
    public static Kernels on(Gpu device) {
        return BY_DEVICE.computeIfAbsent(device.ordinal(), k -> new Kernels(device));
    }

    public MemorySegment reduce(DataType type, ReduceOp op) {
        return reduce[type.ordinal() * ReduceOp.values().length + op.ordinal()];
    }

    public MemorySegment push(DataType type, ReduceOp op) {
        return push[type.ordinal() * ReduceOp.values().length + op.ordinal()];
    }

    public MemorySegment ring(DataType type, ReduceOp op) {
        return ring[type.ordinal() * ReduceOp.values().length + op.ordinal()];
    }

    public MemorySegment oneShot(DataType type, ReduceOp op) {
        return oneShot[type.ordinal() * ReduceOp.values().length + op.ordinal()];
    }

    /** The fatbin's bytes. */
    public static byte[] image() {
        byte[] b = image;
        if (b == null) {
            try (InputStream in = Kernels.class.getResourceAsStream(FATBIN)) {
                if (in == null) {
                    throw new CudaException("jccl's GPU kernels (" + FATBIN + ") are missing from the class path");
                }
                b = in.readAllBytes();
            } catch (IOException e) {
                throw new CudaException("cannot read " + FATBIN + ": " + e);
            }
            image = b;
        }
        return b;
    }
}
