package org.jccl.cuda.internal;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * How a GPU communicator's ranks split into hosts, from every rank's host identity (the host
 * communicator's, which honours JCCL_HOSTID): hosts numbered by their lowest rank, the ranks of a
 * host by rank ("local index"). Two kinds of groups come out of it, each one host
 * {@link org.jccl.Communicator#split} away:
 * <ul>
 * <li>the <b>local group</b>: the ranks of this rank's host (one NVLink domain: jccl's kernels and
 *     CUDA IPC), split colour = host index, key = rank;</li>
 * <li>the <b>cross-host group</b>: the ranks of this rank's local index on every host that has one,
 *     split colour = local index, key = host index, so a cross-host rank is its host's index. With
 *     equal hosts every cross-host group spans all hosts (slice forms); with uneven hosts only group 0
 *     (the first rank of each host, the "leaders") does (leader forms).</li>
 * </ul>
 * Every rank derives the same split from the same table, so all take the same path.
 */
public final class HostSplit {
    private final int[] hostOf;
    private final int[] localOf;
    private final int[][] members;
    private final int rank;
    private final boolean equal;

    private HostSplit(int rank, int[] hostOf, int[] localOf, int[][] members) {
        this.rank = rank;
        this.hostOf = hostOf;
        this.localOf = localOf;
        this.members = members;
        boolean eq = true;
        for (int[] m : members) {
            eq &= m.length == members[0].length;
        }
        this.equal = eq;
    }

    /** The split seen by {@code rank}, from the host identity of every rank (in rank order; equal strings: one host). */
    public static HostSplit of(int rank, List<String> hostKeys) {
        int n = hostKeys.size();
        if (rank < 0 || rank >= n) {
            throw new IllegalArgumentException("rank " + rank + " outside [0, " + n + ")");
        }
        Map<String, List<Integer>> byHost = new LinkedHashMap<>();
        for (int r = 0; r < n; r++) {
            byHost.computeIfAbsent(hostKeys.get(r), k -> new ArrayList<>()).add(r);
        }
        int[][] members = new int[byHost.size()][];
        int[] hostOf = new int[n];
        int[] localOf = new int[n];
        int h = 0;
        for (List<Integer> m : byHost.values()) {
            members[h] = m.stream().mapToInt(Integer::intValue).toArray();
            for (int i = 0; i < members[h].length; i++) {
                hostOf[members[h][i]] = h;
                localOf[members[h][i]] = i;
            }
            h++;
        }
        return new HostSplit(rank, hostOf, localOf, members);
    }

    /** Ranks in all. */
    public int size() {
        return hostOf.length;
    }

    public int rank() {
        return rank;
    }

    public int hosts() {
        return members.length;
    }

    /** Whether more than one host takes part (otherwise the GPU communicator is one NVLink domain). */
    public boolean multiHost() {
        return members.length > 1;
    }

    /** Whether every host has the same number of ranks (the slice forms apply). */
    public boolean equalHosts() {
        return equal;
    }

    public int myHost() {
        return hostOf[rank];
    }

    public int myLocal() {
        return localOf[rank];
    }

    /** Ranks on this rank's host. */
    public int localSize() {
        return members[hostOf[rank]].length;
    }

    public int hostOf(int r) {
        return hostOf[r];
    }

    public int localOf(int r) {
        return localOf[r];
    }

    /** The rank of local index {@code local} on host {@code host}. */
    public int member(int host, int local) {
        return members[host][local];
    }

    /** Ranks of host {@code h}, ascending (a copy). */
    public int[] members(int h) {
        return members[h].clone();
    }

    /** The split colour and key of the local group (colour = host index, key = rank). */
    public int[] localColorKey() {
        return new int[] {myHost(), rank};
    }

    /** The split colour and key of the cross-host group (colour = local index, key = host index). */
    public int[] crossColorKey() {
        return new int[] {myLocal(), myHost()};
    }

    /** The ranks of this rank's cross-host group, by host index (hosts without this local index left out). */
    public int[] crossGroup() {
        List<Integer> g = new ArrayList<>();
        for (int[] m : members) {
            if (m.length > myLocal()) {
                g.add(m[myLocal()]);
            }
        }
        return g.stream().mapToInt(Integer::intValue).toArray();
    }

    /** "2 hosts: 0,1 | 2,3" */
    public String describe() {
        StringBuilder sb = new StringBuilder(members.length + " hosts: ");
        for (int h = 0; h < members.length; h++) {
            sb.append(h == 0 ? "" : " | ").append(Arrays.toString(members[h]).replace("[", "").replace("]", "").replace(" ", ""));
        }
        return sb.toString();
    }

    /** "local group [0, 1] (host 0 of 2), cross-host group [0, 2] (local index 0)" */
    public String groups() {
        return "local group " + Arrays.toString(members[myHost()]) + " (host " + myHost() + " of " + hosts() + "), cross-host group "
                + Arrays.toString(crossGroup()) + " (local index " + myLocal() + (equal ? "" : ", uneven hosts: leader forms") + ")";
    }

    private static final java.util.regex.Pattern RANK = java.util.regex.Pattern.compile("\\brank (\\d+)\\b(?! of )");

    /**
     * {@code message} of a group whose rank r is rank {@code members[r]} of the whole GPU communicator, with
     * every "rank r" renamed to the whole communicator's rank ("rank r of n", a group's own size, stays).
     */
    public static String inWorldRanks(String message, int[] members) {
        if (message == null) {
            return null;
        }
        java.util.regex.Matcher m = RANK.matcher(message);
        StringBuilder sb = new StringBuilder();
        while (m.find()) {
            int r;
            try {
                r = Integer.parseInt(m.group(1));
            } catch (NumberFormatException e) {
                r = -1;
            }
            m.appendReplacement(sb, r >= 0 && r < members.length ? "rank " + members[r] : m.group());
        }
        m.appendTail(sb);
        return sb.toString();
    }

    /**
     * A failure of a group (ranks {@code members}, see {@link #inWorldRanks(String, int[])}) as the whole
     * communicator names it: same kind and code, ranks renamed, the original as its cause.
     */
    public static org.jccl.JcclException inWorldRanks(org.jccl.JcclException x, int[] members) {
        String msg = inWorldRanks(x.getMessage(), members);
        if (x instanceof org.jccl.PeerFailedException p) {
            int peer = p.peerRank() >= 0 && p.peerRank() < members.length ? members[p.peerRank()] : -1;
            org.jccl.PeerFailedException y = new org.jccl.PeerFailedException(peer, msg, x);
            y.at(-1, peer, x.operation(), x.sequence());
            return y;
        }
        org.jccl.JcclException y = new org.jccl.JcclException(x.code(), msg, x);
        return y.at(-1, x.peer() >= 0 && x.peer() < members.length ? members[x.peer()] : -1, x.operation(), x.sequence());
    }

    /** The world ranks of this rank's host, by local index. */
    public int[] localGroup() {
        return members[myHost()].clone();
    }
}
