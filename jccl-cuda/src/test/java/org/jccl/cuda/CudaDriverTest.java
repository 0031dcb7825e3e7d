package org.jccl.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.regex.Pattern;
import org.jccl.DataType;
import org.jccl.ErrorCode;
import org.jccl.cuda.internal.CudaDriver;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The CUDA driver gate. Without a GPU (CI) it checks that nothing breaks and the reason is given;
 * with one, the basic driver round trips and that driver errors are named with their arguments.
 */
@Timeout(60)
class CudaDriverTest {

    private static void requireGpu() {
        Assumptions.assumeTrue(Cuda.isAvailable(), () -> "skipped: no GPU here: " + Cuda.unavailableReason());
    }

    // ------------------------------------------------------------------ without a GPU (CI)

    @Test
    @Timeout(60)
    void withoutAGpuTheDriverSaysWhy() {
        Assumptions.assumeFalse(Cuda.isAvailable(), "skipped: this machine has a GPU");
        String reason = Cuda.unavailableReason();
        assertNotNull(reason, "unavailableReason() must say why CUDA is unavailable");
        if (!CudaDriver.available()) {
            String problem = CudaDriver.problem();
            assertNotNull(problem);
            assertEquals(problem, reason);
            // No driver library at all, or a driver that finds no GPU.
            assertTrue(Pattern.compile("libcuda\\.so\\.1.*not found|no CUDA-capable GPU|cuInit failed").matcher(problem).find(),
                    () -> "the reason must say that libcuda.so.1 was not found or that no GPU is visible: " + problem);
        } else {
            assertTrue(reason.contains("sees no GPU"), () -> "driver loaded, no device: the reason must say so: " + reason);
        }
    }

    @Test
    void pinnedHostMemoryOutOfMemoryIsAResourceErrorNamingMemlockAndTheFix() throws Exception {
        // What cuMemHostAlloc's CUDA_ERROR_OUT_OF_MEMORY becomes (the staging buffers of CudaCommunicator): the host, not
        // the GPU, is short, and the locked-memory limit is named with its value now and the fix. No GPU needed.
        org.jccl.ResourceException e = CudaDriver.hostAllocFailure(1L << 30, 1, "CUDA_ERROR_OUT_OF_MEMORY (out of memory)", 2);
        assertEquals(ErrorCode.RESOURCE, e.code());
        String m = e.getMessage();
        String soft = "unknown";
        for (String line : java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/self/limits"))) {
            if (line.startsWith("Max locked memory")) {
                soft = line.substring("Max locked memory".length()).trim().split("\\s+")[0];
            }
        }
        assertTrue(m.startsWith("cuMemHostAlloc(bytes=1073741824, flags=1) failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory); the"
                + " host could not page-lock 1073741824 bytes (1 GiB)"), m);
        assertTrue(m.contains("RLIMIT_MEMLOCK (ulimit -l) is now " + soft), "the limit as /proc/self/limits has it (" + soft + "): " + m);
        assertTrue(m.contains("`ulimit -l unlimited`") && m.contains("--ulimit memlock=-1") && m.contains("LimitMEMLOCK=infinity")
                && m.contains("Kubernetes"), m);
        assertTrue(e.getCause() instanceof CudaException ce && ce.result() == 2, String.valueOf(e.getCause()));
    }

    @Test
    @Timeout(60)
    void withoutAGpuDeviceCallsThrowACudaExceptionWithTheReason() {
        Assumptions.assumeFalse(CudaDriver.available(), "skipped: the CUDA driver is loaded here");
        CudaException e = assertThrows(CudaException.class, Cuda::deviceCount);
        assertTrue(e.getMessage().contains("CUDA is not available") && e.getMessage().contains(CudaDriver.problem()),
                () -> "the exception must carry the driver's reason: " + e.getMessage());
        assertEquals(ErrorCode.DEVICE, e.code());
        CudaException e2 = assertThrows(CudaException.class, () -> Cuda.device(0));
        assertTrue(e2.getMessage().contains(CudaDriver.problem()));
    }

    @Test
    @Timeout(60)
    void availabilityIsConsistent() {
        if (Cuda.isAvailable()) {
            assertNull(Cuda.unavailableReason());
            assertTrue(CudaDriver.available());
            assertTrue(Cuda.deviceCount() > 0);
        } else {
            assertNotNull(Cuda.unavailableReason());
            assertFalse(Cuda.unavailableReason().isBlank());
        }
    }

    // ------------------------------------------------------------------ with a GPU

    @Test
    @Timeout(60)
    void devicesDescribeThemselves() {
        requireGpu();
        assertTrue(Cuda.driverVersion() >= 12000, () -> "driver version " + Cuda.driverVersion());
        for (CudaDevice d : Cuda.devicesList()) {
            assertFalse(d.name().isBlank(), d::toString);
            assertTrue(d.pciBusId().matches("[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-9a-fA-F]"), d::pciBusId);
            assertTrue(d.multiprocessorCount() > 0);
            assertTrue(d.computeCapabilityMajor() >= 3, d::computeCapability);
            assertTrue(d.totalMemory() > (1L << 30), () -> d + ": " + d.totalMemory() + " bytes");
            assertTrue(d.canAccessPeer(d));
            assertFalse(d.uuid().isBlank());
        }
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Cuda.device(Cuda.deviceCount()));
        assertTrue(e.getMessage().contains(Cuda.deviceCount() + " GPU(s) are visible"), e::getMessage);
        assertThrows(IllegalArgumentException.class, () -> Cuda.device(-1));
    }

    @Test
    @Timeout(60)
    void allocCopyFreeRoundTrip() {
        requireGpu();
        for (CudaDevice d : Cuda.devicesList()) {
            long n = (1 << 20) + 7;
            try (Arena arena = Arena.ofConfined(); DeviceBuffer buf = d.allocate(n, DataType.INT32); CudaStream s = d.createStream()) {
                MemorySegment in = arena.allocate(DataType.INT32.bytes(n), 8);
                MemorySegment out = arena.allocate(DataType.INT32.bytes(n), 8);
                for (long i = 0; i < n; i++) {
                    in.setAtIndex(ValueLayout.JAVA_INT, i, (int) (i * 2654435761L));
                }
                buf.copyFrom(in);
                buf.copyTo(out);
                assertEquals(-1, in.mismatch(out), () -> d + ": the device copy differs");

                // fill on a stream, then a slice read back
                DeviceBuffer tail = buf.slice(n - 100, 100);
                tail.fill((byte) 0x5A, s);
                s.synchronize();
                assertTrue(s.isIdle());
                MemorySegment t = arena.allocate(tail.byteSize());
                tail.copyTo(t);
                for (long i = 0; i < t.byteSize(); i++) {
                    assertEquals((byte) 0x5A, t.get(ValueLayout.JAVA_BYTE, i));
                }
                MemorySegment h = arena.allocate(buf.slice(0, n - 100).byteSize());
                buf.slice(0, n - 100).copyTo(h);
                assertEquals(-1, h.mismatch(in.asSlice(0, h.byteSize())), "fill wrote outside its slice");

                assertEquals(d, buf.device());
                assertEquals(n, buf.count());
                assertEquals(0, buf.address() % 256, "cuMemAlloc returns 256-byte aligned memory");
                assertThrows(IllegalArgumentException.class, () -> buf.slice(n - 1, 2));
                assertThrows(IllegalArgumentException.class, () -> buf.copyFrom(arena.allocate(16)));
                assertThrows(IllegalArgumentException.class, () -> buf.as(DataType.INT64, n));
                assertThrows(IllegalArgumentException.class, () -> DeviceBuffer.wrap(d, 0, 1, DataType.INT8));
                assertThrows(IllegalArgumentException.class, () -> DeviceBuffer.wrap(d, buf.address() + 2, 1, DataType.INT32));
            }
        }
    }

    @Test
    @Timeout(60)
    void streamsCreateSynchronizeAndClose() {
        requireGpu();
        CudaDevice d = Cuda.device(0);
        for (int i = 0; i < 16; i++) {
            try (CudaStream s = d.createStream(); DeviceBuffer b = d.allocate(1 << 20, DataType.UINT8)) {
                b.fill((byte) i, s);
                s.synchronize();
                assertTrue(s.isIdle());
                assertEquals(d, s.device());
            }
        }
        d.synchronize();
    }

    /** A failing driver call names the call, its arguments, the driver's name for the code and a hint. */
    @Test
    @Timeout(60)
    void driverErrorsNameTheCallTheArgumentsAndTheCode() {
        requireGpu();
        long pib = 1L << 50;
        CudaException e = assertThrows(CudaException.class, () -> Cuda.device(0).allocate(pib, DataType.UINT8));
        String m = e.getMessage();
        assertTrue(m.contains("cuMemAlloc") && m.contains(Long.toString(pib)) && m.contains("CUDA_ERROR_OUT_OF_MEMORY"),
                () -> "the message must name cuMemAlloc, " + pib + " bytes and CUDA_ERROR_OUT_OF_MEMORY: " + m);
        assertEquals(2, e.result(), "CUresult of CUDA_ERROR_OUT_OF_MEMORY");
        assertEquals(ErrorCode.DEVICE, e.code());
        assertEquals("CUDA_ERROR_OUT_OF_MEMORY", CudaDriver.errorName(2));
        // The context survives an allocation failure.
        try (DeviceBuffer b = Cuda.device(0).allocate(16, DataType.UINT8)) {
            assertEquals(16, b.count());
        }
    }
}
