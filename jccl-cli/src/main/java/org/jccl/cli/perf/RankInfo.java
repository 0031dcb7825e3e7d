package org.jccl.cli.perf;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;

/**
 * What the "# Using devices" block says about one rank.
 *
 * @param rank the rank
 * @param pid its process id
 * @param host its host name, up to the first dot (as nccl-tests prints it)
 * @param device accelerator index, or -1 for host memory
 * @param busId PCI id of the accelerator, or "cpu"
 * @param description device name: for host memory, the CPU count and Java version
 */
record RankInfo(int rank, long pid, String host, int device, String busId, String description) {

    /** Bytes of one rank's record in the all-gather that collects them (fixed, so every rank agrees). */
    static final int RECORD_BYTES = 512;

    /** This process, driving host memory. */
    static RankInfo local(int rank) {
        String desc = "host memory, " + Runtime.getRuntime().availableProcessors() + " CPUs, Java " + Runtime.version();
        return new RankInfo(rank, ProcessHandle.current().pid(), hostName(), -1, "cpu", desc);
    }

    /** This process, driving {@code gpu}: the CUDA ordinal, PCI bus id and product name, as nccl-tests prints them. */
    static RankInfo gpu(int rank, org.jccl.cuda.CudaDevice gpu) {
        return new RankInfo(rank, ProcessHandle.current().pid(), hostName(), gpu.ordinal(), gpu.pciBusId(), gpu.name());
    }

    /** The record sent to the other ranks: tab-separated UTF-8, zero-padded to {@link #RECORD_BYTES}. */
    byte[] encode() {
        String head = rank + "\t" + pid + "\t" + host + "\t" + device + "\t" + busId + "\t";
        String desc = description;
        byte[] text = (head + desc).getBytes(StandardCharsets.UTF_8);
        // Shorten the free-text field, never the ones decode() parses, and keep one zero byte as terminator.
        while (text.length >= RECORD_BYTES && !desc.isEmpty()) {
            desc = desc.substring(0, desc.length() - 1);
            text = (head + desc).getBytes(StandardCharsets.UTF_8);
        }
        if (text.length >= RECORD_BYTES) {
            throw new IllegalStateException("host name too long for the rank record: " + host);
        }
        return Arrays.copyOf(text, RECORD_BYTES);
    }

    /** Reads a record made by {@link #encode}. */
    static RankInfo decode(byte[] all, int offset) {
        int end = offset;
        while (end < offset + RECORD_BYTES && all[end] != 0) {
            end++;
        }
        String[] f = new String(all, offset, end - offset, StandardCharsets.UTF_8).split("\t", 6);
        if (f.length < 6) {
            throw new IllegalStateException("malformed rank record: " + Arrays.toString(f));
        }
        return new RankInfo(Integer.parseInt(f[0]), Long.parseLong(f[1]), f[2], Integer.parseInt(f[3]), f[4], f[5]);
    }

    /**
     * The host name without its domain, like nccl-tests' getHostName. Read from the kernel rather
     * than InetAddress, which may wait on DNS in containers.
     */
    static String hostName() {
        String h = null;
        try {
            h = Files.readString(Path.of("/proc/sys/kernel/hostname")).trim();
        } catch (IOException | RuntimeException e) {
            // Not Linux: fall back to the environment, then to the resolver.
        }
        if (h == null || h.isEmpty()) {
            h = System.getenv("HOSTNAME");
        }
        if (h == null || h.isEmpty()) {
            try {
                h = java.net.InetAddress.getLocalHost().getHostName();
            } catch (IOException e) {
                h = "localhost";
            }
        }
        int dot = h.indexOf('.');
        return dot > 0 ? h.substring(0, dot) : h;
    }
}
