package org.jccl.internal.config;

import java.util.Collection;
import java.util.Locale;

/**
 * "Did you mean X?" for misspelt names: the closest candidate by edit distance (Levenshtein with
 * swaps of neighbours, case-insensitive), when it is close enough to be a typo. Stateless.
 */
public final class DidYouMean {

    private DidYouMean() {
    }

    /**
     * The candidate closest to {@code name}, or null when none is plausibly meant: within 3 edits
     * and within a third of the name's length, at least 1 (so a short name like {@code SHM} is not
     * "corrected" to a different word); else one that ends with the name after an underscore, or
     * vice versa ({@code JCCL_NTHREADS} and {@code JCCL_SOCKET_NTHREADS}). Ties: the first candidate.
     *
     * @param prefix a common prefix ignored when measuring (e.g. {@code JCCL_}); may be empty
     */
    public static String closest(String name, Collection<String> candidates, String prefix) {
        String n = strip(name, prefix);
        String best = null;
        int bestDistance = Integer.MAX_VALUE;
        for (String c : candidates) {
            if (c.equals(name)) {
                continue;
            }
            int d = distance(n, strip(c, prefix));
            if (d < bestDistance) {
                best = c;
                bestDistance = d;
            }
        }
        if (best != null && bestDistance <= Math.min(3, Math.max(1, n.length() / 3))) {
            return best;
        }
        for (String c : candidates) {
            String s = strip(c, prefix);
            if (n.length() >= 4 && s.length() >= 4 && (s.endsWith("_" + n) || n.endsWith("_" + s))) {
                return c;
            }
        }
        return null;
    }

    /** " did you mean X?" or "" when nothing is close; convenient for messages. */
    public static String hint(String name, Collection<String> candidates, String prefix) {
        String c = closest(name, candidates, prefix);
        return c == null ? "" : "; did you mean " + c + "?";
    }

    private static String strip(String s, String prefix) {
        String u = s.toUpperCase(Locale.ROOT);
        return !prefix.isEmpty() && u.startsWith(prefix) ? u.substring(prefix.length()) : u;
    }

    /** Edit distance: insertions, deletions, substitutions and swaps of neighbours each cost 1 (optimal string alignment). */
    static int distance(String a, String b) {
        int[][] d = new int[a.length() + 1][b.length() + 1];
        for (int i = 0; i <= a.length(); i++) {
            d[i][0] = i;
        }
        for (int j = 0; j <= b.length(); j++) {
            d[0][j] = j;
        }
        for (int i = 1; i <= a.length(); i++) {
            for (int j = 1; j <= b.length(); j++) {
                int cost = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
                int v = Math.min(d[i - 1][j - 1] + cost, Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1));
                if (i > 1 && j > 1 && a.charAt(i - 1) == b.charAt(j - 2) && a.charAt(i - 2) == b.charAt(j - 1)) {
                    v = Math.min(v, d[i - 2][j - 2] + 1);
                }
                d[i][j] = v;
            }
        }
        return d[a.length()][b.length()];
    }
}
