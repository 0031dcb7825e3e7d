package org.jccl.internal.topo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.jccl.internal.doctor.Doctor;
import org.jccl.internal.net.Interfaces;
import org.jccl.internal.doctor.Doctor.Finding;
import org.jccl.internal.doctor.Doctor.Report;
import org.jccl.internal.doctor.Doctor.Status;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code jccl doctor}'s checks on the fixture hosts: each field report (docs/DOCTOR.md) has a test
 * here that makes its check fire and asserts what the message and the fix say, and a healthy
 * counterpart where the same check passes.
 */
@Timeout(30)
class TopoDoctorTest {

    @TempDir
    Path dir;

    private static List<Interfaces.Nic> nics(String... nameAddr) {
        List<Interfaces.Nic> out = new java.util.ArrayList<>();
        try {
            out.add(new Interfaces.Nic("lo", true, true, List.of(InetAddress.getByName("127.0.0.1"))));
            for (int i = 0; i < nameAddr.length; i += 2) {
                out.add(new Interfaces.Nic(nameAddr[i], true, false, List.of(InetAddress.getByName(nameAddr[i + 1]))));
            }
        } catch (java.net.UnknownHostException e) {
            throw new AssertionError(e);
        }
        return out;
    }

    private static final List<Interfaces.Nic> DGX_NICS = nics("eno1", "10.1.0.5", "ib0", "192.168.0.5");

    private static Report doctor(Topology t, Map<String, String> env, int n) {
        return Doctor.run(new Doctor.Input(t, env, n, DGX_NICS, GpuProbe.absent("libnvidia-ml.so.1 was not found (test)")));
    }

    private static void assertHas(Finding f, Status status, String... parts) {
        assertEquals(status, f.status(), f.toString());
        for (String p : parts) {
            assertTrue(f.message().contains(p) || f.fix().contains(p), "'" + p + "' not in " + f);
        }
    }

    // ---- field report: /dev/shm too small in a pod (64 MiB default)

    @Test
    void podWith64MiBShmFailsForEightRanksWithTheKubernetesFix() {
        Topology t = Fixtures.discover("pod64", dir, Map.of(), 64 * Fixtures.MIB, 64 * Fixtures.MIB);
        Report r = doctor(t, Map.of(), 8);
        Finding f = r.get("shm");
        // 8 ranks x 7 rings x (8 x 512 KiB + one 4 KiB header page) = 224.2 MiB
        assertHas(f, Status.FAIL, "/dev/shm has 64.0 MiB free of 64.0 MiB", "8 local ranks need 224.2 MiB",
                "7 ring(s) of 8 x 512.0 KiB", "not enough shared memory", "emptyDir volume with medium: Memory", "at /dev/shm",
                "JCCL_SHM_DISABLE=1");
        assertEquals(2, r.exitCode());
        assertTrue(r.get("container").message().contains("Kubernetes pod"), r.get("container").toString());
        // Smaller rings fit: 2 slots x 64 KiB.
        Finding small = doctor(t, Map.of("JCCL_SHM_SLOTS", "2", "JCCL_SHM_CHUNK", "64K"), 8).get("shm");
        assertEquals(Status.PASS, small.status(), small.toString());
        assertEquals(Status.SKIP, doctor(t, Map.of("JCCL_SHM_DISABLE", "1"), 8).get("shm").status());
    }

    @Test
    void dockerGetsTheShmSizeFixAndTightSpaceWarns() {
        Path root = FixtureTree.expand("pod64", dir);
        FixtureTree.write(root.resolve("proc/1/cgroup"), "0::/\n");
        FixtureTree.write(root.resolve(".dockerenv"), "");
        Topology t = new SysfsDiscovery(root, Map.of(), FsStats.fixed(64 * Fixtures.MIB, 40 * Fixtures.MIB), GpuProbe.absent("-"),
                "/dev/shm").discover();
        assertHas(doctor(t, Map.of(), 4).get("shm"), Status.FAIL, "40.0 MiB free", "4 local ranks need 48.0 MiB",
                "restart the container with --shm-size=1g");
        assertHas(doctor(t, Map.of(), 3).get("shm"), Status.WARN, "3 local ranks need 24.0 MiB", "little for others");
    }

    // ---- field report: GPUDirect RDMA silently off

    @Test
    void nodeWithoutNvidiaPeermemWarnsThatGpuDirectRdmaIsOff() {
        Report r = doctor(Fixtures.discover("nopeermem", dir), Map.of(), 8);
        assertHas(r.get("gpudirect-rdma"), Status.WARN, "GPUDirect RDMA is off", "nvidia_peermem is not loaded",
                "Linux 5.4.0-150-generic is older than 5.12", "the NVIDIA kernel module is the closed one", "staged through host memory",
                "modprobe nvidia-peermem");
        assertHas(doctor(Fixtures.discover("dgx8", dir.resolve("ok")), Map.of(), 8).get("gpudirect-rdma"), Status.PASS,
                "nvidia-peermem is loaded (nv_mem version 1.3-0)");
        assertHas(doctor(Fixtures.discover("roce", dir.resolve("roce")), Map.of(), 2).get("gpudirect-rdma"), Status.PASS,
                "through dma-buf", "open kernel module 550.54.15");
        assertEquals(Status.SKIP, doctor(Fixtures.discover("pod64", dir.resolve("pod")), Map.of(), 2).get("gpudirect-rdma").status());
    }

    // ---- field report: only 4 of 8 HCAs carried traffic

    @Test
    void eightRanksOnTheDgxUseAllEightHcas() {
        Report r = doctor(Fixtures.discover("dgx8", dir), Map.of(), 8);
        assertHas(r.get("nic-assignment"), Status.PASS, "every HCA carries traffic (8 of 8)",
                "rank 0 GPU 0000:13:00.0 -> mlx5_0 (PIX)", "rank 7 GPU 0000:b4:00.0 -> mlx5_7 (PIX)");
        assertEquals(0, r.exitCode(), r.text());
    }

    @Test
    void hcaListThatLeavesOutFourHcasIsReportedWithTheReason() {
        Topology t = Fixtures.discover("dgx8", dir);
        Report r = doctor(t, Map.of("NCCL_IB_HCA", "mlx5_0,mlx5_1,mlx5_2,mlx5_3"), 8);
        assertHas(r.get("nic-assignment"), Status.WARN, "only 4 of 8 HCAs carry traffic", "mlx5_4: excluded by JCCL_IB_HCA",
                "mlx5_7: excluded by JCCL_IB_HCA", "unset JCCL_IB_HCA");
        assertHas(r.get("ib-hca"), Status.PASS, "selects mlx5_0, mlx5_1, mlx5_2, mlx5_3");
        // Fewer ranks than GPUs leaves HCAs idle too, and the check says so.
        assertHas(doctor(t, Map.of(), 4).get("nic-assignment"), Status.WARN, "only 4 of 8 HCAs carry traffic",
                "mlx5_4: only 4 rank(s) with a GPU", "-np 8");
    }

    @Test
    void downPortsLeaveHcasIdleAndAreNamed() {
        Path root = FixtureTree.expand("dgx8", dir);
        FixtureTree.write(root.resolve("sys/class/infiniband/mlx5_5/ports/1/state"), "2: INIT\n");
        Topology t = new SysfsDiscovery(root, Map.of(), FsStats.fixed(1L << 40, 1L << 40), GpuProbe.absent("-"), "/dev/shm").discover();
        Report r = doctor(t, Map.of(), 8);
        assertHas(r.get("rdma-ports"), Status.WARN, "7 port(s) ACTIVE, 1 not: mlx5_5:1 is 2: INIT", "subnet manager");
        assertHas(r.get("nic-assignment"), Status.WARN, "only 7 of 8 HCAs carry traffic", "mlx5_5: no active port");
    }

    // ---- field report: mlx5_1 silently meant mlx5_10 / a name that does not exist

    @Test
    void ibHcaNamesMustExistExactly() {
        Topology t = Fixtures.discover("dgx8", dir);
        assertHas(doctor(t, Map.of("JCCL_IB_HCA", "mlx5_0,mlx5_9"), 8).get("ib-hca"), Status.FAIL, "'mlx5_9' names no RDMA device",
                "did you mean", "devices present: mlx5_0, mlx5_1", "exact names");
        assertHas(doctor(t, Map.of("JCCL_IB_HCA", "mlx5"), 8).get("ib-hca"), Status.FAIL, "'mlx5' names no RDMA device");
        assertHas(doctor(t, Map.of("JCCL_IB_HCA", "mlx5_0:2"), 8).get("ib-hca"), Status.FAIL, "mlx5_0 has no port 2");
        // With mlx5_10 present, mlx5_1 stays mlx5_1 and the check says what NCCL would have done.
        Path root = dir.resolve("ten");
        FixtureTree.expand("dgx8", root);
        FixtureTree.write(root.resolve("sys/class/infiniband/mlx5_10/ports/1/state"), "4: ACTIVE\n");
        Topology t10 = new SysfsDiscovery(root, Map.of(), FsStats.fixed(1L << 40, 1L << 40), GpuProbe.absent("-"), "/dev/shm").discover();
        assertHas(doctor(t10, Map.of("JCCL_IB_HCA", "mlx5_1"), 8).get("ib-hca"), Status.PASS, "selects mlx5_1;",
                "mlx5_1 means exactly mlx5_1 (NCCL would also take mlx5_10)");
    }

    // ---- field report: all-to-all at 32 ranks dies with "Resource temporarily unavailable"

    @Test
    void thirtyTwoRanksInAPodWithPidsMax1024FailTheThreadsCheck() {
        Topology t = Fixtures.discover("pod64", dir, Map.of(), 8 * Fixtures.GIB, 8 * Fixtures.GIB);
        Finding f = doctor(t, Map.of(), 32).get("threads");
        assertHas(f, Status.FAIL, "cgroup pids.max 1024", "32 JVM ranks on 16 CPUs start about 1792 threads",
                "Resource temporarily unavailable", "podPidsLimit");
        assertEquals(Status.PASS, doctor(t, Map.of(), 4).get("threads").status());
    }

    @Test
    void smallBacklogAndOpenFileLimitAtThirtyTwoRanks() {
        Path root = FixtureTree.expand("roce", dir);
        FixtureTree.write(root.resolve("proc/self/limits"), "Max open files            512                  4096                 files\n"
                + "Max locked memory         unlimited            unlimited            bytes\n");
        Topology t = new SysfsDiscovery(root, Map.of(), FsStats.fixed(1L << 40, 1L << 40), GpuProbe.absent("-"), "/dev/shm").discover();
        // 4 x 4 sockets shared by both directions (JCCL_SOCKET_SPLIT=0): 16 per peer.
        Map<String, String> env = Map.of("JCCL_SOCKET_NTHREADS", "4", "JCCL_NSOCKS_PERTHREAD", "4", "JCCL_SOCKET_SPLIT", "0");
        Report r = doctor(t, env, 32);
        assertHas(r.get("listen-backlog"), Status.WARN, "net.core.somaxconn = 128", "up to 496 connections", "Resource temporarily unavailable",
                "sysctl -w net.core.somaxconn=4096");
        assertHas(r.get("open-files"), Status.FAIL, "max open files: 512 (hard 4096)", "needs about 640", "Too many open files",
                "ulimit -n 4096");
        assertEquals(Status.PASS, doctor(t, Map.of(), 8).get("listen-backlog").status());
        // Each direction with sockets of its own (the default) doubles them: 32 per peer.
        Report split = doctor(t, Map.of("JCCL_SOCKET_NTHREADS", "4", "JCCL_NSOCKS_PERTHREAD", "4"), 32);
        assertHas(split.get("listen-backlog"), Status.WARN, "up to 992 connections");
        assertHas(split.get("open-files"), Status.FAIL, "needs about 1152", "32 socket(s) per peer");
    }

    // ---- memlock (RDMA registration) on the RoCE node: 64 KiB

    @Test
    void lowMemlockFailsWhereThereIsRdma() {
        Report r = doctor(Fixtures.discover("roce", dir), Map.of(), 2);
        assertHas(r.get("memlock"), Status.FAIL, "max locked memory: 64.0 KiB (hard 64.0 KiB)", "ibv_reg_mr", "memlock unlimited");
        assertEquals(Status.PASS, doctor(Fixtures.discover("pod64", dir.resolve("p")), Map.of(), 2).get("memlock").status(),
                "no RDMA: memlock does not matter");
    }

    // ---- RoCE: GID index, link layer, ports

    @Test
    void roceGidIsPickedOrTheWrongIndexIsNamed() {
        Topology t = Fixtures.discover("roce", dir);
        assertHas(doctor(t, Map.of(), 2).get("roce-gid"), Status.FAIL, "mlx5_1:1 has no RoCE v2 GID with an IP address",
                "mlx5_0:1 uses GID 3 (RoCE v2, IPv4 10.0.0.11)", "give ens1f1 an IP address");
        assertHas(doctor(t, Map.of("JCCL_IB_HCA", "mlx5_0"), 2).get("roce-gid"), Status.PASS, "mlx5_0:1 uses GID 3 (RoCE v2, IPv4 10.0.0.11)");
        assertHas(doctor(t, Map.of("JCCL_IB_HCA", "mlx5_0", "NCCL_IB_GID_INDEX", "2"), 2).get("roce-gid"), Status.WARN,
                "JCCL_IB_GID_INDEX=2 is IB/RoCE v1 GID IPv4 10.0.0.11", "RoCE v1: not routable", "set JCCL_IB_GID_INDEX=3");
        assertHas(doctor(t, Map.of("JCCL_IB_HCA", "mlx5_0", "JCCL_IB_GID_INDEX", "7"), 2).get("roce-gid"), Status.FAIL,
                "JCCL_IB_GID_INDEX=7 is an empty GID entry", "set JCCL_IB_GID_INDEX=3");
        assertEquals(Status.SKIP, doctor(Fixtures.discover("dgx8", dir.resolve("ib")), Map.of(), 8).get("roce-gid").status());
        assertHas(doctor(t, Map.of(), 2).get("rdma-ports"), Status.WARN, "mlx5_2:1 is 1: DOWN", "check the cable");
        assertHas(doctor(t, Map.of(), 2).get("rdma-link-layer"), Status.PASS, "Ethernet (RoCE) on every active port");
        assertHas(doctor(t, Map.of(), 2).get("ib-hca"), Status.PASS, "every device with an active port may be used (mlx5_0, mlx5_1)");
    }

    @Test
    void mixedFabricsWarn() {
        Path root = FixtureTree.expand("dgx8", dir);
        FixtureTree.write(root.resolve("sys/class/infiniband/mlx5_7/ports/1/link_layer"), "Ethernet\n");
        Topology t = new SysfsDiscovery(root, Map.of(), FsStats.fixed(1L << 40, 1L << 40), GpuProbe.absent("-"), "/dev/shm").discover();
        assertHas(doctor(t, Map.of(), 8).get("rdma-link-layer"), Status.WARN, "different fabrics", "Ethernet: mlx5_7:1", "JCCL_IB_HCA");
    }

    // ---- field report: ranks bound to the wrong GPU

    @Test
    void cudaVisibleDevicesMistakesFail() {
        Topology t = Fixtures.discover("dgx8", dir);
        assertHas(doctor(t, Map.of("CUDA_VISIBLE_DEVICES", "0,1,1,3"), 4).get("cuda-visible-devices"), Status.FAIL,
                "GPU 0000:14:00.0 is listed twice ('1')", "list each GPU once");
        // One environment for all: the four ranks would share GPU 2; the fix names the per-rank check.
        assertHas(doctor(t, Map.of("CUDA_VISIBLE_DEVICES", "2"), 4).get("cuda-visible-devices"), Status.FAIL,
                "CUDA_VISIBLE_DEVICES=2, the same for all 4 local ranks: two ranks on one GPU: ranks 0, 1, 2 and 3 are on one GPU of"
                        + " host dgx01, 0000:33:00.0", "as CUDA device 0 (CUDA_VISIBLE_DEVICES=2; the only GPU this process sees)",
                "--cuda-visible-devices-per-rank", "run jccl doctor inside each rank");
        assertHas(doctor(t, Map.of("CUDA_VISIBLE_DEVICES", "0,1,2,3"), 8).get("cuda-visible-devices"), Status.FAIL,
                "local rank 0 of 8 has no GPU of its own: it sees 4 GPUs (0: 0000:13:00.0; 1: 0000:14:00.0; 2: 0000:33:00.0;"
                        + " 3: 0000:34:00.0) with CUDA_VISIBLE_DEVICES=0,1,2,3 for 8 ranks on this host", "every local rank alike",
                "start at most 4 ranks per host", "CUDA_VISIBLE_DEVICES=$JCCL_LOCAL_RANK");
        assertHas(doctor(t, Map.of("CUDA_VISIBLE_DEVICES", ""), 8).get("cuda-visible-devices"), Status.FAIL, "hides every one of the 8 GPUs");
        assertHas(doctor(t, Map.of("CUDA_VISIBLE_DEVICES", "4,5,6,7"), 4).get("cuda-visible-devices"), Status.PASS,
                "local rank 0 -> GPU 4 (0000:93:00.0)", "local rank 3 -> GPU 7 (0000:b4:00.0)", "hidden: GPU 0 (0000:13:00.0)");
        assertHas(doctor(t, Map.of("CUDA_VISIBLE_DEVICES", "3,2,1,0"), 4).get("cuda-visible-devices"), Status.PASS,
                "local rank 0 -> GPU 3 (0000:34:00.0)", "local rank 3 -> GPU 0 (0000:13:00.0)");
        // JCCL_CUDA_DEVICE, the same for every rank, puts them all on one GPU.
        assertHas(doctor(t, Map.of("JCCL_CUDA_DEVICE", "1"), 2).get("cuda-visible-devices"), Status.FAIL,
                "ranks 0 and 1 are on one GPU of host dgx01, 0000:14:00.0", "JCCL_CUDA_DEVICE=1)");
        assertHas(doctor(t, Map.of("JCCL_CUDA_DEVICE", "9"), 1).get("cuda-visible-devices"), Status.FAIL,
                "JCCL_CUDA_DEVICE=9 names CUDA device 9, but local rank 0 of 1 sees 8 GPUs");
    }

    // ---- one GPU per process, as launchers bind them

    private static Report doctorPerRank(Topology t, Map<String, String> env, List<String> perRank, GpuProbe probe) {
        return Doctor.run(new Doctor.Input(t, env, perRank.size(), DGX_NICS, probe, perRank, -1));
    }

    @Test
    void perRankListsAreCheckedByTheRuntimesRule() {
        Topology t = Fixtures.discover("dgx8", dir);
        GpuProbe none = GpuProbe.absent("no NVML (test)");
        assertHas(doctorPerRank(t, Map.of(), List.of("0", "1", "2", "3"), none).get("cuda-visible-devices"), Status.PASS,
                "per-rank CUDA_VISIBLE_DEVICES 0:1:2:3", "local rank 1 -> GPU 1 (0000:14:00.0, CUDA_VISIBLE_DEVICES=1, the only GPU this"
                        + " process sees)", "local rank 3 -> GPU 3 (0000:34:00.0");
        assertHas(doctorPerRank(t, Map.of(), List.of("3", "2", "1", "0"), none).get("cuda-visible-devices"), Status.PASS,
                "local rank 0 -> GPU 3 (0000:34:00.0, CUDA_VISIBLE_DEVICES=3");
        // Two GPUs per rank: local rank r takes CUDA device r of its own pair.
        assertHas(doctorPerRank(t, Map.of(), List.of("0,1", "2,3"), none).get("cuda-visible-devices"), Status.PASS,
                "local rank 0 -> GPU 0 (0000:13:00.0, CUDA_VISIBLE_DEVICES=0,1)", "local rank 1 -> GPU 3 (0000:34:00.0, CUDA_VISIBLE_DEVICES=2,3)");
        Finding shared = doctorPerRank(t, Map.of(), List.of("0", "2", "2", "3"), none).get("cuda-visible-devices");
        assertHas(shared, Status.FAIL, "two ranks on one GPU: ranks 1 and 2 are on one GPU of host dgx01, 0000:33:00.0",
                "rank 1 (host dgx01, local rank 1) as CUDA device 0 (CUDA_VISIBLE_DEVICES=2; the only GPU this process sees)",
                "rank 2 (host dgx01, local rank 2) as CUDA device 0 (CUDA_VISIBLE_DEVICES=2;", "give each rank its own GPU");
        assertTrue(!shared.message().contains("the same for all"), shared.toString());
        // A rank without the variable sees all 8 and takes GPU number local rank: 1, which rank 0 has too.
        assertHas(doctorPerRank(t, Map.of(), Arrays.asList("1", null), none).get("cuda-visible-devices"), Status.FAIL,
                "ranks 0 and 1 are on one GPU", "CUDA_VISIBLE_DEVICES unset; by local rank 1 of 2");
        assertHas(doctorPerRank(t, Map.of(), List.of("0", ""), none).get("cuda-visible-devices"), Status.FAIL,
                "local rank 1 of 2 sees no GPU (CUDA_VISIBLE_DEVICES=)");
        assertHas(doctorPerRank(t, Map.of(), List.of("0", "1,9"), none).get("cuda-visible-devices"), Status.FAIL,
                "local rank 1: CUDA_VISIBLE_DEVICES=1,9: entry '9' is not a GPU index");
    }

    @Test
    void uuidsResolveWithNvmlAndDuplicatesShowWithout() {
        Path root = FixtureTree.expand("dgx8", dir.resolve("nvml"));
        Topology t = new SysfsDiscovery(root, Map.of(), FsStats.fixed(1L << 40, 1L << 40), GpuMappingTest.uuids(), "/dev/shm").discover();
        List<String> uuids = List.of("GPU-93a1", "GPU-94a1", "GPU-b3a1b2c3-1111-2222-3333-4444555566b3", "GPU-b4");
        assertHas(doctorPerRank(t, Map.of(), uuids, GpuMappingTest.uuids()).get("cuda-visible-devices"), Status.PASS,
                "local rank 0 -> GPU 4 (0000:93:00.0, CUDA_VISIBLE_DEVICES=GPU-93a1", "local rank 3 -> GPU 7 (0000:b4:00.0");
        assertHas(doctorPerRank(t, Map.of(), List.of("GPU-93a1", "GPU-93a1b2"), GpuMappingTest.uuids()).get("cuda-visible-devices"),
                Status.FAIL, "ranks 0 and 1 are on one GPU of host dgx01, 0000:93:00.0, GPU-93a1b2c3-1111-2222-3333-444455556693");
        // Without NVML: the same text is the same GPU; others pass with a note that they were not checked.
        Topology blind = Fixtures.discover("dgx8", dir.resolve("blind"));
        GpuProbe none = GpuProbe.absent("libnvidia-ml.so.1 was not found (test)");
        assertHas(doctorPerRank(blind, Map.of(), List.of("GPU-93a1", "GPU-93a1"), none).get("cuda-visible-devices"), Status.FAIL,
                "ranks 0 and 1 are on one GPU of host dgx01, GPU-93a1");
        assertHas(doctorPerRank(blind, Map.of(), List.of("GPU-93a1", "GPU-94a1"), none).get("cuda-visible-devices"), Status.PASS,
                "local rank 0 -> CUDA device 0 (GPU-93a1, CUDA_VISIBLE_DEVICES=GPU-93a1", "not checked against this host without NVML"
                        + " (libnvidia-ml.so.1 was not found (test)): GPU-93a1, GPU-94a1");
    }

    @Test
    void aDoctorInsideARankAnswersForThatRank() {
        Topology t = Fixtures.discover("dgx8", dir);
        Report r = Doctor.run(new Doctor.Input(t, Map.of("CUDA_VISIBLE_DEVICES", "2"), 4, DGX_NICS, GpuProbe.absent("-"), null, 2));
        assertHas(r.get("cuda-visible-devices"), Status.PASS, "CUDA_VISIBLE_DEVICES=2: local rank 2 -> GPU 2 (0000:33:00.0, the only GPU"
                + " this process sees)", "this doctor runs as local rank 2 of 4", "run it in every rank");
        Report bad = Doctor.run(new Doctor.Input(t, Map.of("CUDA_VISIBLE_DEVICES", "0,1"), 4, DGX_NICS, GpuProbe.absent("-"), null, 1));
        assertHas(bad.get("cuda-visible-devices"), Status.FAIL, "local rank 1 of 4 has no GPU of its own");
        assertEquals(Map.entry("JCCL_LOCAL_RANK", 3), Doctor.localRankFromEnv(Map.of("JCCL_LOCAL_RANK", "3", "SLURM_LOCALID", "1")));
        assertEquals(Map.entry("SLURM_LOCALID", 1), Doctor.localRankFromEnv(Map.of("SLURM_LOCALID", "1")));
        assertEquals(null, Doctor.localRankFromEnv(Map.of("LOCAL_RANK", "x")));
    }

    @Test
    void mixedGpuModelsWithoutPciBusOrderWarn() {
        Path root = FixtureTree.expand("dgx8", dir);
        FixtureTree.write(root.resolve("sys/bus/pci/devices/0000:13:00.0/device"), "0x2684\n");
        Topology t = new SysfsDiscovery(root, Map.of(), FsStats.fixed(1L << 40, 1L << 40), GpuProbe.absent("-"), "/dev/shm").discover();
        assertHas(doctor(t, Map.of(), 8).get("cuda-visible-devices"), Status.WARN, "CUDA numbers them fastest first",
                "export CUDA_DEVICE_ORDER=PCI_BUS_ID");
        assertEquals(Status.PASS, doctor(t, Map.of("CUDA_DEVICE_ORDER", "PCI_BUS_ID"), 8).get("cuda-visible-devices").status());
    }

    // ---- P2P between GPUs

    @Test
    void p2pIsSkippedWithoutNvmlAndNamesTheBadPairsWithIt() {
        Topology t = Fixtures.discover("dgx8", dir);
        assertHas(doctor(t, Map.of(), 8).get("gpu-p2p"), Status.SKIP, "needs NVML", "libnvidia-ml.so.1 was not found");
        GpuProbe fake = new GpuProbe() {
            @Override
            public boolean available() {
                return true;
            }

            @Override
            public String status() {
                return "ok";
            }

            @Override
            public String uuid(String busId) {
                return "";
            }

            @Override
            public List<String> nvlinkPeers(String busId) {
                return List.of();
            }

            @Override
            public String p2pRead(String a, String b) {
                return a.equals("0000:13:00.0") && b.equals("0000:93:00.0") ? "not supported by the IOH/PCIe topology" : "OK";
            }
        };
        Finding f = Doctor.run(new Doctor.Input(t, Map.of(), 8, DGX_NICS, fake)).get("gpu-p2p");
        assertHas(f, Status.WARN, "1 of 56 GPU pairs", "0000:13:00.0 -> 0000:93:00.0: not supported by the IOH/PCIe topology", "ACS");
    }

    // ---- interfaces

    @Test
    void socketIfnamePrefixesAndMisses() {
        Topology t = Fixtures.discover("pod64", dir);
        List<Interfaces.Nic> list = nics("eth1", "10.0.0.1", "eth10", "10.0.1.1");
        Finding prefix = Doctor.run(new Doctor.Input(t, Map.of("NCCL_SOCKET_IFNAME", "eth1"), 2, list, GpuProbe.absent("-")))
                .get("socket-ifname");
        // Whether "eth1" also means eth10 is Interfaces' grammar (NCCL's prefixes, or exact names): the check follows it.
        boolean prefixGrammar;
        try {
            prefixGrammar = Interfaces.choose("eth1", Interfaces.Family.ANY, List.of(list.get(2))).interfaceName().equals("eth10");
        } catch (org.jccl.ConfigException e) {
            prefixGrammar = false;
        }
        if (prefixGrammar) {
            assertHas(prefix, Status.WARN, "bootstrap and TCP use eth1 (10.0.0.1)", "eth1 is a prefix: it also matches eth10", "write =eth1");
        } else {
            assertHas(prefix, Status.PASS, "bootstrap and TCP use eth1 (10.0.0.1)");
        }
        Finding excl = Doctor.run(new Doctor.Input(t, Map.of("NCCL_SOCKET_IFNAME", "^eth1"), 2, list, GpuProbe.absent("-")))
                .get("socket-ifname");
        assertEquals(prefixGrammar ? Status.WARN : Status.PASS, excl.status(), excl.toString());
        Finding miss = Doctor.run(new Doctor.Input(t, Map.of("JCCL_SOCKET_IFNAME", "ib"), 2, list, GpuProbe.absent("-")))
                .get("socket-ifname");
        assertHas(miss, Status.FAIL, "JCCL_SOCKET_IFNAME=ib matches no interface that is up", "eth10 10.0.1.1");
        Finding exact = Doctor.run(new Doctor.Input(t, Map.of("JCCL_SOCKET_IFNAME", "=eth1"), 2, list, GpuProbe.absent("-")))
                .get("socket-ifname");
        assertHas(exact, Status.PASS, "use eth1 (10.0.0.1)");
        Finding lo = Doctor.run(new Doctor.Input(t, Map.of("JCCL_SOCKET_IFNAME", "lo", "WORLD_SIZE", "16"), 8, list, GpuProbe.absent("-")))
                .get("socket-ifname");
        assertHas(lo, Status.FAIL, "a loopback interface, but the job has 16 ranks and only 8 here");
    }

    @Test
    void tcpOverTheSlowManagementNicWarnsWhenAFasterOneIsUp() {
        Path root = FixtureTree.expand("dgx8", dir);
        for (int i = 0; i < 8; i++) {
            FixtureTree.write(root.resolve("sys/class/infiniband/mlx5_" + i + "/ports/1/state"), "1: DOWN\n");
        }
        Topology t = new SysfsDiscovery(root, Map.of(), FsStats.fixed(1L << 40, 1L << 40), GpuProbe.absent("-"), "/dev/shm").discover();
        assertHas(doctor(t, Map.of("JCCL_SOCKET_IFNAME", "eno*"), 8).get("socket-ifname"), Status.WARN,
                "at 1000 Mb/s while ib0 is up at 400000", "set JCCL_SOCKET_IFNAME=ib0 if other hosts reach it");
        assertHas(doctor(t, Map.of(), 8).get("rdma-ports"), Status.FAIL, "no RDMA port is ACTIVE");
    }

    // ---- unknown and no-op variables

    @Test
    void unknownAndNoOpVariablesWarnAndBadValuesFail() {
        Topology t = Fixtures.discover("pod64", dir);
        Map<String, String> env = new HashMap<>();
        env.put("NCCL_IB_MTU", "4096");
        env.put("JCCL_SHM_SLOT", "4");
        env.put("NCCL_NVLS_ENABLE", "0");
        Finding f = doctor(t, env, 2).get("env");
        assertHas(f, Status.WARN, "NCCL_IB_MTU (environment) has no effect anywhere: NCCL has no such variable",
                "JCCL_SHM_SLOT (environment) is not a jccl setting and has no effect; did you mean JCCL_SHM_SLOTS?",
                "NCCL_NVLS_ENABLE (environment) is an NCCL variable that jccl ignores", "read by NCCL only", "NCCL_NVLS_ENABLE");
        env.put("JCCL_SHM_SLOTS", "many");
        assertHas(doctor(t, env, 2).get("env"), Status.FAIL, "JCCL_SHM_SLOTS='many' is not allowed");
        assertHas(doctor(t, Map.of("JCCL_SOCKET_IFNAME", "eth0", "NCCL_SOCKET_IFNAME", "ib0"), 2).get("env"), Status.WARN,
                "JCCL_SOCKET_IFNAME=eth0 and NCCL_SOCKET_IFNAME=ib0 are both set in the environment; jccl uses JCCL_SOCKET_IFNAME");
        assertEquals(Status.PASS, doctor(t, Map.of("JCCL_SHM_SLOTS", "4"), 2).get("env").status());
    }

    @Test
    void aBadSettingNeededByACheckFailsThatCheckInsteadOfTheDoctor() {
        Topology t = Fixtures.discover("pod64", dir);
        Report r = doctor(t, Map.of("JCCL_SHM_CHUNK", "huge"), 4);
        assertHas(r.get("shm"), Status.FAIL, "cannot check: JCCL_SHM_CHUNK='huge' is not allowed");
        assertEquals(16, r.findings().size(), "every check still ran");
    }

    @Test
    void reportRendersAndExitCodesFollowTheWorstFinding() {
        Report r = doctor(Fixtures.discover("roce", dir), Map.of(), 2);
        String text = r.text();
        assertTrue(text.startsWith("jccl doctor: 2 local rank(s) on roce01\n"), text);
        assertTrue(text.contains("FAIL  memlock"), text);
        assertTrue(text.lines().anyMatch(l -> l.trim().startsWith("fix: ")), text);
        assertTrue(text.contains("(exit code 2)"), text);
        Map<String, Object> json = r.toJson();
        assertEquals(2, json.get("exit_code"));
        assertEquals(r, r);
        assertEquals(0, new Report("h", 1, List.of(new Finding("a", Status.PASS, "m", ""), new Finding("b", Status.SKIP, "s", "")))
                .exitCode());
        assertEquals(1, new Report("h", 1, List.of(new Finding("a", Status.WARN, "m", "f"))).exitCode());
        assertEquals(8, Doctor.defaultLocalRanks(Fixtures.discover("dgx8", dir.resolve("d")), Map.of()));
        assertEquals(3, Doctor.defaultLocalRanks(Fixtures.discover("dgx8", dir.resolve("e")), Map.of("JCCL_LOCAL_SIZE", "3")));
        assertEquals("1g", Doctor.suggestSize(224 * Fixtures.MIB));
        assertEquals("4g", Doctor.suggestSize(1536 * Fixtures.MIB));
    }
}
