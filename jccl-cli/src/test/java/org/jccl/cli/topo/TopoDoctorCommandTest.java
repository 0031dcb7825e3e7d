package org.jccl.cli.topo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import org.jccl.cli.JcclCli;
import org.jccl.internal.net.Interfaces;
import org.jccl.internal.util.Json;
import org.jccl.internal.topo.PciLocation;
import org.jccl.internal.topo.Topologies;
import org.jccl.internal.topo.Topology;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** {@code jccl topo} and {@code jccl doctor} through picocli: options, output, exit codes, JCCL_TOPO_FILE. */
@Timeout(60)
class TopoDoctorCommandTest {

    @TempDir
    Path dir;

    private record Result(int code, String out, String err) {
    }

    private static Result run(Callable<Integer> command, String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        CommandLine cl = new CommandLine(command);
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        int code = cl.execute(args);
        return new Result(code, out.toString(), err.toString());
    }

    /** A saved Kubernetes pod: 16 CPUs, 64 MiB /dev/shm, no GPUs or RDMA. */
    private Path savedPod() {
        Topology t = new Topology("trainer-0", 16, List.of(new Topology.NumaNode(0, "0-15", -1)),
                List.of(new Topology.NetDevice("eth0", "up", 25000, PciLocation.fromSysfsPath("pci0000:00/0000:00:03.0", -1))), List.of(),
                List.of(), new Topology.GpuDirect("", false, false, "5.10.0", "", false), new Topology.Shm("/dev/shm", 64L << 20, 64L << 20),
                new Topology.Limits(65536, 65536, 1048576, 1048576, -1, 4096, 4096),
                new Topology.Container("kubernetes", "KUBERNETES_SERVICE_HOST=10.96.0.1"), "not used");
        Path f = dir.resolve("pod.json");
        Topologies.write(t, f);
        return f;
    }

    private static List<Interfaces.Nic> eth0() throws Exception {
        return List.of(new Interfaces.Nic("eth0", true, false, List.of(InetAddress.getByName("10.2.0.7"))));
    }

    @Test
    void doctorOnASavedPodFailsTheShmCheckWithExitCode2() throws Exception {
        Path f = savedPod();
        Result r = run(new DoctorCommand(Map.of("JCCL_TOPO_FILE", f.toString()), eth0()), "-np", "8");
        assertEquals(2, r.code(), r.out() + r.err());
        assertTrue(r.out().startsWith("jccl doctor: 8 local rank(s) on trainer-0"), r.out());
        assertTrue(r.out().contains("FAIL  shm"), r.out());
        assertTrue(r.out().contains("/dev/shm has 64.0 MiB free of 64.0 MiB; 8 local ranks need 224.2 MiB"), r.out());
        assertTrue(r.out().contains("fix: mount an emptyDir volume with medium: Memory (sizeLimit at least 1g) at /dev/shm"), r.out());
        assertTrue(r.out().contains("SKIP  gpu-p2p"), r.out());
        // Two ranks fit: only warnings are left (none here), exit code follows.
        Result two = run(new DoctorCommand(Map.of("JCCL_TOPO_FILE", f.toString()), eth0()), "-np", "2", "--json");
        Map<?, ?> json = (Map<?, ?>) Json.parse(two.out());
        assertEquals((long) two.code(), json.get("exit_code"));
        List<?> checks = (List<?>) json.get("checks");
        assertEquals(16, checks.size());
        Map<?, ?> shm = (Map<?, ?>) checks.stream().filter(c -> ((Map<?, ?>) c).get("id").equals("shm")).findFirst().orElseThrow();
        assertEquals("PASS", shm.get("status"), two.out());
    }

    @Test
    void doctorWarningsGiveExitCode1() throws Exception {
        Result r = run(new DoctorCommand(Map.of("JCCL_TOPO_FILE", savedPod().toString(), "NCCL_IB_MTU", "4096"), eth0()), "-np", "2");
        assertEquals(1, r.code(), r.out());
        assertTrue(r.out().contains("WARN  env"), r.out());
        assertTrue(r.out().contains("NCCL_IB_MTU (environment) has no effect anywhere: NCCL has no such variable"), r.out());
    }

    @Test
    void topoPrintsASavedTopologyAsTextAndJsonThatReadsBack() throws Exception {
        Path f = savedPod();
        Result text = run(new TopoCommand(Map.of("JCCL_TOPO_FILE", f.toString())));
        assertEquals(0, text.code(), text.err());
        assertTrue(text.out().startsWith("host trainer-0: 16 CPUs, 1 NUMA node(s), 0 GPU(s), 0 RDMA device(s)"), text.out());
        assertTrue(text.out().contains("0000:00:03.0  eth0 up 25000 Mb/s"), text.out());
        assertTrue(text.out().contains("container: kubernetes (KUBERNETES_SERVICE_HOST=10.96.0.1)"), text.out());
        Result json = run(new TopoCommand(Map.of("JCCL_TOPO_FILE", f.toString())), "--json");
        assertEquals(Topologies.read(f), Topology.fromJson(Json.parse(json.out())));
    }

    @Test
    void topoOnThisHostAndDumpFile() throws Exception {
        Path dump = dir.resolve("dump.json");
        Result r = run(new TopoCommand(Map.of("JCCL_TOPO_DUMP_FILE", dump.toString())), "--json");
        assertEquals(0, r.code(), r.err());
        Topology t = Topology.fromJson(Json.parse(r.out()));
        assertTrue(t.cpus() >= 1);
        assertEquals(t, Topologies.read(dump));
    }

    @Test
    void subcommandsAreWiredIntoJccl() {
        java.io.PrintStream old = System.out;
        java.io.ByteArrayOutputStream buf = new java.io.ByteArrayOutputStream();
        try {
            System.setOut(new java.io.PrintStream(buf, true, java.nio.charset.StandardCharsets.UTF_8));
            assertEquals(0, JcclCli.execute("doctor", "--help"));
            assertEquals(0, JcclCli.execute("topo", "--help"));
        } finally {
            System.setOut(old);
        }
        String help = buf.toString(java.nio.charset.StandardCharsets.UTF_8);
        assertTrue(help.contains("Exit status: 0 all pass (or skipped), 1 warnings, 2 failures."), help);
        assertTrue(help.contains("JCCL_TOPO_FILE=FILE prints a saved topology instead"), help);
    }

    @Test
    void doctorOnThisHostRunsEveryCheck() throws Exception {
        Result r = run(new DoctorCommand(System.getenv(), null), "-np", "2");
        assertTrue(r.code() >= 0 && r.code() <= 2, r.out() + r.err());
        for (String id : List.of("container", "shm", "memlock", "open-files", "threads", "listen-backlog", "gpudirect-rdma", "rdma-ports",
                "rdma-link-layer", "roce-gid", "ib-hca", "nic-assignment", "socket-ifname", "cuda-visible-devices", "gpu-p2p", "env")) {
            assertTrue(r.out().contains(" " + id + " "), id + " missing from\n" + r.out());
        }
        Result bad = run(new DoctorCommand(Map.of(), null), "-np", "0");
        assertEquals(2, bad.code());
        assertTrue(bad.err().contains("-np must be at least 1, got 0"), bad.err());
        Files.writeString(dir.resolve("x.json"), "[]");
        Result badFile = run(new DoctorCommand(Map.of("JCCL_TOPO_FILE", dir.resolve("x.json").toString()), null));
        assertTrue(badFile.code() != 0);
    }

    /** A saved 4-GPU host (GPUs 0000:13, 14 on NUMA node 0; 93, 94 on node 1), without NVML's UUIDs. */
    private Path savedGpuHost() {
        List<Topology.Gpu> gpus = new java.util.ArrayList<>();
        for (String bus : List.of("13", "14", "93", "94")) {
            int node = bus.startsWith("9") ? 1 : 0;
            gpus.add(new Topology.Gpu(PciLocation.fromSysfsPath("pci0000:" + bus + "/0000:" + bus + ":01.0/0000:" + bus + ":00.0", node),
                    "0x2335", "", List.of()));
        }
        Topology t = new Topology("gpu4", 32, List.of(new Topology.NumaNode(0, "0-15", -1), new Topology.NumaNode(1, "16-31", -1)),
                List.of(), List.of(), gpus, new Topology.GpuDirect("", false, false, "6.5.0", "550.54", true),
                new Topology.Shm("/dev/shm", 64L << 30, 64L << 30), new Topology.Limits(-1, -1, 1048576, 1048576, -1, 4096, 4096),
                new Topology.Container("", ""), "not used");
        Path f = dir.resolve("gpu4.json");
        Topologies.write(t, f);
        return f;
    }

    private static Map<?, ?> finding(Result r, String id) {
        List<?> checks = (List<?>) ((Map<?, ?>) Json.parse(r.out())).get("checks");
        return (Map<?, ?>) checks.stream().filter(c -> ((Map<?, ?>) c).get("id").equals(id)).findFirst().orElseThrow();
    }

    @Test
    void doctorChecksPerRankGpuListsAndAnswersInsideARank() throws Exception {
        String f = savedGpuHost().toString();
        Result ok = run(new DoctorCommand(Map.of("JCCL_TOPO_FILE", f), eth0()), "--cuda-visible-devices-per-rank", "3:2:1:0", "--json");
        Map<?, ?> cvd = finding(ok, "cuda-visible-devices");
        assertEquals("PASS", cvd.get("status"), ok.out());
        assertTrue(((String) cvd.get("message")).contains("local rank 0 -> GPU 3 (0000:94:00.0, CUDA_VISIBLE_DEVICES=3, the only GPU this"
                + " process sees)"), cvd.toString());
        assertEquals(4L, ((Map<?, ?>) Json.parse(ok.out())).get("local_ranks"), "N is the list's length");
        Result shared = run(new DoctorCommand(Map.of("JCCL_TOPO_FILE", f), eth0()), "--cuda-visible-devices-per-rank", "0:2:2:-", "--json");
        Map<?, ?> bad = finding(shared, "cuda-visible-devices");
        assertEquals("FAIL", bad.get("status"), shared.out());
        assertTrue(((String) bad.get("message")).contains("ranks 1 and 2 are on one GPU of host gpu4, 0000:93:00.0"), bad.toString());
        assertEquals(2, shared.code());
        Result mismatch = run(new DoctorCommand(Map.of("JCCL_TOPO_FILE", f), eth0()), "-np", "2", "--cuda-visible-devices-per-rank", "0:1:2");
        assertEquals(2, mismatch.code());
        assertTrue(mismatch.err().contains("--cuda-visible-devices-per-rank lists 3 rank(s) but -np is 2"), mismatch.err());
        // Inside rank 1 of a jccl run job that gave it GPU 1 alone: the answer is that rank's.
        Result inRank = run(new DoctorCommand(Map.of("JCCL_TOPO_FILE", f, "JCCL_LOCAL_RANK", "1", "JCCL_LOCAL_SIZE", "4",
                "CUDA_VISIBLE_DEVICES", "1"), eth0()), "--json");
        Map<?, ?> mine = finding(inRank, "cuda-visible-devices");
        assertEquals("PASS", mine.get("status"), inRank.out());
        assertTrue(((String) mine.get("message")).contains("local rank 1 -> GPU 1 (0000:14:00.0, the only GPU this process sees)"),
                mine.toString());
        assertTrue(((String) mine.get("message")).contains("this doctor runs as local rank 1 of 4"), mine.toString());
        // The same environment checked for all four ranks (-np given): they would share the GPU.
        Result all = run(new DoctorCommand(Map.of("JCCL_TOPO_FILE", f, "JCCL_LOCAL_RANK", "1", "CUDA_VISIBLE_DEVICES", "1"), eth0()),
                "-np", "4", "--json");
        assertEquals("FAIL", finding(all, "cuda-visible-devices").get("status"), all.out());
    }
}
