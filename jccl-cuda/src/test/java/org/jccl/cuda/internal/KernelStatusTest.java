package org.jccl.cuda.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jccl.DataType;
import org.jccl.ErrorCode;
import org.jccl.InvalidUsageException;
import org.jccl.JcclException;
import org.jccl.ReduceOp;
import org.jccl.cuda.CudaException;
import org.jccl.internal.guard.OpGuard;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Without a GPU: what the host makes of the failures jccl's kernels record in the host-mapped
 * status words (above all the one-shot all-reduce's mismatch guard), and that the Java mirrors of
 * the kernels' layouts (argument block, status words) agree with jccl_kernels.cu (the signal area:
 * SignalAreaTest).
 */
class KernelStatusTest {
    private static final Path CU = Path.of("").toAbsolutePath().resolve("src/main/cuda/jccl_kernels.cu");
    private static final long TIMEOUT_NS = 300_000_000_000L;

    private static long word(long count, DataType t, ReduceOp op) {
        return OpGuard.collective("allReduce", count, t, op, -1);
    }

    /** Status words as a kernel leaves them: code, epoch, peer, block, then the two guard words. */
    private static MemorySegment recorded(long code, long epoch, long peer, long theirs, long mine) {
        MemorySegment w = Arena.ofAuto().allocate(KernelStatus.BYTES);
        w.set(ValueLayout.JAVA_LONG, 8L * KernelStatus.CODE, code);
        w.set(ValueLayout.JAVA_LONG, 8L * KernelStatus.EPOCH, epoch);
        w.set(ValueLayout.JAVA_LONG, 8L * KernelStatus.PEER, peer);
        w.set(ValueLayout.JAVA_LONG, 8L * KernelStatus.BLOCK, 3);
        w.set(ValueLayout.JAVA_LONG, 8L * KernelStatus.THEIRS, theirs);
        w.set(ValueLayout.JAVA_LONG, 8L * KernelStatus.MINE, mine);
        return w;
    }

    private static InvalidUsageException mismatch(long theirs, long mine) {
        JcclException e = KernelStatus.decode(recorded(KernelStatus.ERR_MISMATCH, 17, 1, theirs, mine), 0, "GPU 0", TIMEOUT_NS);
        InvalidUsageException m = assertInstanceOf(InvalidUsageException.class, e);
        assertEquals(ErrorCode.MISMATCH, m.code());
        return m;
    }

    private static void contains(String message, String... parts) {
        for (String p : parts) {
            assertTrue(message.contains(p), "missing \"" + p + "\" in: " + message);
        }
    }

    @Test
    void nothingRecordedIsNoFailure() {
        assertNull(KernelStatus.decode(Arena.ofAuto().allocate(KernelStatus.BYTES), 0, "GPU 0", TIMEOUT_NS));
    }

    @Test
    void theOneShotKernelsMismatchNamesBothCallsAndWhatDiffers() {
        String m = mismatch(word(4100, DataType.FLOAT32, ReduceOp.SUM), word(4099, DataType.FLOAT32, ReduceOp.SUM)).getMessage();
        contains(m, "rank 0: GPU collective #17 failed: mismatched collective calls", "rank 1 called allReduce (4100 x float sum)",
                "but rank 0 called allReduce (4099 x float sum)", "they differ in count 4100 vs 4099", "one-shot all-reduce kernel",
                "the receive buffer holds what it held", "Every rank must call the same collectives");
        contains(mismatch(word(64, DataType.INT32, ReduceOp.SUM), word(64, DataType.FLOAT32, ReduceOp.SUM)).getMessage(),
                "rank 1 called allReduce (64 x int32 sum)", "rank 0 called allReduce (64 x float sum)", "data type int32 vs float");
        contains(mismatch(word(64, DataType.FLOAT32, ReduceOp.MAX), word(64, DataType.FLOAT32, ReduceOp.SUM)).getMessage(),
                "reduction op max vs sum");
    }

    @Test
    void aPeerThatReleasedTheKernelIsNamedWithItsRealCall() {
        long theirs = word(70_000, DataType.FLOAT32, ReduceOp.SUM);
        String m = mismatch(theirs | KernelStatus.RELEASED, word(60_000, DataType.FLOAT32, ReduceOp.SUM)).getMessage();
        contains(m, "rank 1 called allReduce (70000 x float sum)", "rank 0 called allReduce (60000 x float sum)",
                "count 70000 vs 60000", "exchanges records instead");
        long bcast = OpGuard.collective("broadcast", 8, DataType.FLOAT32, null, 1);
        contains(mismatch(bcast | KernelStatus.RELEASED, word(8, DataType.FLOAT32, ReduceOp.SUM)).getMessage(),
                "rank 1 called broadcast (8 x float root 1)", "collective broadcast vs allReduce");
    }

    @Test
    void theSameCallRunByAnotherAlgorithmNamesTheSettings() {
        long w = word(60_000, DataType.FLOAT32, ReduceOp.SUM);
        String m = mismatch(w | KernelStatus.RELEASED, w).getMessage();
        contains(m, "rank 1 and rank 0 both called allReduce (60000 x float sum)", "JCCL_CUDA_ONESHOT_MAX", "JCCL_CUDA_ALLREDUCE");
    }

    @Test
    void guardWordsLeaveBitZeroForTheReleaseMark() {
        for (DataType t : DataType.values()) {
            for (ReduceOp op : ReduceOp.values()) {
                assertEquals(0, word(1 << 20, t, op) & KernelStatus.RELEASED, t + " " + op);
            }
        }
    }

    @Test
    void aTimeoutNamesThePeerAndTheSetting() {
        JcclException e = KernelStatus.decode(recorded(KernelStatus.ERR_TIMEOUT, 9, 2, 0, 0), 1, "GPU 1", 5_000_000_000L);
        assertInstanceOf(CudaException.class, e);
        contains(e.getMessage(), "rank 1 (GPU 1): GPU operation #9 waited 5 s for rank 2 (JCCL_CUDA_WAIT_TIMEOUT) and gave up");
    }

    @Test
    @Timeout(30)
    void theWordsAfterTheCodeAreAwaited() throws Exception {
        // The kernel's compare-and-swap of the code lands first; the guard words follow.
        MemorySegment w = recorded(KernelStatus.ERR_MISMATCH, 5, 1, 0, 0);
        Thread late = new Thread(() -> {
            try {
                Thread.sleep(200);
            } catch (InterruptedException ignored) {
                return;
            }
            w.set(ValueLayout.JAVA_LONG, 8L * KernelStatus.THEIRS, word(8, DataType.FLOAT32, ReduceOp.MAX));
            w.set(ValueLayout.JAVA_LONG, 8L * KernelStatus.MINE, word(8, DataType.FLOAT32, ReduceOp.SUM));
        });
        late.start();
        JcclException e = KernelStatus.decode(w, 0, "GPU 0", TIMEOUT_NS);
        late.join();
        contains(e.getMessage(), "rank 1 called allReduce (8 x float max)", "rank 0 called allReduce (8 x float sum)");
    }

    // ---- the layouts shared with jccl_kernels.cu

    private static long define(String cu, String name) {
        Matcher m = Pattern.compile("(?m)^#define " + name + " (\\d+)").matcher(cu);
        assertTrue(m.find(), "no #define " + name + " <number> in " + CU);
        return Long.parseLong(m.group(1));
    }

    private static void asserted(String cu, String expression) {
        assertTrue(cu.contains(expression), "jccl_kernels.cu no longer asserts " + expression);
    }

    @Test
    void theJavaMirrorsMatchTheKernelSource() throws IOException {
        String cu = Files.readString(CU);
        assertEquals(SignalArea.GUARD, define(cu, "SIG_GUARD"));
        assertEquals(KernelArgs.MAX_BLOCKS, define(cu, "JCCL_MAX_BLOCKS"));
        assertEquals(KernelArgs.MAX_RANKS, define(cu, "JCCL_MAX_RANKS"));
        asserted(cu, "SIG_WORDS == " + SignalArea.WORDS);
        asserted(cu, "offsetof(OneShotArgs, guard) == " + KernelArgs.O_GUARD + " && sizeof(OneShotArgs) == " + KernelArgs.ONESHOT_BYTES);
        assertEquals(KernelStatus.ERR_ABORTED, define(cu, "ERR_ABORTED"));
        assertEquals(KernelStatus.ERR_TIMEOUT, define(cu, "ERR_TIMEOUT"));
        assertEquals(KernelStatus.ERR_MISMATCH, define(cu, "ERR_MISMATCH"));
        // status = abort word + 8: status word k is host word k + 1
        asserted(cu, "s[1] = epoch;");
        asserted(cu, "s[2] = (uint64_t)peer;");
        asserted(cu, "s[4] = theirs;");
        asserted(cu, "s[5] = mine;");
        assertEquals(KernelStatus.EPOCH, 1 + 1);
        assertEquals(KernelStatus.PEER, 2 + 1);
        assertEquals(KernelStatus.THEIRS, 4 + 1);
        assertEquals(KernelStatus.MINE, 5 + 1);
        assertTrue(8L * (KernelStatus.MINE + 1) <= KernelStatus.BYTES);
    }

    @Test
    void theOneShotArgumentBlockCarriesTheGuardWord() {
        KernelArgs a = KernelArgs.oneShot(Arena.ofAuto());
        a.clear();
        long g = word(4099, DataType.BFLOAT16, ReduceOp.MIN);
        a.oneShotOp(0x1000, 0x2000, 4099, 42, true, g);
        assertEquals(KernelArgs.ONESHOT_BYTES, a.block().byteSize());
        assertEquals(g, a.block().get(ValueLayout.JAVA_LONG, KernelArgs.O_GUARD));
        assertEquals(4099, a.block().get(ValueLayout.JAVA_LONG, KernelArgs.O_COUNT));
        assertEquals(42, a.block().get(ValueLayout.JAVA_LONG, KernelArgs.O_EPOCH));
        assertEquals(1, a.block().get(ValueLayout.JAVA_INT, KernelArgs.O_VEC));
    }
}
