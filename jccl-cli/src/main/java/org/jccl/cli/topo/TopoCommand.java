package org.jccl.cli.topo;

import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.Callable;
import org.jccl.Config;
import org.jccl.internal.config.Settings;
import org.jccl.internal.util.Json;
import org.jccl.internal.topo.TopoText;
import org.jccl.internal.topo.Topology;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code jccl topo [--json] [--root DIR]}: what jccl sees of this host. */
@Command(name = "topo", mixinStandardHelpOptions = true, sortOptions = false,
        header = "Print this host's topology: NUMA nodes, PCI tree of GPUs and NICs, distances, NIC per rank.",
        description = {
            "Print what jccl sees of this host, read from sysfs and procfs (and NVML when the NVIDIA driver is"
                    + " present): NUMA nodes with their PCI trees of GPUs, RDMA devices and interfaces; the GPU-to-HCA"
                    + " distance matrix (PIX same PCIe switch, PXB same root port, PHB same NUMA node, SYS across sockets);"
                    + " the NIC(s) each local rank uses; GPUDirect RDMA; /dev/shm; limits; the container.",
            "",
            "JCCL_TOPO_FILE=FILE prints a saved topology instead; JCCL_TOPO_DUMP_FILE=FILE also saves the one printed.",
            ""},
        footer = {"", "Examples:", "  jccl topo", "  jccl topo --json > node.json && JCCL_TOPO_FILE=node.json jccl doctor -np 8"})
public final class TopoCommand implements Callable<Integer> {

    private final Map<String, String> env;

    @Spec
    CommandSpec spec;

    @Option(names = "--json", description = "print the topology as JSON (the format JCCL_TOPO_FILE reads)")
    boolean json;

    @Option(names = "--root", paramLabel = "DIR", description = "read sysfs/procfs under DIR instead of / (e.g. a copy from another host)")
    Path root;

    public TopoCommand() {
        this(System.getenv());
    }

    /** With the given environment instead of the process's (tests). */
    TopoCommand(Map<String, String> env) {
        this.env = Map.copyOf(env);
    }

    @Override
    public Integer call() {
        Config config = Config.fromEnvironment(env);
        Topology t = HostView.topology(config, env, root);
        if (json) {
            spec.commandLine().getOut().println(Json.write(t.toJson()));
        } else {
            spec.commandLine().getOut().print(TopoText.render(t, env.get("CUDA_VISIBLE_DEVICES"), Settings.IB_HCA.getString(config)));
            if (root == null && UcxLine.thisHost(env)) {
                spec.commandLine().getOut().println(UcxLine.topoLine());
            }
        }
        spec.commandLine().getOut().flush();
        return 0;
    }
}
