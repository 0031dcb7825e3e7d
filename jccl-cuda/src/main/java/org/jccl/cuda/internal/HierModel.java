package org.jccl.cuda.internal;

import java.util.Locale;
import org.jccl.cuda.internal.HierPlan.Form;

/**
 * The cost model of the hierarchical GPU all-reduce, for shapes this machine cannot run (64 hosts x 8
 * GPUs): alpha-beta costs of each stage, the forms of {@link HierPlan} compared, and the cross-host
 * algorithm the host tuner would take for the bytes each GPU carries. A pipeline of S steps costs
 * the first step's stages in sequence plus (steps - 1) times its slowest stage.
 *
 * @param hosts H
 * @param gpus L GPUs per host
 * @param nics NICs per host (GPUs share them when fewer than L)
 * @param nvlink intra-host link: alpha (s) and beta (s per byte) of jccl's kernels
 * @param pcie beta (s per byte) of a copy between GPU and pinned memory
 * @param net alpha (s) and beta (s per byte) of one NIC
 */
public record HierModel(int hosts, int gpus, int nics, double[] nvlink, double pcie, double[] net) {

    /** An NVLink 4 / PCIe 5 / 400 Gb/s InfiniBand host: 8 GPUs and 8 NICs. */
    public static HierModel cluster(int hosts, int gpus, int nics) {
        return new HierModel(hosts, gpus, nics, new double[] {8e-6, 1 / 300e9}, 1 / 45e9, new double[] {6e-6, 1 / 48e9});
    }

    /** A choice and its reasons. */
    public record Choice(Form form, String crossAlgo, double seconds, int steps, String why) {
    }

    /** Cross-host all-reduce of {@code bytes} among H hosts: the cheapest of recursive doubling, Rabenseifner and ring. */
    String[] crossAlgo(double bytes, double share) {
        int h = hosts;
        double a = net[0];
        double b = net[1] * share;
        int lg = 32 - Integer.numberOfLeadingZeros(h - 1);
        double rd = lg * (a + bytes * b);
        double rab = 2 * lg * a + 2.0 * (h - 1) / h * bytes * b;
        double ring = 2 * (h - 1) * a + 2.0 * (h - 1) / h * bytes * b;
        if (rd <= rab && rd <= ring) {
            return new String[] {"rd", Double.toString(rd)};
        }
        return rab <= ring ? new String[] {"rabenseifner", Double.toString(rab)} : new String[] {"ring", Double.toString(ring)};
    }

    /** The all-reduce of {@code bytes} in form {@code f} with steps of at most {@code chunk} bytes and {@code slots} in flight. */
    public Choice cost(Form f, long bytes, long chunk, int slots) {
        long step = HierPlan.stepBytes(bytes, chunk, slots);
        int steps = (int) Math.max(1, (bytes + step - 1) / step);
        double m = Math.min(bytes, step);
        int l = gpus;
        // GPUs whose legs cross hosts at once share the host's NICs
        int crossing = f == Form.LEADER ? 1 : l;
        double share = Math.max(1.0, (double) crossing / nics);
        double across = f == Form.SLICE ? m / l : m;
        String[] x = crossAlgo(across, share);
        double intraPre = switch (f) {
            case SLICE -> l > 1 ? nvlink[0] + (l - 1.0) / l * m * nvlink[1] : 0;
            case WHOLE -> l > 1 ? nvlink[0] + m * nvlink[1] : 0;
            case LEADER -> l > 1 ? Math.ceil(Math.log(l) / Math.log(2)) * (nvlink[0] + m * nvlink[1]) : 0;
        };
        double intraPost = switch (f) {
            case SLICE -> l > 1 ? nvlink[0] + (l - 1.0) / l * m * nvlink[1] : 0;
            case WHOLE -> 0;
            case LEADER -> l > 1 ? nvlink[0] + m * nvlink[1] : 0;
        };
        double copyOut = across * pcie;
        double copyIn = across * pcie;
        double network = Double.parseDouble(x[1]);
        double first = intraPre + copyOut + network + copyIn + intraPost;
        double slowest = Math.max(Math.max(intraPre + intraPost, Math.max(copyOut, copyIn)), network);
        double t = first + (steps - 1) * (slots > 1 ? slowest : first);
        String why = String.format(Locale.ROOT, "%s: %d step(s) of %s; per step %s in the host, %s over PCIe each way, %s across %d hosts by %s"
                        + " (%d GPU(s) per host crossing over %d NIC(s))", f, steps, bytes(m), us(intraPre + intraPost), us(copyOut), us(network),
                hosts, x[0], crossing, nics);
        return new Choice(f, x[0], t, steps, why);
    }

    /** The cheaper of SLICE and WHOLE (equal hosts), with both costs in the reason. */
    public Choice choose(long bytes, long chunk, int slots) {
        Choice s = cost(Form.SLICE, bytes, chunk, slots);
        Choice w = cost(Form.WHOLE, bytes, chunk, slots);
        Choice best = s.seconds() <= w.seconds() || gpus == 1 ? s : w;
        if (gpus == 1) {
            best = w;
        }
        Choice other = best == s ? w : s;
        String why = String.format(Locale.ROOT, "%d hosts x %d GPUs, %s: %s takes %s, %s would take %s. %s", hosts, gpus, bytes(bytes),
                best.form(), us(best.seconds()), other.form(), us(other.seconds()), best.why());
        return new Choice(best.form(), best.crossAlgo(), best.seconds(), best.steps(), why);
    }

    private static String us(double s) {
        return String.format(Locale.ROOT, "%.1f us", s * 1e6);
    }

    private static String bytes(double b) {
        return b >= 1 << 20 ? String.format(Locale.ROOT, "%.0f MiB", b / (1 << 20))
                : b >= 1024 ? String.format(Locale.ROOT, "%.0f KiB", b / 1024) : String.format(Locale.ROOT, "%.0f B", b);
    }
}
