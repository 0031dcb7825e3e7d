package org.jccl.internal.control;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.jccl.internal.guard.OpGuard;

/**
 * The hub's side of the mismatch guard's backstop ({@link ControlPlane#probeGuard}): a rank that
 * has waited in collective call {@code index} for a second sends its guard word of that call
 * (GUARD_ASK); the hub asks every rank that has not told its word yet (GUARD_QUERY, answered with
 * GUARD_ANSWER) and, as soon as two words differ, has every rank aborted with a MISMATCH that names
 * who called what and how the calls differ. It remembers the answers for the 8 call indices asked
 * about last.
 *
 * <p>Threading: the control thread of the hub.
 */
final class GuardBackstop {

    /** What the backstop needs of the hub's control plane (control thread). */
    interface Hub {
        /** Whether a fault was declared already: nothing more to compare. */
        boolean decided();

        /** The hub's own guard word of call {@code index} ({@link ControlPlane.Host#guardAt}). */
        long ownGuard(long index);

        /** Sends {@code query} to rank {@code r} if its link is open; returns whether it did. */
        boolean ask(int r, ByteBuffer query);

        /** Calls differ: aborts every rank with {@code report}, naming {@code culprit}, for call {@code index}. */
        void mismatch(int culprit, String report, long index);
    }

    /** A query is out to that rank. */
    private static final long ASKED = Long.MIN_VALUE + 2;

    private final int size;
    private final Peers peers;
    private final Hub hub;
    /**
     * What each rank said its guard word of a collective call is ({@link ControlPlane#GUARD_NOT_YET},
     * {@link ControlPlane#GUARD_UNKNOWN}, the word, or {@link #ASKED} while a query is out), for the
     * few call indices some rank asked about lately.
     */
    private final TreeMap<Long, long[]> answers = new TreeMap<>();
    /** The rank that asked first about each index, and how long it had waited (for the report). */
    private final Map<Long, Integer> asker = new HashMap<>();

    GuardBackstop(int size, Peers peers, Hub hub) {
        this.size = size;
        this.peers = peers;
        this.hub = hub;
    }

    /** GUARD_ASK: rank to hub, "I wait in call {@code index} with this word". */
    static ByteBuffer askFrame(long index, long guard) {
        return ControlWire.seal(ControlWire.frame(ControlWire.GUARD_ASK, 16).putLong(index).putLong(guard));
    }

    /** GUARD_ANSWER: rank to hub, its {@code word} of call {@code index}. */
    static ByteBuffer answerFrame(long index, long word) {
        ByteBuffer f = ControlWire.frame(ControlWire.GUARD_ANSWER, 16);
        f.putLong(index).putLong(word);
        return ControlWire.seal(f);
    }

    /** Rank {@code r} says its word of call {@code index} is {@code answer}; {@code asked}: it waits in it and asks for a comparison. */
    void onGuard(int r, long index, long answer, boolean asked) {
        long[] a = answers.get(index);
        if (a == null) {
            if (!asked) {
                return; // an answer about an index dropped meanwhile
            }
            while (answers.size() >= 8) {
                long oldest = answers.firstKey();
                answers.remove(oldest);
                asker.remove(oldest);
            }
            a = new long[size];
            Arrays.fill(a, ControlPlane.GUARD_NOT_YET);
            answers.put(index, a);
            asker.put(index, r);
        }
        a[r] = answer;
        if (compare(index, a)) {
            return;
        }
        if (!asked) {
            return;
        }
        // Ask the ranks that have not told their word yet (not started, or not asked): the hub answers for itself.
        ByteBuffer q = null;
        for (int x = 0; x < size; x++) {
            if (a[x] != ControlPlane.GUARD_NOT_YET) {
                continue;
            }
            if (x == 0) {
                a[0] = hub.ownGuard(index);
            } else {
                if (q == null) {
                    q = ControlWire.seal(ControlWire.frame(ControlWire.GUARD_QUERY, 8).putLong(index));
                }
                if (hub.ask(x, q.duplicate())) {
                    a[x] = ASKED;
                }
            }
        }
        compare(index, a);
    }

    /** When two ranks' words of call {@code index} differ, has every rank aborted with a MISMATCH naming them; returns whether a fault stands. */
    private boolean compare(long index, long[] a) {
        if (hub.decided()) {
            return true;
        }
        LinkedHashMap<Long, List<Integer>> calls = new LinkedHashMap<>();
        for (int r = 0; r < size; r++) {
            long w = a[r];
            if (w != ControlPlane.GUARD_NOT_YET && w != ControlPlane.GUARD_UNKNOWN && w != ASKED && w != 0) {
                calls.computeIfAbsent(w, k -> new ArrayList<>()).add(r);
            }
        }
        if (calls.size() < 2) {
            return false;
        }
        List<Map.Entry<Long, List<Integer>>> groups = new ArrayList<>(calls.entrySet());
        // The largest group first: the others are named as deviating from it.
        groups.sort((x, y) -> y.getValue().size() - x.getValue().size());
        StringBuilder sb = new StringBuilder("mismatched collective calls at collective call #" + index + " (found by the mismatch"
                + " guard when " + peers.describe(asker.getOrDefault(index, 0)) + " had waited in it for a second): ");
        for (int i = 0; i < groups.size(); i++) {
            List<Integer> rs = groups.get(i).getValue();
            sb.append(i == 0 ? "" : i == groups.size() - 1 ? " but " : ", ");
            sb.append(rs.size() == 1 ? peers.describe(rs.get(0)) : "ranks " + StallReport.ranges(rs)).append(" called ")
                    .append(OpGuard.describe(groups.get(i).getKey()));
        }
        long first = groups.get(0).getKey();
        List<String> diffs = new ArrayList<>();
        for (int i = 1; i < groups.size(); i++) {
            diffs.addAll(OpGuard.differences(first, groups.get(i).getKey()));
        }
        sb.append("; they differ in ").append(String.join(", ", new LinkedHashSet<>(diffs)))
                .append(". Every rank must call the same collectives in the same order, with the same count, data type, op and root");
        int culprit = groups.get(groups.size() - 1).getValue().get(0);
        hub.mismatch(culprit, sb.toString(), index);
        return true;
    }
}
