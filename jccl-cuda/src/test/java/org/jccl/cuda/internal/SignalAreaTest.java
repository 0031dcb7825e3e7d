package org.jccl.cuda.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * Without a GPU: the Java descriptor of the signal area ({@link SignalArea}) and the kernels'
 * {@code #define}s in jccl_kernels.cu say the same. The kernel source is parsed (every {@code #define}
 * with a constant expression is evaluated), so changing a word index, a mode bit or a slot count on
 * one side only fails here, in CI, instead of a GPU hanging or reading another region's flags.
 */
class SignalAreaTest {
    private static final Path CU = Path.of("").toAbsolutePath().resolve("src/main/cuda/jccl_kernels.cu");

    /** SignalArea constants with no {@code #define SIG_*} of their own, and where each is checked instead. */
    private static final Set<String> JAVA_ONLY = Set.of(
            "MAX_RANKS", "MAX_BLOCKS",          // JCCL_MAX_RANKS, JCCL_MAX_BLOCKS
            "RING_SLOTS",                       // RING_SLOTS
            "CE_LANES", "CE_FREED", "CE_DONE",  // the SIG_CE comment
            "CE_SLOTS",                         // host side only: copy-engine slots in the push scratch
            "SELFTEST", "SELFTEST_OWN",         // host side only: the creation self-test copies, no kernel reads them
            "PIPE_FLAGS");                      // derived: PIPE up to CE

    /** Every {@code #define NAME <constant expression>} of the kernel source, evaluated, in source order. */
    private static Map<String, Long> defines(String cu) {
        Map<String, Long> out = new LinkedHashMap<>();
        Matcher m = Pattern.compile("(?m)^#define (\\w+) ([^\\n]*)$").matcher(cu);
        while (m.find()) {
            String expr = m.group(2).replaceAll("//.*", "").trim();
            Long v = new Expr(expr, out).value();
            if (v != null) {
                out.put(m.group(1), v);
            }
        }
        return out;
    }

    /** A C constant expression of numbers, earlier defines, + - * / and parentheses; null when it is anything else (a macro). */
    private static final class Expr {
        private final List<String> tokens = new ArrayList<>();
        private final Map<String, Long> known;
        private int at;

        Expr(String text, Map<String, Long> known) {
            this.known = known;
            Matcher t = Pattern.compile("\\s*(\\d+|[A-Za-z_]\\w*|[-+*/()]|\\S)").matcher(text);
            while (t.find()) {
                tokens.add(t.group(1));
            }
        }

        Long value() {
            if (tokens.isEmpty()) {
                return null;
            }
            try {
                long v = sum();
                return at == tokens.size() ? v : null;
            } catch (IllegalStateException e) {
                return null;
            }
        }

        private long sum() {
            long v = product();
            while (at < tokens.size() && (tokens.get(at).equals("+") || tokens.get(at).equals("-"))) {
                v = tokens.get(at++).equals("+") ? v + product() : v - product();
            }
            return v;
        }

        private long product() {
            long v = atom();
            while (at < tokens.size() && (tokens.get(at).equals("*") || tokens.get(at).equals("/"))) {
                v = tokens.get(at++).equals("*") ? v * atom() : v / atom();
            }
            return v;
        }

        private long atom() {
            if (at >= tokens.size()) {
                throw new IllegalStateException();
            }
            String t = tokens.get(at++);
            if (t.equals("(")) {
                long v = sum();
                if (at >= tokens.size() || !tokens.get(at++).equals(")")) {
                    throw new IllegalStateException();
                }
                return v;
            }
            if (t.matches("\\d+")) {
                return Long.parseLong(t);
            }
            Long v = known.get(t);
            if (v == null) {
                throw new IllegalStateException();
            }
            return v;
        }
    }

    private static Map<String, Integer> intConstants(Class<?> c) throws IllegalAccessException {
        Map<String, Integer> out = new TreeMap<>();
        for (Field f : c.getDeclaredFields()) {
            int m = f.getModifiers();
            if (Modifier.isStatic(m) && Modifier.isFinal(m) && Modifier.isPublic(m) && f.getType() == int.class) {
                out.put(f.getName(), f.getInt(null));
            }
        }
        return out;
    }

    private static Map<String, Long> kernelDefines() throws IOException {
        Map<String, Long> d = defines(Files.readString(CU));
        assertTrue(d.containsKey("SIG_START") && d.containsKey("SIG_WORDS"), "no #define SIG_* parsed from " + CU + ": " + d.keySet());
        return d;
    }

    @Test
    void theParserEvaluatesTheKernelsExpressions() {
        Map<String, Long> d = defines("#define A 8\n#define B (2 * A * 4) // c\n#define C (B + A)\n#define M(x) ((x) + 1)\n"
                + "#define D 10 - 2 - 3\n");
        assertEquals(Map.of("A", 8L, "B", 64L, "C", 72L, "D", 5L), d);
    }

    @Test
    void everySignalWordDefineHasItsDescriptorConstantWithTheSameValue() throws Exception {
        Map<String, Long> d = kernelDefines();
        Map<String, Integer> java = intConstants(SignalArea.class);
        Set<String> mirrored = new HashSet<>();
        for (Map.Entry<String, Long> e : d.entrySet()) {
            if (!e.getKey().startsWith("SIG_")) {
                continue;
            }
            String name = e.getKey().substring(4);
            Integer v = java.get(name);
            assertNotNull(v, "jccl_kernels.cu defines " + e.getKey() + " = " + e.getValue() + " but SignalArea has no " + name);
            assertEquals(e.getValue().longValue(), v.longValue(), "SignalArea." + name + " against jccl_kernels.cu " + e.getKey());
            mirrored.add(name);
        }
        for (String name : java.keySet()) {
            if (!JAVA_ONLY.contains(name) && !mirrored.contains(name)) {
                fail("SignalArea." + name + " has no #define SIG_" + name + " in jccl_kernels.cu (or belongs in JAVA_ONLY, with"
                        + " where it is checked)");
            }
        }
        assertEquals((long) SignalArea.MAX_RANKS, d.get("JCCL_MAX_RANKS").longValue(), "JCCL_MAX_RANKS");
        assertEquals((long) SignalArea.MAX_BLOCKS, d.get("JCCL_MAX_BLOCKS").longValue(), "JCCL_MAX_BLOCKS");
        assertEquals((long) SignalArea.RING_SLOTS, d.get("RING_SLOTS").longValue(), "RING_SLOTS");
        assertEquals(8L * SignalArea.WORDS, SignalArea.WORDS_BYTES);
    }

    @Test
    void theCopyEngineWordsMatchTheKernelSourcesDescription() throws IOException {
        String cu = Files.readString(CU);
        Matcher arrived = Pattern.compile("\\[(\\d+) \\+ (\\d+) lane \\+ src\\] arrived \\(lanes 0-(\\d+)\\)").matcher(cu);
        Matcher freed = Pattern.compile("\\[(\\d+) \\+ src\\] slot").matcher(cu);
        Matcher done = Pattern.compile("\\[(\\d+) \\+ src\\] done").matcher(cu);
        assertTrue(arrived.find() && freed.find() && done.find(), "jccl_kernels.cu no longer describes the SIG_CE words");
        assertEquals(SignalArea.CE, Integer.parseInt(arrived.group(1)));
        assertEquals(SignalArea.MAX_RANKS, Integer.parseInt(arrived.group(2)));
        assertEquals(SignalArea.CE_LANES - 1, Integer.parseInt(arrived.group(3)));
        assertEquals(SignalArea.CE_FREED, Integer.parseInt(freed.group(1)));
        assertEquals(SignalArea.CE_DONE, Integer.parseInt(done.group(1)));
        assertEquals(SignalArea.ceArrived(0, 0), SignalArea.CE);
        assertEquals(SignalArea.ceArrived(SignalArea.CE_LANES - 1, SignalArea.MAX_RANKS - 1) + 1, SignalArea.ceFreed(0));
        assertEquals(SignalArea.ceFreed(SignalArea.MAX_RANKS - 1) + 1, SignalArea.ceDone(0));
    }

    @Test
    void theModeAndPushBitsMatchTheKernelSource() throws Exception {
        Map<String, Long> d = kernelDefines();
        Map<String, Integer> java = intConstants(KernelArgs.class);
        int modes = 0;
        for (Map.Entry<String, Long> e : d.entrySet()) {
            if (e.getKey().startsWith("MODE_") || e.getKey().startsWith("PUSH_")) {
                assertEquals(e.getValue().longValue(), (long) java.getOrDefault(e.getKey(), -1), "KernelArgs." + e.getKey());
                modes++;
            }
        }
        assertEquals(10, modes, "8 MODE_* bits and 2 PUSH_* bits in jccl_kernels.cu");
        assertEquals((long) KernelArgs.MAX_RANKS, d.get("JCCL_MAX_RANKS").longValue(), "JCCL_MAX_RANKS");
        assertEquals((long) KernelArgs.MAX_BLOCKS, d.get("JCCL_MAX_BLOCKS").longValue(), "JCCL_MAX_BLOCKS");
    }

    /** The regions in word order: name, first word, words; each ends before the next begins, the last at WORDS. */
    @Test
    void theRegionsDoNotOverlapAndFillTheArea() {
        int r = SignalArea.MAX_RANKS;
        int b = SignalArea.MAX_BLOCKS;
        Object[][] regions = {
            {"START", SignalArea.START, b * r},
            {"END", SignalArea.END, b * r},
            {"READY", SignalArea.READY, r},
            {"DONE", SignalArea.DONE, r},
            {"COUNTER", SignalArea.COUNTER, 1},
            {"SELFTEST", SignalArea.SELFTEST, 2 * r + 4},
            {"PIPE", SignalArea.PIPE, SignalArea.PIPE_FLAGS},
            {"CE arrived", SignalArea.CE, SignalArea.CE_LANES * r},
            {"CE freed", SignalArea.CE_FREED, r},
            {"CE done", SignalArea.CE_DONE, r},
            {"RING_ARRIVED", SignalArea.RING_ARRIVED, b},
            {"RING_FREED", SignalArea.RING_FREED, b},
            {"GUARD", SignalArea.GUARD, 2 * b * r},
        };
        int end = 0;
        String last = "the start";
        for (Object[] g : regions) {
            int first = (Integer) g[1];
            assertTrue(first >= end, g[0] + " (word " + first + ") begins before " + last + " ends (word " + end + ")");
            end = first + (Integer) g[2];
            last = (String) g[0];
        }
        assertEquals(SignalArea.WORDS, end, "GUARD ends the signal words");
        assertEquals(SignalArea.SELFTEST_OWN, SignalArea.selfTestFrom(r));
        assertTrue(SignalArea.PIPE_FLAGS >= 2 * b, "chain-async's [block][parity] pipe flags fit");
    }

    @Test
    void everyGuardSlotHasAWordOfItsOwnInsideTheSignalArea() {
        Set<Integer> seen = new HashSet<>();
        for (int parity = 0; parity < 2; parity++) {
            for (int b = 0; b < SignalArea.MAX_BLOCKS; b++) {
                for (int src = 0; src < SignalArea.MAX_RANKS; src++) {
                    int w = SignalArea.guardWord(parity, b, src);
                    assertTrue(w >= SignalArea.GUARD && w < SignalArea.WORDS, "word " + w);
                    assertTrue(seen.add(w), "two guard slots share word " + w);
                }
            }
        }
        assertEquals(SignalArea.WORDS - SignalArea.GUARD, seen.size());
        assertEquals(SignalArea.guardWord(0, 5, 3), SignalArea.guardWord(2, 5, 3), "epochs 2 apart share a slot");
        assertEquals(0, SignalArea.guardWord(1, 7, 0) % 8, "a block's line starts at a 64-byte boundary");
    }

    @Test
    void theInboxAndThePushScratchFollowTheWordsBackToBack() {
        long area = 1L << 40;
        SignalArea a = new SignalArea(256 << 10, 64L << 20, 3);
        assertEquals(area + SignalArea.WORDS_BYTES, a.inbox(area, 0, 0));
        assertEquals(a.inbox(area, 0, 0) + SignalArea.MAX_RANKS * a.oneshotMax(), a.inbox(area, 1, 0));
        assertEquals(a.inbox(area, 1, SignalArea.MAX_RANKS - 1) + a.oneshotMax(), a.pushScratch(area, 0));
        assertEquals(a.pushScratch(area, 0) + a.pushSlot(), a.pushScratch(area, 1));
        assertEquals(a.pushScratch(area, 2) + a.pushSlot(), area + a.bytes());
        assertEquals(SignalArea.WORDS_BYTES + 2L * 8 * (256 << 10) + 3L * (64 << 20), a.bytes());
        assertEquals(area + 8L * SignalArea.CE_DONE, SignalArea.word(area, SignalArea.ceDone(0)));
    }
}
