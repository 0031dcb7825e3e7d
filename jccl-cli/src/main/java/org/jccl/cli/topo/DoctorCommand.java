package org.jccl.cli.topo;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import org.jccl.Config;
import org.jccl.internal.net.Interfaces;
import org.jccl.internal.doctor.Doctor;
import org.jccl.internal.util.Json;
import org.jccl.internal.topo.Topology;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/** {@code jccl doctor [--json] [-np N] [--root DIR]}: preflight checks, each with its fix. */
@Command(name = "doctor", mixinStandardHelpOptions = true, sortOptions = false,
        header = "Check this host for a job of N local ranks: each check PASS, WARN or FAIL with the fix.",
        description = {
            "Check this host before a job: /dev/shm against what N local ranks reserve, locked-memory, open-file and"
                    + " thread limits, the listen backlog, GPUDirect RDMA, RDMA ports, link layer and RoCE GID, JCCL_IB_HCA,"
                    + " the NIC each GPU uses, JCCL_SOCKET_IFNAME, CUDA_VISIBLE_DEVICES, P2P between GPUs (with NVML), the"
                    + " container, and variables that do nothing. Run it with the job's environment.",
            ""},
        footer = {"", "Exit status: 0 all pass (or skipped), 1 warnings, 2 failures.", "",
            "Examples:", "  jccl doctor -np 8", "  CUDA_VISIBLE_DEVICES=0,1,2,3 jccl doctor -np 4 --json",
            "  jccl doctor --cuda-visible-devices-per-rank 0:1:2:3      (each rank its own GPU, as srun --gpus-per-task=1)",
            "  jccl run -np 4 -- sh -c 'CUDA_VISIBLE_DEVICES=$JCCL_LOCAL_RANK exec bin/jccl doctor'   (one answer per rank)"})
public final class DoctorCommand implements Callable<Integer> {

    private final Map<String, String> env;
    private final List<Interfaces.Nic> interfaces;

    @Spec
    CommandSpec spec;

    @Option(names = {"-np", "--np"}, paramLabel = "N",
            description = "local ranks the job will start on this host (default: JCCL_LOCAL_SIZE / LOCAL_WORLD_SIZE, else the visible"
                    + " GPUs, else the CPUs)")
    Integer np;

    @Option(names = "--cuda-visible-devices-per-rank", paramLabel = "LIST", split = ":",
            description = "each local rank's own CUDA_VISIBLE_DEVICES, separated by ':' (a launcher that binds GPUs per rank:"
                    + " srun --gpus-per-task=1, Kubernetes, a script setting it from LOCAL_RANK), e.g. 0:1:2:3, 3:2:1:0, 0,1:2,3 or"
                    + " GPU-5e0f:GPU-9a1b; '-' for a rank without it; sets N when -np is not given")
    List<String> perRankCvd;

    @Option(names = "--json", description = "print the findings as JSON")
    boolean json;

    @Option(names = "--root", paramLabel = "DIR", description = "read sysfs/procfs under DIR instead of / (e.g. a copy from another host);"
            + " the interface addresses for JCCL_SOCKET_IFNAME and the environment are still this process's")
    Path root;

    public DoctorCommand() {
        this(System.getenv(), null);
    }

    /** With the given environment and interfaces instead of the machine's (tests); null interfaces: the machine's. */
    DoctorCommand(Map<String, String> env, List<Interfaces.Nic> interfaces) {
        this.env = Map.copyOf(env);
        this.interfaces = interfaces;
    }

    @Override
    public Integer call() {
        if (np != null && np < 1) {
            throw new ParameterException(spec.commandLine(), "-np must be at least 1, got " + np);
        }
        Config config = Config.fromEnvironment(env);
        Topology t = HostView.topology(config, env, root);
        List<String> perRank = null;
        if (perRankCvd != null) {
            perRank = new java.util.ArrayList<>();
            for (String c : perRankCvd) {
                perRank.add(c.trim().equals("-") ? null : c.trim());
            }
            if (np != null && np != perRank.size()) {
                throw new ParameterException(spec.commandLine(), "--cuda-visible-devices-per-rank lists " + perRank.size()
                        + " rank(s) but -np is " + np + ": give one value per local rank, separated by ':'");
            }
        }
        int n = np != null ? np : perRank != null ? perRank.size() : Doctor.defaultLocalRanks(t, env);
        // Started inside a rank (its launcher says which local rank it is), with nothing asked about the others: answer for it.
        int localRank = -1;
        Map.Entry<String, Integer> inRank = np == null && perRank == null ? Doctor.localRankFromEnv(env) : null;
        if (inRank != null && inRank.getValue() < n) {
            localRank = inRank.getValue();
        }
        List<Interfaces.Nic> nics = interfaces != null ? interfaces : Interfaces.systemInterfaces();
        Doctor.Report r = Doctor.run(new Doctor.Input(t, env, n, nics, HostView.probe(config, root), perRank, localRank));
        if (root == null && UcxLine.thisHost(env)) {
            List<Doctor.Finding> all = new java.util.ArrayList<>(r.findings());
            all.add(UcxLine.finding(t));
            r = new Doctor.Report(r.host(), r.localRanks(), all);
        }
        spec.commandLine().getOut().print(json ? Json.write(r.toJson()) + "\n" : r.text());
        spec.commandLine().getOut().flush();
        return r.exitCode();
    }
}
