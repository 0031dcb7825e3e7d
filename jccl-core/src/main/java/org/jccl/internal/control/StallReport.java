package org.jccl.internal.control;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jccl.spi.PeerInfo;

/**
 * The one line a rank logs when an operation stalled, from every rank's {@link RankState}:
 * <pre>all_reduce #42 stalled 30 s: ranks 0-2,4-7 wait; rank 3 (host b, pid 881) last at #41 broadcast</pre>
 * Ranks at the stalled sequence number that called something else (another collective, count,
 * type, reduction or root) are reported as a mismatch, naming both groups; ranks that passed it,
 * did not answer, closed or aborted their communicator are named too. A pure function of its
 * inputs (unit-tested on its own).
 */
public final class StallReport {
    private StallReport() {
    }

    /**
     * The line for an operation {@code seq} ({@code name}, waiting {@code waitedMs}) as seen by
     * every rank: {@code states[r]} is rank r's state when {@code how[r]} is {@link ControlWire#HOW_ANSWERED}.
     */
    public static String line(String name, long seq, long waitedMs, RankState[] states, int[] how, PeerInfo[] peers) {
        int n = how.length;
        // Ranks at seq, grouped by what they called there; the most common call first.
        Map<String, List<Integer>> atSeq = new LinkedHashMap<>();
        Map<String, List<Integer>> others = new LinkedHashMap<>();
        for (int r = 0; r < n; r++) {
            RankState s = states[r];
            String key;
            switch (how[r]) {
                case ControlWire.HOW_SILENT -> key = "did not answer";
                case ControlWire.HOW_CLOSED -> key = "closed its communicator";
                case ControlWire.HOW_ABORTED -> key = "aborted its communicator";
                default -> {
                    if (s.curSeq() == seq) {
                        atSeq.computeIfAbsent(s.signature(), k -> new ArrayList<>()).add(r);
                        continue;
                    }
                    if (s.lastIssued() < seq) {
                        key = s.busy() ? "waits at #" + s.curSeq() + " " + ControlWire.collName(s.curName())
                                : s.lastIssued() < 0 ? "has issued no operation"
                                : "last at #" + s.lastIssued() + " " + ControlWire.collName(s.lastName());
                    } else {
                        key = s.busy() ? "passed it, waits at #" + s.curSeq() + " " + ControlWire.collName(s.curName())
                                : "passed it, last at #" + s.lastIssued() + " " + ControlWire.collName(s.lastName());
                    }
                }
            }
            others.computeIfAbsent(key, k -> new ArrayList<>()).add(r);
        }
        StringBuilder sb = new StringBuilder();
        sb.append(ControlWire.collName(name)).append(" #").append(seq).append(" stalled ").append(seconds(waitedMs)).append(" s: ");
        List<String> parts = new ArrayList<>();
        List<Map.Entry<String, List<Integer>>> groups = new ArrayList<>(atSeq.entrySet());
        groups.sort((a, b) -> Integer.compare(b.getValue().size(), a.getValue().size()));
        if (groups.size() == 1) {
            List<Integer> w = groups.get(0).getValue();
            parts.add(ranksWord(w) + " " + ranges(w) + (w.size() == 1 ? " waits" : " wait"));
        } else if (groups.size() > 1) {
            StringBuilder m = new StringBuilder("mismatched collectives at #").append(seq).append(": ");
            for (int i = 0; i < groups.size(); i++) {
                List<Integer> g = groups.get(i).getValue();
                m.append(i == 0 ? "" : ", ").append(i == 0 ? ranksWord(g) + " " + ranges(g) : who(g, peers)).append(" called ")
                        .append(groups.get(i).getKey());
            }
            parts.add(m.toString());
        }
        for (Map.Entry<String, List<Integer>> e : others.entrySet()) {
            parts.add(who(e.getValue(), peers) + " " + e.getKey());
        }
        sb.append(String.join("; ", parts));
        return sb.toString();
    }

    /** Seconds, whole when at least 10, else with one decimal. */
    static String seconds(long ms) {
        return ms >= 10_000 ? Long.toString(Math.round(ms / 1000.0)) : String.format(java.util.Locale.ROOT, "%.1f", ms / 1000.0);
    }

    private static String ranksWord(List<Integer> rs) {
        return rs.size() == 1 ? "rank" : "ranks";
    }

    /** "rank 3 (host b, pid 881)", "ranks 3 (host b, pid 881), 5 (host c, pid 9)", or "ranks 3-9" beyond four. */
    static String who(List<Integer> rs, PeerInfo[] peers) {
        if (rs.size() > 4) {
            return "ranks " + ranges(rs);
        }
        StringBuilder sb = new StringBuilder(ranksWord(rs)).append(' ');
        for (int i = 0; i < rs.size(); i++) {
            int r = rs.get(i);
            sb.append(i == 0 ? "" : ", ").append(r);
            if (peers != null && r < peers.length && peers[r] != null) {
                sb.append(" (host ").append(peers[r].host()).append(", pid ").append(peers[r].pid()).append(')');
            }
        }
        return sb.toString();
    }

    /** "0-2,4-7" of ascending ranks. */
    static String ranges(List<Integer> rs) {
        StringBuilder sb = new StringBuilder();
        int i = 0;
        while (i < rs.size()) {
            int j = i;
            while (j + 1 < rs.size() && rs.get(j + 1) == rs.get(j) + 1) {
                j++;
            }
            sb.append(sb.isEmpty() ? "" : ",").append(rs.get(i));
            if (j > i) {
                sb.append('-').append(rs.get(j));
            }
            i = j + 1;
        }
        return sb.toString();
    }
}
