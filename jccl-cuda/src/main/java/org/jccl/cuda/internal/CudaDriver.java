package org.jccl.cuda.internal;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.Optional;
import org.jccl.cuda.CudaException;

/**
 * The gate to the CUDA driver API ({@code libcuda.so.1}), through FFM: the only class that calls
 * into that library. The library is looked up the first time this class is used, never at
 * start-up, so CPU-only machines are unaffected; {@link #available()} says whether it loaded.
 *
 * <p>Every call checks its {@code CUresult} and throws {@link CudaException} naming the call, its
 * arguments and the driver's own name and text for the code. Pointers into device memory are
 * carried as {@code long} (CUdeviceptr); driver handles (contexts, streams, events, modules,
 * functions) as {@link MemorySegment} addresses.
 *
 * <p>Thread safety: the driver is thread safe; the current context is per thread, so callers set
 * it with {@link #ctxSetCurrent} before a call on a device other than the thread's last.
 *
 * <p><b>Why one file of about 780 lines.</b> It is the whole FFM binding of the driver API: one
 * {@code MethodHandle} per {@code cu*} function with its descriptor, the translation of
 * {@code CUresult} into messages, and one short wrapper per call (devices, contexts, memory,
 * copies, streams, events, modules, IPC). Each wrapper is a few lines that follow one pattern, so
 * the length is the number of functions, not several roles; split by family, every part would
 * repeat the loading, the checks and the error text, and "the only class that calls into libcuda"
 * would no longer hold by construction.
 */
public final class CudaDriver {
    /** CUDA_SUCCESS. */
    private static final int SUCCESS = 0;
    /** CUDA_ERROR_NOT_READY, the answer of cuStreamQuery/cuEventQuery for unfinished work. */
    public static final int ERROR_NOT_READY = 600;
    /** CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED. */
    private static final int ERROR_PEER_ACCESS_ALREADY_ENABLED = 704;

    /** cuMemHostAlloc flags: portable across contexts, mapped into the device address space. */
    public static final int MEMHOSTALLOC_PORTABLE = 0x01;
    public static final int MEMHOSTALLOC_DEVICEMAP = 0x02;
    /** cuStreamCreate flag: no implicit synchronization with the legacy default stream. */
    public static final int STREAM_NON_BLOCKING = 0x1;
    /** cuEventCreate flags. */
    public static final int POINTER_ATTRIBUTE_BUFFER_ID = 7;
    public static final int EVENT_DEFAULT = 0x0;
    public static final int EVENT_DISABLE_TIMING = 0x2;
    public static final int EVENT_INTERPROCESS = 0x4;
    /** cuIpcOpenMemHandle flag. */
    public static final int IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1;
    /** CUdevice_attribute values used here. */
    public static final int ATTR_MULTIPROCESSOR_COUNT = 16;
    public static final int ATTR_COMPUTE_CAPABILITY_MAJOR = 75;
    public static final int ATTR_COMPUTE_CAPABILITY_MINOR = 76;
    public static final int ATTR_UNIFIED_ADDRESSING = 41;
    /** CUfunction_attribute: CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK. */
    public static final int FUNC_ATTR_MAX_THREADS_PER_BLOCK = 0;
    /** Size of CUipcMemHandle / CUipcEventHandle. */
    public static final int IPC_HANDLE_BYTES = 64;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final Loaded LIB = Loaded.load();

    private CudaDriver() {
    }

    /** The library and the result of cuInit, resolved once. */
    private record Loaded(SymbolLookup lookup, String problem) {
        static Loaded load() {
            SymbolLookup lookup;
            try {
                lookup = SymbolLookup.libraryLookup("libcuda.so.1", Arena.global());
            } catch (IllegalArgumentException e) {
                return new Loaded(null, "libcuda.so.1 (the NVIDIA driver's CUDA library) was not found: no NVIDIA driver is"
                        + " installed here, or its library directory is not on the loader path (LD_LIBRARY_PATH / ldconfig)");
            }
            return new Loaded(lookup, null);
        }
    }

    private static MethodHandle fn(String name, FunctionDescriptor fd) {
        if (LIB.lookup == null) {
            return null;
        }
        Optional<MemorySegment> sym = LIB.lookup.find(name);
        return sym.map(s -> LINKER.downcallHandle(s, fd)).orElse(null);
    }

    private static FunctionDescriptor rc(MemoryLayout... args) {
        return FunctionDescriptor.of(JAVA_INT, args);
    }

    // ------------------------------------------------------------------ downcall handles
    private static final MethodHandle cuInit = fn("cuInit", rc(JAVA_INT));
    private static final MethodHandle cuDriverGetVersion = fn("cuDriverGetVersion", rc(ADDRESS));
    private static final MethodHandle cuGetErrorName = fn("cuGetErrorName", rc(JAVA_INT, ADDRESS));
    private static final MethodHandle cuGetErrorString = fn("cuGetErrorString", rc(JAVA_INT, ADDRESS));
    private static final MethodHandle cuDeviceGetCount = fn("cuDeviceGetCount", rc(ADDRESS));
    private static final MethodHandle cuDeviceGet = fn("cuDeviceGet", rc(ADDRESS, JAVA_INT));
    private static final MethodHandle cuDeviceGetName = fn("cuDeviceGetName", rc(ADDRESS, JAVA_INT, JAVA_INT));
    private static final MethodHandle cuDeviceGetAttribute = fn("cuDeviceGetAttribute", rc(ADDRESS, JAVA_INT, JAVA_INT));
    private static final MethodHandle cuDeviceGetPCIBusId = fn("cuDeviceGetPCIBusId", rc(ADDRESS, JAVA_INT, JAVA_INT));
    private static final MethodHandle cuDeviceGetUuid = fn("cuDeviceGetUuid_v2", rc(ADDRESS, JAVA_INT));
    /** The first version: for a MIG instance it gives the GPU's UUID where _v2 gives the instance's (null when absent). */
    private static final MethodHandle cuDeviceGetUuidV1 = fn("cuDeviceGetUuid", rc(ADDRESS, JAVA_INT));
    private static final MethodHandle cuDeviceTotalMem = fn("cuDeviceTotalMem_v2", rc(ADDRESS, JAVA_INT));
    private static final MethodHandle cuDeviceCanAccessPeer = fn("cuDeviceCanAccessPeer", rc(ADDRESS, JAVA_INT, JAVA_INT));
    private static final MethodHandle cuDevicePrimaryCtxRetain = fn("cuDevicePrimaryCtxRetain", rc(ADDRESS, JAVA_INT));
    private static final MethodHandle cuDevicePrimaryCtxRelease = fn("cuDevicePrimaryCtxRelease_v2", rc(JAVA_INT));
    private static final MethodHandle cuCtxSetCurrent = fn("cuCtxSetCurrent", rc(ADDRESS));
    private static final MethodHandle cuCtxSynchronize = fn("cuCtxSynchronize", rc());
    private static final MethodHandle cuCtxEnablePeerAccess = fn("cuCtxEnablePeerAccess", rc(ADDRESS, JAVA_INT));
    private static final MethodHandle cuMemGetInfo = fn("cuMemGetInfo_v2", rc(ADDRESS, ADDRESS));
    private static final MethodHandle cuMemAlloc = fn("cuMemAlloc_v2", rc(ADDRESS, JAVA_LONG));
    private static final MethodHandle cuMemFree = fn("cuMemFree_v2", rc(JAVA_LONG));
    private static final MethodHandle cuMemHostAlloc = fn("cuMemHostAlloc", rc(ADDRESS, JAVA_LONG, JAVA_INT));
    private static final MethodHandle cuMemFreeHost = fn("cuMemFreeHost", rc(ADDRESS));
    private static final MethodHandle cuMemHostGetDevicePointer = fn("cuMemHostGetDevicePointer_v2", rc(ADDRESS, ADDRESS, JAVA_INT));
    private static final MethodHandle cuMemGetAddressRange = fn("cuMemGetAddressRange_v2", rc(ADDRESS, ADDRESS, JAVA_LONG));
    private static final MethodHandle cuMemcpyHtoD = fn("cuMemcpyHtoD_v2", rc(JAVA_LONG, ADDRESS, JAVA_LONG));
    private static final MethodHandle cuMemcpyDtoH = fn("cuMemcpyDtoH_v2", rc(ADDRESS, JAVA_LONG, JAVA_LONG));
    private static final MethodHandle cuMemcpyHtoDAsync = fn("cuMemcpyHtoDAsync_v2", rc(JAVA_LONG, ADDRESS, JAVA_LONG, ADDRESS));
    private static final MethodHandle cuMemcpyDtoHAsync = fn("cuMemcpyDtoHAsync_v2", rc(ADDRESS, JAVA_LONG, JAVA_LONG, ADDRESS));
    private static final MethodHandle cuMemcpyDtoDAsync = fn("cuMemcpyDtoDAsync_v2", rc(JAVA_LONG, JAVA_LONG, JAVA_LONG, ADDRESS));
    private static final MethodHandle cuMemsetD8Async = fn("cuMemsetD8Async", rc(JAVA_LONG, JAVA_BYTE, JAVA_LONG, ADDRESS));
    private static final MethodHandle cuStreamCreate = fn("cuStreamCreate", rc(ADDRESS, JAVA_INT));
    private static final MethodHandle cuStreamDestroy = fn("cuStreamDestroy_v2", rc(ADDRESS));
    private static final MethodHandle cuStreamSynchronize = fn("cuStreamSynchronize", rc(ADDRESS));
    private static final MethodHandle cuStreamQuery = fn("cuStreamQuery", rc(ADDRESS));
    private static final MethodHandle cuStreamWaitEvent = fn("cuStreamWaitEvent", rc(ADDRESS, ADDRESS, JAVA_INT));
    private static final MethodHandle cuEventCreate = fn("cuEventCreate", rc(ADDRESS, JAVA_INT));
    private static final MethodHandle cuEventDestroy = fn("cuEventDestroy_v2", rc(ADDRESS));
    private static final MethodHandle cuEventRecord = fn("cuEventRecord", rc(ADDRESS, ADDRESS));
    private static final MethodHandle cuEventSynchronize = fn("cuEventSynchronize", rc(ADDRESS));
    private static final MethodHandle cuEventQuery = fn("cuEventQuery", rc(ADDRESS));
    private static final MethodHandle cuEventElapsedTime = fn("cuEventElapsedTime_v2", rc(ADDRESS, ADDRESS, ADDRESS));
    private static final MethodHandle cuModuleLoadData = fn("cuModuleLoadData", rc(ADDRESS, ADDRESS));
    private static final MethodHandle cuModuleUnload = fn("cuModuleUnload", rc(ADDRESS));
    private static final MethodHandle cuModuleGetFunction = fn("cuModuleGetFunction", rc(ADDRESS, ADDRESS, ADDRESS));
    private static final MethodHandle cuFuncGetAttribute = fn("cuFuncGetAttribute", rc(ADDRESS, JAVA_INT, ADDRESS));
    private static final MethodHandle cuLaunchKernel = fn("cuLaunchKernel", rc(ADDRESS, JAVA_INT, JAVA_INT, JAVA_INT,
            JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
    private static final MethodHandle cuPointerGetAttribute = fn("cuPointerGetAttribute", rc(ADDRESS, JAVA_INT, JAVA_LONG));
    private static final MethodHandle cuIpcGetMemHandle = fn("cuIpcGetMemHandle", rc(ADDRESS, JAVA_LONG));
    private static final MethodHandle cuIpcOpenMemHandle = fn("cuIpcOpenMemHandle_v2", rc(ADDRESS, MemoryLayout.structLayout(MemoryLayout.sequenceLayout(64, JAVA_BYTE)), JAVA_INT));
    private static final MethodHandle cuIpcCloseMemHandle = fn("cuIpcCloseMemHandle", rc(JAVA_LONG));

    /** Why the driver cannot be used, or null when it can (cuInit succeeded). */
    private static final String PROBLEM = init();

    private static String init() {
        if (LIB.problem != null) {
            return LIB.problem;
        }
        if (cuInit == null) {
            return "libcuda.so.1 was found but has no cuInit symbol";
        }
        try {
            int r = (int) cuInit.invokeExact(0);
            if (r != SUCCESS) {
                return "cuInit failed: " + errorName(r) + " (" + errorString(r) + ")"
                        + (r == 100 ? ": no CUDA-capable GPU is visible (check CUDA_VISIBLE_DEVICES and nvidia-smi)" : "");
            }
            return null;
        } catch (Throwable t) {
            return "cuInit could not be called: " + t;
        }
    }

    /** Whether libcuda loaded and cuInit succeeded. */
    public static boolean available() {
        return PROBLEM == null;
    }

    /** Why the driver is unavailable, or null. */
    public static String problem() {
        return PROBLEM;
    }

    private static void require() {
        if (PROBLEM != null) {
            throw new CudaException("CUDA is not available: " + PROBLEM);
        }
    }

    // ------------------------------------------------------------------ error handling

    /** The driver's enum name of a CUresult, e.g. CUDA_ERROR_OUT_OF_MEMORY. */
    public static String errorName(int code) {
        if (cuGetErrorName == null) {
            return "CUresult " + code;
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment p = a.allocate(ADDRESS);
            int r = (int) cuGetErrorName.invokeExact(code, p);
            if (r != SUCCESS) {
                return "CUresult " + code;
            }
            return p.get(ADDRESS, 0).reinterpret(256).getString(0);
        } catch (Throwable t) {
            return "CUresult " + code;
        }
    }

    /** The driver's description of a CUresult. */
    public static String errorString(int code) {
        if (cuGetErrorString == null) {
            return "";
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment p = a.allocate(ADDRESS);
            int r = (int) cuGetErrorString.invokeExact(code, p);
            if (r != SUCCESS) {
                return "";
            }
            return p.get(ADDRESS, 0).reinterpret(1024).getString(0);
        } catch (Throwable t) {
            return "";
        }
    }

    /** Throws when {@code r} is not CUDA_SUCCESS, naming the call and its arguments. */
    static void check(int r, String call) {
        if (r != SUCCESS) {
            throw new CudaException(call + " failed: " + errorName(r) + " (" + errorString(r) + ")" + hint(r), r);
        }
    }

    private static String hint(int r) {
        return switch (r) {
            case 2 -> "; the GPU is out of memory: free buffers or lower the message size";
            case 1, 101 -> "";
            case 700, 716, 719 -> "; a kernel faulted: the context is unusable, restart the process";
            case 217 -> "; peer access is not supported between these GPUs (no NVLink/P2P path)";
            default -> "";
        };
    }

    private static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException re) {
            return re;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return new CudaException("native call failed: " + t);
    }

    private static String hex(long p) {
        return "0x" + Long.toHexString(p);
    }

    // ------------------------------------------------------------------ version, devices

    public static int driverVersion() {
        require();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(JAVA_INT);
            check((int) cuDriverGetVersion.invokeExact(v), "cuDriverGetVersion()");
            return v.get(JAVA_INT, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static int deviceCount() {
        require();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(JAVA_INT);
            check((int) cuDeviceGetCount.invokeExact(v), "cuDeviceGetCount()");
            return v.get(JAVA_INT, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** CUdevice handle of ordinal {@code ordinal} (in CUDA_VISIBLE_DEVICES numbering). */
    public static int deviceGet(int ordinal) {
        require();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(JAVA_INT);
            check((int) cuDeviceGet.invokeExact(v, ordinal), "cuDeviceGet(ordinal=" + ordinal + ")");
            return v.get(JAVA_INT, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static String deviceName(int dev) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(256);
            check((int) cuDeviceGetName.invokeExact(v, 256, dev), "cuDeviceGetName(dev=" + dev + ")");
            return v.getString(0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static int deviceAttribute(int dev, int attribute) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(JAVA_INT);
            check((int) cuDeviceGetAttribute.invokeExact(v, attribute, dev),
                    "cuDeviceGetAttribute(attr=" + attribute + ", dev=" + dev + ")");
            return v.get(JAVA_INT, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** PCI bus id in the form 0000:3b:00.0. */
    public static String pciBusId(int dev) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(64);
            check((int) cuDeviceGetPCIBusId.invokeExact(v, 64, dev), "cuDeviceGetPCIBusId(dev=" + dev + ")");
            return v.getString(0).toLowerCase(java.util.Locale.ROOT);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * The device's UUID formatted like nvidia-smi -L: {@code GPU-xxxxxxxx-xxxx-...}, or {@code MIG-...} for
     * a MIG instance (cuDeviceGetUuid_v2 gives the instance's UUID, the first cuDeviceGetUuid its
     * GPU's: they differ only for a MIG instance).
     */
    public static String uuid(int dev) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(16);
            check((int) cuDeviceGetUuid.invokeExact(v, dev), "cuDeviceGetUuid(dev=" + dev + ")");
            boolean mig = false;
            if (cuDeviceGetUuidV1 != null) {
                MemorySegment v1 = a.allocate(16);
                if ((int) cuDeviceGetUuidV1.invokeExact(v1, dev) == 0) {
                    mig = v1.mismatch(v) >= 0;
                }
            }
            return formatUuid(mig ? "MIG-" : "GPU-", v.toArray(JAVA_BYTE));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code prefix} + the 16 bytes as 8-4-4-4-12 hex digits. */
    public static String formatUuid(String prefix, byte[] b) {
        StringBuilder sb = new StringBuilder(prefix);
        for (int i = 0; i < 16; i++) {
            if (i == 4 || i == 6 || i == 8 || i == 10) {
                sb.append('-');
            }
            sb.append(String.format("%02x", b[i] & 0xff));
        }
        return sb.toString();
    }

    public static long totalMem(int dev) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(JAVA_LONG);
            check((int) cuDeviceTotalMem.invokeExact(v, dev), "cuDeviceTotalMem(dev=" + dev + ")");
            return v.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Free and total memory of the current context's device. */
    public static long[] memGetInfo() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment f = a.allocate(JAVA_LONG);
            MemorySegment t = a.allocate(JAVA_LONG);
            check((int) cuMemGetInfo.invokeExact(f, t), "cuMemGetInfo()");
            return new long[] {f.get(JAVA_LONG, 0), t.get(JAVA_LONG, 0)};
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static boolean canAccessPeer(int dev, int peerDev) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(JAVA_INT);
            check((int) cuDeviceCanAccessPeer.invokeExact(v, dev, peerDev), "cuDeviceCanAccessPeer(dev=" + dev + ", peer=" + peerDev + ")");
            return v.get(JAVA_INT, 0) != 0;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    // ------------------------------------------------------------------ contexts

    public static MemorySegment primaryCtxRetain(int dev) {
        require();
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(ADDRESS);
            check((int) cuDevicePrimaryCtxRetain.invokeExact(v, dev), "cuDevicePrimaryCtxRetain(dev=" + dev + ")");
            return v.get(ADDRESS, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void primaryCtxRelease(int dev) {
        try {
            check((int) cuDevicePrimaryCtxRelease.invokeExact(dev), "cuDevicePrimaryCtxRelease(dev=" + dev + ")");
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void ctxSetCurrent(MemorySegment ctx) {
        try {
            check((int) cuCtxSetCurrent.invokeExact(ctx), "cuCtxSetCurrent(" + ctx + ")");
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void ctxSynchronize() {
        try {
            check((int) cuCtxSynchronize.invokeExact(), "cuCtxSynchronize()");
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Maps the peer context's memory into the current context; already enabled is not an error. */
    public static void ctxEnablePeerAccess(MemorySegment peerCtx) {
        try {
            int r = (int) cuCtxEnablePeerAccess.invokeExact(peerCtx, 0);
            if (r != ERROR_PEER_ACCESS_ALREADY_ENABLED) {
                check(r, "cuCtxEnablePeerAccess(peerCtx=" + peerCtx + ")");
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    // ------------------------------------------------------------------ memory

    public static long memAlloc(long bytes) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(JAVA_LONG);
            check((int) cuMemAlloc.invokeExact(v, bytes), "cuMemAlloc(bytes=" + bytes + ")");
            return v.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void memFree(long dptr) {
        try {
            check((int) cuMemFree.invokeExact(dptr), "cuMemFree(" + hex(dptr) + ")");
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * Page-locked host memory, mapped for the devices when {@code flags} has DEVICEMAP.
     *
     * @throws org.jccl.ResourceException when the host cannot lock the memory (CUDA_ERROR_OUT_OF_MEMORY here is host
     *         memory, not the GPU's): names RLIMIT_MEMLOCK with its value now and how to raise it
     */
    public static MemorySegment memHostAlloc(long bytes, int flags) {
        int r;
        MemorySegment p;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(ADDRESS);
            r = (int) cuMemHostAlloc.invokeExact(v, bytes, flags);
            p = v.get(ADDRESS, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
        if (r == OUT_OF_MEMORY) {
            throw hostAllocFailure(bytes, flags, errorName(r) + " (" + errorString(r) + ")", r);
        }
        check(r, "cuMemHostAlloc(bytes=" + bytes + ", flags=" + flags + ")");
        return p.reinterpret(bytes);
    }

    /** CUDA_ERROR_OUT_OF_MEMORY. */
    static final int OUT_OF_MEMORY = 2;

    /** The error for a page-locked allocation the host refused (separate so it can be tested without a GPU). */
    public static org.jccl.ResourceException hostAllocFailure(long bytes, int flags, String what, int result) {
        String call = "cuMemHostAlloc(bytes=" + bytes + ", flags=" + flags + ") failed: " + what;
        return new org.jccl.ResourceException(call + "; " + org.jccl.internal.util.ResourceLimits.lockedMemoryAdvice(bytes),
                new CudaException(call, result));
    }

    public static void memFreeHost(MemorySegment p) {
        try {
            check((int) cuMemFreeHost.invokeExact(p), "cuMemFreeHost(" + p + ")");
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static long memHostGetDevicePointer(MemorySegment host) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(JAVA_LONG);
            check((int) cuMemHostGetDevicePointer.invokeExact(v, host, 0), "cuMemHostGetDevicePointer(" + host + ")");
            return v.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {base, size} of the allocation that contains {@code dptr}. */
    public static long[] memGetAddressRange(long dptr) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment b = a.allocate(JAVA_LONG);
            MemorySegment s = a.allocate(JAVA_LONG);
            check((int) cuMemGetAddressRange.invokeExact(b, s, dptr), "cuMemGetAddressRange(" + hex(dptr) + ")");
            return new long[] {b.get(JAVA_LONG, 0), s.get(JAVA_LONG, 0)};
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** CU_POINTER_ATTRIBUTE_BUFFER_ID: an id unique to the allocation holding {@code dptr} for the process's lifetime. */
    public static long pointerBufferId(long dptr) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(JAVA_LONG);
            check((int) cuPointerGetAttribute.invokeExact(v, POINTER_ATTRIBUTE_BUFFER_ID, dptr),
                    "cuPointerGetAttribute(BUFFER_ID, " + hex(dptr) + ")");
            return v.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void memcpyHtoD(long dst, MemorySegment src, long bytes) {
        try {
            check((int) cuMemcpyHtoD.invokeExact(dst, src, bytes), "cuMemcpyHtoD(dst=" + hex(dst) + ", bytes=" + bytes + ")");
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void memcpyDtoH(MemorySegment dst, long src, long bytes) {
        try {
            check((int) cuMemcpyDtoH.invokeExact(dst, src, bytes), "cuMemcpyDtoH(src=" + hex(src) + ", bytes=" + bytes + ")");
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void memcpyHtoDAsync(long dst, MemorySegment src, long bytes, MemorySegment stream) {
        try {
            check((int) cuMemcpyHtoDAsync.invokeExact(dst, src, bytes, stream),
                    "cuMemcpyHtoDAsync(dst=" + hex(dst) + ", bytes=" + bytes + ")");
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void memcpyDtoHAsync(MemorySegment dst, long src, long bytes, MemorySegment stream) {
        try {
            check((int) cuMemcpyDtoHAsync.invokeExact(dst, src, bytes, stream),
                    "cuMemcpyDtoHAsync(src=" + hex(src) + ", bytes=" + bytes + ")");
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Device-to-device copy on {@code stream}; with unified addressing the two may be on different GPUs. */
    public static void memcpyDtoDAsync(long dst, long src, long bytes, MemorySegment stream) {
        try {
            check((int) cuMemcpyDtoDAsync.invokeExact(dst, src, bytes, stream),
                    "cuMemcpyDtoDAsync(dst=" + hex(dst) + ", src=" + hex(src) + ", bytes=" + bytes + ")");
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void memsetD8Async(long dst, byte value, long bytes, MemorySegment stream) {
        try {
            check((int) cuMemsetD8Async.invokeExact(dst, value, bytes, stream),
                    "cuMemsetD8Async(dst=" + hex(dst) + ", bytes=" + bytes + ")");
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    // ------------------------------------------------------------------ streams and events

    public static MemorySegment streamCreate(int flags) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(ADDRESS);
            check((int) cuStreamCreate.invokeExact(v, flags), "cuStreamCreate(flags=" + flags + ")");
            return v.get(ADDRESS, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void streamDestroy(MemorySegment s) {
        try {
            check((int) cuStreamDestroy.invokeExact(s), "cuStreamDestroy(" + s + ")");
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void streamSynchronize(MemorySegment s) {
        try {
            check((int) cuStreamSynchronize.invokeExact(s), "cuStreamSynchronize(" + s + ")");
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** True when all work on the stream has finished. */
    public static boolean streamQuery(MemorySegment s) {
        try {
            int r = (int) cuStreamQuery.invokeExact(s);
            if (r == ERROR_NOT_READY) {
                return false;
            }
            check(r, "cuStreamQuery(" + s + ")");
            return true;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void streamWaitEvent(MemorySegment s, MemorySegment event) {
        try {
            check((int) cuStreamWaitEvent.invokeExact(s, event, 0), "cuStreamWaitEvent(" + s + ", " + event + ")");
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static MemorySegment eventCreate(int flags) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(ADDRESS);
            check((int) cuEventCreate.invokeExact(v, flags), "cuEventCreate(flags=" + flags + ")");
            return v.get(ADDRESS, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void eventDestroy(MemorySegment e) {
        try {
            check((int) cuEventDestroy.invokeExact(e), "cuEventDestroy(" + e + ")");
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void eventRecord(MemorySegment e, MemorySegment stream) {
        try {
            check((int) cuEventRecord.invokeExact(e, stream), "cuEventRecord(" + e + ", " + stream + ")");
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void eventSynchronize(MemorySegment e) {
        try {
            check((int) cuEventSynchronize.invokeExact(e), "cuEventSynchronize(" + e + ")");
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static boolean eventQuery(MemorySegment e) {
        try {
            int r = (int) cuEventQuery.invokeExact(e);
            if (r == ERROR_NOT_READY) {
                return false;
            }
            check(r, "cuEventQuery(" + e + ")");
            return true;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Milliseconds between two recorded events. */
    public static float eventElapsedTime(MemorySegment start, MemorySegment end) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(JAVA_FLOAT);
            check((int) cuEventElapsedTime.invokeExact(v, start, end), "cuEventElapsedTime(" + start + ", " + end + ")");
            return v.get(JAVA_FLOAT, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    // ------------------------------------------------------------------ modules and kernels

    /** Loads a cubin/fatbin/PTX image into the current context. */
    public static MemorySegment moduleLoadData(MemorySegment image) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(ADDRESS);
            check((int) cuModuleLoadData.invokeExact(v, image), "cuModuleLoadData(" + image.byteSize() + " bytes)");
            return v.get(ADDRESS, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void moduleUnload(MemorySegment module) {
        try {
            check((int) cuModuleUnload.invokeExact(module), "cuModuleUnload(" + module + ")");
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static MemorySegment moduleGetFunction(MemorySegment module, String name) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(ADDRESS);
            check((int) cuModuleGetFunction.invokeExact(v, module, a.allocateFrom(name)), "cuModuleGetFunction(" + name + ")");
            return v.get(ADDRESS, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static int funcAttribute(MemorySegment fn, int attribute) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(JAVA_INT);
            check((int) cuFuncGetAttribute.invokeExact(v, attribute, fn), "cuFuncGetAttribute(attr=" + attribute + ")");
            return v.get(JAVA_INT, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * Launches {@code fn} on {@code stream}; {@code params} is the kernelParams array (one pointer
     * per kernel parameter), which the driver copies before this returns.
     */
    public static void launchKernel(MemorySegment fn, int gridX, int blockX, int sharedBytes, MemorySegment stream,
                                    MemorySegment params, String what) {
        try {
            int r = (int) cuLaunchKernel.invokeExact(fn, gridX, 1, 1, blockX, 1, 1, sharedBytes, stream, params, MemorySegment.NULL);
            if (r != SUCCESS) {
                check(r, "cuLaunchKernel(" + what + ", grid=" + gridX + ", block=" + blockX + ")");
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    // ------------------------------------------------------------------ IPC

    /** The 64-byte IPC handle of the allocation starting at {@code base}. */
    public static byte[] ipcGetMemHandle(long base) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(IPC_HANDLE_BYTES);
            check((int) cuIpcGetMemHandle.invokeExact(v, base), "cuIpcGetMemHandle(" + hex(base) + ")");
            return v.toArray(JAVA_BYTE);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Maps another process's allocation into the current context; returns its base here. */
    public static long ipcOpenMemHandle(byte[] handle) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(JAVA_LONG);
            MemorySegment h = a.allocate(IPC_HANDLE_BYTES);
            MemorySegment.copy(handle, 0, h, JAVA_BYTE, 0, IPC_HANDLE_BYTES);
            check((int) cuIpcOpenMemHandle.invokeExact(v, h, IPC_MEM_LAZY_ENABLE_PEER_ACCESS), "cuIpcOpenMemHandle()");
            return v.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static void ipcCloseMemHandle(long base) {
        try {
            check((int) cuIpcCloseMemHandle.invokeExact(base), "cuIpcCloseMemHandle(" + hex(base) + ")");
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }
}
