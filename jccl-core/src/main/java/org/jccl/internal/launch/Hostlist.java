package org.jccl.internal.launch;

import java.util.ArrayList;
import java.util.List;

/**
 * Slurm's host list syntax ({@code SLURM_JOB_NODELIST}, {@code SLURM_STEP_NODELIST}), expanded into
 * host names in Slurm's order. The rules are those of Slurm's {@code src/common/hostlist.c} for
 * one-dimensional clusters:
 * <ul>
 *   <li>Entries are separated by commas, spaces, tabs or newlines; commas inside brackets belong
 *       to the bracket ({@code node[01-04,07],gpu1} is two entries).</li>
 *   <li>A bracket holds a comma list of numbers and ranges {@code lo-hi} ({@code lo <= hi}, at
 *       most {@value #MAX_RANGE} hosts per range, no negative numbers); each number is written
 *       zero-padded to the width of {@code lo} as written: {@code [08-10]} is 08, 09, 10 and
 *       {@code [8-10]} is 8, 9, 10.</li>
 *   <li>An entry may have several brackets ({@code rack[1-2]-n[3-4]} is rack1-n3, rack1-n4, rack2-n3,
 *       rack2-n4: the leftmost varies slowest) and text after its last bracket
 *       ({@code n[1-2]-ib}; Slurm accepts this from 23.02 on).</li>
 *   <li>An entry without a bracket is one host name, taken as written ({@code 10.0.0.5} too).</li>
 *   <li>Duplicates are kept, as in a Slurm hostlist (not a hostset).</li>
 * </ul>
 * Malformed text that Slurm never writes but some versions half-accept (a {@code [} without its
 * {@code ]}, signs or spaces in a range, brackets in the text after the last bracket, {@code x}
 * boxes of multi-dimensional clusters) is an error here, naming the entry and the rule. So are
 * {@code {...}} host list functions, which only slurmctld expands.
 */
public final class Hostlist {

    /** Hosts in one range, Slurm's MAX_RANGE. */
    public static final int MAX_RANGE = 64 * 1024;
    /** Hosts in a whole list: a guard against expanding nested ranges without bound. */
    public static final int MAX_HOSTS = 1 << 20;

    private Hostlist() {
    }

    /**
     * The host names of {@code list}, in order.
     *
     * @throws IllegalArgumentException naming the list, the entry and what is wrong with it
     */
    public static List<String> expand(String list) {
        List<String> out = new ArrayList<>();
        for (String entry : entries(list)) {
            try {
                expandEntry(entry, out);
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("host list '" + list + "': entry '" + entry + "' " + e.getMessage(), e);
            }
            if (out.size() > MAX_HOSTS) {
                throw new IllegalArgumentException("host list '" + list + "' names more than " + MAX_HOSTS + " hosts");
            }
        }
        return out;
    }

    /** The first host of {@code list}, or throws when it names none. */
    public static String first(String list) {
        List<String> hosts = expand(list);
        if (hosts.isEmpty()) {
            throw new IllegalArgumentException("host list '" + list + "' names no host");
        }
        return hosts.getFirst();
    }

    /** Splits at separators outside brackets. */
    static List<String> entries(String list) {
        List<String> out = new ArrayList<>();
        StringBuilder cur = new StringBuilder();
        int depth = 0;
        for (int i = 0; i < list.length(); i++) {
            char c = list.charAt(i);
            if (c == '[') {
                depth++;
            } else if (c == ']' && depth > 0) {
                depth--;
            }
            boolean sep = c == ',' || c == ' ' || c == '\t' || c == '\n';
            if (sep && depth == 0) {
                if (!cur.isEmpty()) {
                    out.add(cur.toString());
                    cur.setLength(0);
                }
            } else {
                cur.append(c);
            }
        }
        if (!cur.isEmpty()) {
            out.add(cur.toString());
        }
        return out;
    }

    private static void expandEntry(String entry, List<String> out) {
        if (entry.indexOf('{') >= 0 || entry.indexOf('}') >= 0) {
            throw new IllegalArgumentException("uses a {...} host list function, which only slurmctld expands; pass the"
                    + " expanded list (scontrol show hostnames)");
        }
        // Parse into literal pieces and bracket groups, left to right.
        List<String> literals = new ArrayList<>();
        List<List<long[]>> groups = new ArrayList<>();
        StringBuilder lit = new StringBuilder();
        int i = 0;
        while (i < entry.length()) {
            char c = entry.charAt(i);
            if (c == ']') {
                throw new IllegalArgumentException("has a ']' without its '['");
            }
            if (c != '[') {
                lit.append(c);
                i++;
                continue;
            }
            int close = entry.indexOf(']', i + 1);
            int nextOpen = entry.indexOf('[', i + 1);
            if (close < 0 || (nextOpen >= 0 && nextOpen < close)) {
                throw new IllegalArgumentException("has a '[' without its ']'");
            }
            literals.add(lit.toString());
            lit.setLength(0);
            groups.add(ranges(entry.substring(i + 1, close)));
            i = close + 1;
        }
        literals.add(lit.toString());
        int before = out.size();
        if (groups.isEmpty()) {
            out.add(literals.getFirst());
        } else {
            emit(literals, groups, groups.size() - 2, new String[groups.size()], out);
        }
        if (out.size() == before) {
            throw new IllegalArgumentException("names no host");
        }
    }

    /**
     * Appends every host, in Slurm's order: its hostlist.c takes the last bracket as the entry's
     * range and expands the brackets before it right to left, each one looping outside the ones
     * further left; so the second-to-last bracket varies slowest, then the others from the right,
     * down to the first, and the last bracket fastest ({@code r[1-2]s[1-2]n[0-1]}: r1s1n0, r1s1n1,
     * r2s1n0, r2s1n1, r1s2n0, ...). With two brackets that is plain left-to-right order.
     */
    private static void emit(List<String> literals, List<List<long[]>> groups, int g, String[] chosen, List<String> out) {
        int last = groups.size() - 1;
        if (g < 0) {
            StringBuilder prefix = new StringBuilder();
            for (int i = 0; i < last; i++) {
                prefix.append(literals.get(i)).append(chosen[i]);
            }
            prefix.append(literals.get(last));
            String suffix = literals.get(last + 1);
            for (long[] r : groups.get(last)) {
                for (long n = r[0]; n <= r[1]; n++) {
                    out.add(prefix + pad(n, (int) r[2]) + suffix);
                }
            }
            if (out.size() > MAX_HOSTS) {
                throw new IllegalArgumentException("names more than " + MAX_HOSTS + " hosts");
            }
            return;
        }
        for (long[] r : groups.get(g)) {
            for (long n = r[0]; n <= r[1]; n++) {
                chosen[g] = pad(n, (int) r[2]);
                emit(literals, groups, g - 1, chosen, out);
            }
        }
    }

    private static String pad(long n, int width) {
        String s = Long.toString(n);
        return s.length() >= width ? s : "0".repeat(width - s.length()) + s;
    }

    /** {lo, hi, width} for each comma-separated item of a bracket. */
    private static List<long[]> ranges(String body) {
        List<long[]> out = new ArrayList<>();
        if (body.isEmpty()) {
            throw new IllegalArgumentException("has an empty bracket '[]'");
        }
        for (String item : body.split(",", -1)) {
            int dash = item.indexOf('-');
            String lo = dash < 0 ? item : item.substring(0, dash);
            String hi = dash < 0 ? item : item.substring(dash + 1);
            if (!digits(lo) || !digits(hi)) {
                throw new IllegalArgumentException("has '" + item + "' in a bracket: expected a number or a range lo-hi of"
                        + " unsigned decimal numbers (e.g. [01-04,07])");
            }
            long l = number(lo, item);
            long h = number(hi, item);
            if (l > h) {
                throw new IllegalArgumentException("has the range '" + item + "' whose start is above its end");
            }
            if (h - l + 1 > MAX_RANGE) {
                throw new IllegalArgumentException("has the range '" + item + "' of more than " + MAX_RANGE + " hosts");
            }
            out.add(new long[] {l, h, lo.length()});
        }
        return out;
    }

    private static boolean digits(String s) {
        if (s.isEmpty()) {
            return false;
        }
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c < '0' || c > '9') {
                return false;
            }
        }
        return true;
    }

    private static long number(String s, String item) {
        if (s.length() > 18) {
            throw new IllegalArgumentException("has the number '" + s + "' in '" + item + "', which is too large");
        }
        return Long.parseLong(s);
    }
}
