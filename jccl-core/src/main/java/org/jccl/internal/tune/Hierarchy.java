package org.jccl.internal.tune;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.jccl.internal.tune.AlgoSelector.Algo;
import org.jccl.internal.tune.AlgoSelector.Coll;
import org.jccl.spi.LinkCosts;
import org.jccl.spi.PeerInfo;
import org.jccl.spi.Transport;

/**
 * Where the ranks of a communicator live, for the hierarchical collectives
 * ({@code org.jccl.internal.algo.HierCollectives}): the ranks grouped by host ({@link PeerInfo#hostHash()},
 * which {@code JCCL_HOSTID} can override), the groups the stages run on, and the cost model of a
 * hierarchical collective for the {@link Tuner}. Every rank derives all of it from the same peer
 * table, so every rank makes the same choices.
 *
 * <p>Hosts are numbered by their lowest rank; the ranks of a host by rank ("local index"). Placement
 * may be anything: ranks 0 and 2 on one host and 1 and 3 on another is as good as 0,1 | 2,3. The
 * stages:
 * <ul>
 * <li>intra: the ranks of this rank's host ({@link #intraGroup()}), over the same-host transport;</li>
 * <li>inter, leaders: one rank per host ({@link #leaders(int)}: the first of each host, or a given
 *     rank on its own host), over the network;</li>
 * <li>inter, slices: when every host has the same number L of ranks, the ranks of local index i of
 *     every host ({@link #sliceGroup()}), each group working on slice i of the vector.</li>
 * </ul>
 */
public final class Hierarchy {

    private final int[] hostOf;
    private final int[][] members;
    private final int myHost;
    private final int myLocal;
    private final boolean equal;
    private final int maxLocal;
    private final Tuner.Model intraModel;
    private final Tuner.Model interModel;
    private final Tuner intra;
    private final Tuner inter;
    private final AlgoSelector stages;
    private final long chunkBytes;

    private Hierarchy(int rank, int[] hostOf, int[][] members, Tuner.Model intraModel, Tuner.Model interModel, AlgoSelector selector,
                      long chunkBytes) {
        this.hostOf = hostOf;
        this.members = members;
        this.myHost = hostOf[rank];
        int local = 0;
        while (members[myHost][local] != rank) {
            local++;
        }
        this.myLocal = local;
        int max = 0;
        boolean eq = true;
        for (int[] m : members) {
            max = Math.max(max, m.length);
            eq &= m.length == members[0].length;
        }
        this.maxLocal = max;
        this.equal = eq;
        this.intraModel = intraModel;
        this.interModel = interModel;
        this.stages = selector.stages();
        this.chunkBytes = chunkBytes;
        this.intra = new Tuner(stages, members[myHost].length, chunkBytes, intraModel, rank);
        this.inter = new Tuner(stages, members.length, chunkBytes, interModel, rank);
    }

    /**
     * The layout of a communicator, or null when hierarchical collectives do not apply: all ranks on
     * one host, or one rank per host (the flat algorithms are then the same thing).
     */
    public static Hierarchy of(int rank, PeerInfo[] peers, List<Transport> transports, LinkCosts undeclared, AlgoSelector selector,
                                long chunkBytes) {
        Map<String, List<Integer>> byHost = new LinkedHashMap<>();
        for (int r = 0; r < peers.length; r++) {
            byHost.computeIfAbsent(peers[r].hostHash(), k -> new ArrayList<>()).add(r);
        }
        if (byHost.size() < 2 || byHost.size() == peers.length) {
            return null;
        }
        int[][] members = new int[byHost.size()][];
        int[] hostOf = new int[peers.length];
        int h = 0;
        for (List<Integer> m : byHost.values()) {
            members[h] = m.stream().mapToInt(Integer::intValue).toArray();
            for (int r : members[h]) {
                hostOf[r] = h;
            }
            h++;
        }
        // The same-host stage is priced with what each transport declares for that role (Transport#hostStageCosts),
        // the cross-host stage with its plain costs; names sorted, so every rank sees the same maps.
        Map<String, LinkCosts> intra = new TreeMap<>();
        Map<String, LinkCosts> inter = new TreeMap<>();
        for (int i = 0; i < peers.length; i++) {
            for (int j = i + 1; j < peers.length; j++) {
                for (Transport t : transports) {
                    String name = t.name();
                    if (peers[i].addresses().containsKey(name) && peers[j].addresses().containsKey(name) && t.canConnect(peers[i], peers[j])) {
                        if (hostOf[i] == hostOf[j]) {
                            intra.put(name, orElse(t.hostStageCosts(), undeclared));
                        } else {
                            inter.put(name, orElse(t.costs(), undeclared));
                        }
                        break;
                    }
                }
            }
        }
        Tuner.Model fallback = Tuner.model("none", undeclared);
        Tuner.Model in = Tuner.slowest(intra, fallback);
        Tuner.Model out = Tuner.slowest(inter, fallback);
        in = new Tuner.Model(in.transport() + ", same-host stage", in.alpha(), in.beta(), in.gamma(), in.copy());
        out = new Tuner.Model(out.transport() + ", cross-host stage", out.alpha(), out.beta(), out.gamma(), out.copy());
        return new Hierarchy(rank, hostOf, members, in, out, selector, chunkBytes);
    }

    private static LinkCosts orElse(LinkCosts c, LinkCosts undeclared) {
        return c != null ? c : undeclared;
    }

    /** The cost model of the same-host stage. */
    public Tuner.Model hostStageModel() {
        return intraModel;
    }

    /** The cost model of the cross-host stage. */
    public Tuner.Model crossHostModel() {
        return interModel;
    }

    /** Number of hosts. */
    public int hosts() {
        return members.length;
    }

    /** This rank's host index. */
    public int myHost() {
        return myHost;
    }

    /** The host index of communicator rank {@code r}. */
    public int hostOf(int r) {
        return hostOf[r];
    }

    /** This rank's index among the ranks of its host. */
    public int myLocal() {
        return myLocal;
    }

    /** Communicator ranks of host {@code h}, ascending (do not modify). */
    public int[] members(int h) {
        return members[h];
    }

    /** The ranks of this rank's host (do not modify). */
    public int[] intraGroup() {
        return members[myHost];
    }

    /** Whether every host has the same number of ranks (the slice form of all-reduce applies). */
    public boolean equalHosts() {
        return equal;
    }

    /**
     * One rank per host, by host: {@code rank} for its own host, the first rank of every other
     * host. Every rank computes the same group for the same {@code rank}.
     */
    public int[] leaders(int rankOnItsHost) {
        int[] l = new int[members.length];
        for (int h = 0; h < members.length; h++) {
            l[h] = h == hostOf[rankOnItsHost] ? rankOnItsHost : members[h][0];
        }
        return l;
    }

    /** The ranks of this rank's local index on every host, by host (equal hosts only). */
    public int[] sliceGroup() {
        int[] g = new int[members.length];
        for (int h = 0; h < members.length; h++) {
            g[h] = members[h][myLocal];
        }
        return g;
    }

    /** The cost model and algorithm choice of the same-host stage (n = this host's ranks). */
    public Tuner intraTuner() {
        return intra;
    }

    /** The cost model and algorithm choice of the cross-host stage (n = hosts). */
    public Tuner interTuner() {
        return inter;
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder();
        for (int h = 0; h < members.length; h++) {
            sb.append(h == 0 ? "" : " | ").append(Arrays.toString(members[h]).replace("[", "").replace("]", ""));
        }
        return members.length + " hosts: " + sb + "; same-host stage " + intraModel + ", cross-host stage " + interModel;
    }

    // ---------------------------------------------------------------------------------------- cost model

    /**
     * Whether an all-reduce of {@code bytes} takes the slice form (reduce-scatter on each host, an
     * all-reduce of each slice across hosts, all-gather on each host) rather than the leader form
     * (reduce to one rank per host, all-reduce among those, broadcast on each host). Equal hosts
     * only; the cheaper by the model, which every rank evaluates alike.
     */
    public boolean sliceAllReduce(long bytes) {
        return equal && maxLocal > 1 && sliceAllReduceCost(bytes) < leaderAllReduceCost(bytes);
    }

    /** Model cost of the hierarchical form of {@code coll}, for the flat {@link Tuner}'s comparison. */
    public double cost(Coll coll, long bytes) {
        return switch (coll) {
            case ALLREDUCE -> equal ? Math.min(sliceAllReduceCost(bytes), leaderAllReduceCost(bytes)) : leaderAllReduceCost(bytes);
            case BROADCAST -> best(Coll.BROADCAST, bytes, members.length, interModel, Algo.TREE, Algo.SCATTER_ALLGATHER)
                    + best(Coll.BROADCAST, bytes, maxLocal, intraModel, Algo.TREE, Algo.SCATTER_ALLGATHER);
            case REDUCE -> treeReduce(bytes, maxLocal, intraModel) + treeReduce(bytes, members.length, interModel);
            case ALLGATHER -> allGatherCost(bytes);
            case REDUCESCATTER -> equal ? Math.min(sliceReduceScatterCost(bytes), leaderReduceScatterCost(bytes))
                    : leaderReduceScatterCost(bytes);
            default -> Double.MAX_VALUE;
        };
    }

    /**
     * Leader form: a binomial reduce over the L ranks of a host (d = ceil(log2 L) steps of
     * alpha + m (beta + gamma) at the root), the cheapest allowed all-reduce of m bytes among the H
     * hosts, the cheapest allowed broadcast of m over L.
     */
    public double leaderAllReduceCost(long bytes) {
        return treeReduce(bytes, maxLocal, intraModel)
                + best(Coll.ALLREDUCE, bytes, members.length, interModel, Algo.RD, Algo.RABENSEIFNER, Algo.RING)
                + best(Coll.BROADCAST, bytes, maxLocal, intraModel, Algo.TREE, Algo.SCATTER_ALLGATHER);
    }

    /**
     * Slice form, L ranks per host: ring reduce-scatter (L-1)(alpha + m/L (beta + gamma)), the
     * cheapest allowed all-reduce of m/L among H, ring all-gather (L-1)(alpha + m/L beta).
     */
    public double sliceAllReduceCost(long bytes) {
        int l = maxLocal;
        double m = bytes;
        Tuner.Model i = intraModel;
        return (l - 1) * (i.alpha() + m / l * (i.beta() + i.gamma()))
                + best(Coll.ALLREDUCE, (bytes + l - 1) / l, members.length, interModel, Algo.RD, Algo.RABENSEIFNER, Algo.RING)
                + (l - 1) * (i.alpha() + m / l * i.beta());
    }

    /**
     * All-gather of m bytes in all (N blocks): each host's L-1 other blocks go to its first rank
     * (serialised there: (L-1)(alpha + m/N beta)), the H first ranks pass the hosts' blocks around a
     * ring, one message per block ((H-1) L alpha + (H-1)/H m beta), and each first rank broadcasts all
     * m over its host.
     */
    private double allGatherCost(long bytes) {
        int n = hostOf.length;
        int h = members.length;
        int l = maxLocal;
        double m = bytes;
        return (l - 1) * (intraModel.alpha() + m / n * intraModel.beta())
                + (h - 1) * (l * interModel.alpha() + m / h * interModel.beta())
                + best(Coll.BROADCAST, bytes, l, intraModel, Algo.TREE, Algo.SCATTER_ALLGATHER);
    }

    /**
     * Whether a reduce-scatter of {@code bytes} (the whole input) takes the slice form; see
     * {@code HierCollectives.reduceScatter}. Equal hosts only.
     */
    public boolean sliceReduceScatter(long bytes) {
        return equal && maxLocal > 1 && sliceReduceScatterCost(bytes) < leaderReduceScatterCost(bytes);
    }

    /**
     * Slice form, m the whole input: one reordering copy of m, ring reduce-scatter over the L ranks
     * of a host ((L-1)(alpha + m/L (beta + gamma))), ring reduce-scatter of the m/L of a slice group
     * over the H hosts ((H-1)(alpha + m/(LH) (beta + gamma))).
     */
    public double sliceReduceScatterCost(long bytes) {
        int l = maxLocal;
        int h = members.length;
        double m = bytes;
        Tuner.Model i = intraModel;
        Tuner.Model o = interModel;
        return m * i.copy() + (l - 1) * (i.alpha() + m / l * (i.beta() + i.gamma()))
                + (h - 1) * (o.alpha() + m / ((double) l * h) * (o.beta() + o.gamma()));
    }

    /**
     * Leader form: a reordering copy of m, a binomial reduce of m to the first rank of each host, a
     * ring reduce-scatter of the hosts' regions among those ((H-1)(alpha + m/H (beta + gamma))), and
     * the blocks sent to the host's ranks ((L-1)(alpha + m/N beta)).
     */
    public double leaderReduceScatterCost(long bytes) {
        int n = hostOf.length;
        int h = members.length;
        double m = bytes;
        Tuner.Model o = interModel;
        return m * intraModel.copy() + treeReduce(bytes, maxLocal, intraModel) + (h - 1) * (o.alpha() + m / h * (o.beta() + o.gamma()))
                + (maxLocal - 1) * (intraModel.alpha() + m / n * intraModel.beta());
    }

    /** Binomial reduce: d = ceil(log2 n) steps, each a message of m and a reduction of m at the root. */
    private static double treeReduce(long bytes, int n, Tuner.Model md) {
        int d = n <= 1 ? 0 : 32 - Integer.numberOfLeadingZeros(n - 1);
        return d * (md.alpha() + bytes * (md.beta() + md.gamma()));
    }

    /** The cheapest of the stage algorithms JCCL_ALGO allows (0 for one rank: nothing to do). */
    private double best(Coll coll, long bytes, int n, Tuner.Model md, Algo... algos) {
        if (n <= 1) {
            return 0;
        }
        double b = Double.MAX_VALUE;
        for (Algo a : algos) {
            if (stages.allowed(coll, a)) {
                b = Math.min(b, Tuner.cost(coll, a, bytes, n, chunkBytes, md, stages));
            }
        }
        return b;
    }
}
