package org.jccl.cli.topo;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import org.jccl.Config;
import org.jccl.internal.net.Interfaces;
import org.jccl.internal.topo.Doctor;
import org.jccl.internal.topo.Json;
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
            "Examples:", "  jccl doctor -np 8", "  CUDA_VISIBLE_DEVICES=0,1,2,3 jccl doctor -np 4 --json"})
public final class DoctorCommand implements Callable<Integer> {

    private final Map<String, String> env;
    private final List<Interfaces.Nic> interfaces;

    @Spec
    CommandSpec spec;

    @Option(names = {"-np", "--np"}, paramLabel = "N",
            description = "local ranks the job will start on this host (default: JCCL_LOCAL_SIZE / LOCAL_WORLD_SIZE, else the visible"
                    + " GPUs, else the CPUs)")
    Integer np;

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
        int n = np != null ? np : Doctor.defaultLocalRanks(t, env);
        List<Interfaces.Nic> nics = interfaces != null ? interfaces : Interfaces.systemInterfaces();
        Doctor.Report r = Doctor.run(new Doctor.Input(t, env, n, nics, HostView.probe(config, root)));
        spec.commandLine().getOut().print(json ? Json.write(r.toJson()) + "\n" : r.text());
        spec.commandLine().getOut().flush();
        return r.exitCode();
    }
}
