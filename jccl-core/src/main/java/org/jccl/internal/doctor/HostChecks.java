package org.jccl.internal.doctor;

import java.util.ArrayList;
import java.util.List;
import org.jccl.Config;
import org.jccl.ConfigException;
import org.jccl.internal.config.Settings;
import org.jccl.internal.doctor.Doctor.Finding;
import org.jccl.internal.doctor.Doctor.Input;
import org.jccl.internal.doctor.Doctor.Status;
import org.jccl.internal.net.DeviceList;
import org.jccl.internal.net.Interfaces;
import org.jccl.internal.topo.NicAssignment;
import org.jccl.internal.topo.TopoText;
import org.jccl.internal.topo.Topology;
import org.jccl.internal.topo.Topology.Container;
import org.jccl.internal.topo.Topology.Limits;
import org.jccl.internal.topo.Topology.NetDevice;
import org.jccl.internal.transport.shm.ShmReservation;

/**
 * {@link Doctor}'s checks of the host and the process: the container, shared memory, the limits a
 * job of N ranks runs into (locked memory, open files, threads, the listen backlog), the interface
 * bootstrap and TCP use ({@code JCCL_SOCKET_IFNAME}), and the {@code JCCL_*} variables themselves.
 */
final class HostChecks extends Checks {

    HostChecks(Input in, Config config) {
        super(in, config);
    }

    Finding container() {
        Container c = t.container();
        if (c.kind().equals("none")) {
            return pass("container", "not in a container (no /.dockerenv, no container in /proc/1/cgroup, no KUBERNETES_SERVICE_HOST)");
        }
        String what = switch (c.kind()) {
            case "kubernetes" -> "a Kubernetes pod";
            case "docker" -> "a Docker container";
            default -> "a container";
        };
        return pass("container", "running in " + what + " (" + c.evidence() + "); the fixes below are given for it");
    }

    Finding shm() {
        String id = "shm";
        if (Settings.SHM_DISABLE.getBool(config)) {
            return skip(id, "JCCL_SHM_DISABLE=1: same-host ranks use TCP, no shared memory is reserved");
        }
        int n = in.localRanks();
        Topology.Shm shm = t.shm();
        if (n <= 1) {
            return pass(id, "1 local rank reserves no shared memory (" + shm.dir() + ": " + TopoText.bytes(shm.freeBytes())
                    + " free); run jccl doctor -np N to check N ranks");
        }
        int slots = Settings.SHM_SLOTS.getInt(config);
        long chunk = Settings.SHM_CHUNK.getLong(config);
        long ring = ShmReservation.ringBytes(slots, chunk);
        long need = ShmReservation.hostBytes(n, slots, chunk);
        String how = n + " local ranks need " + TopoText.bytes(need) + " (each rank reserves " + (n - 1) + " ring(s) of " + slots + " x "
                + TopoText.bytes(chunk) + " = " + TopoText.bytes(ring) + " each, JCCL_SHM_SLOTS x JCCL_SHM_CHUNK)";
        String suggest = Doctor.suggestSize(need);
        String fix = t.container().shmFix(suggest) + "; or point JCCL_SHM_DIR at a larger tmpfs, make the rings smaller"
                + " (JCCL_SHM_SLOTS, JCCL_SHM_CHUNK), or set JCCL_SHM_DISABLE=1 to use TCP between same-host ranks";
        if (shm.totalBytes() < 0) {
            return fail(id, shm.dir() + " does not exist or cannot be examined; " + how,
                    "create it as a tmpfs (mount -t tmpfs -o size=" + suggest + " tmpfs " + shm.dir()
                            + ") or point JCCL_SHM_DIR at one, or set JCCL_SHM_DISABLE=1");
        }
        String have = shm.dir() + " has " + TopoText.bytes(shm.freeBytes()) + " free of " + TopoText.bytes(shm.totalBytes());
        if (shm.freeBytes() < need) {
            return fail(id, have + "; " + how + ": communicator creation fails with 'not enough shared memory'", fix);
        }
        if (shm.freeBytes() < 2 * need) {
            return warn(id, have + "; " + how + ", which leaves little for others (PyTorch DataLoader workers, NCCL also use it)", fix);
        }
        return pass(id, have + "; " + how);
    }

    private String limitsFix(String dockerUlimit, String limitsConf, String systemd) {
        Container c = t.container();
        if (c.docker()) {
            return "restart the container with --ulimit " + dockerUlimit;
        }
        if (c.kubernetes()) {
            return "raise the container runtime's default limit on the node (" + systemd + " in containerd.service or docker.service),"
                    + " since pod specs cannot set ulimits";
        }
        return "add '" + limitsConf + "' to /etc/security/limits.conf (" + systemd + " for services) and log in again";
    }

    Finding memlock() {
        String id = "memlock";
        Limits l = t.limits();
        String have = "max locked memory: " + limit(l.memlockSoft(), true) + " (hard " + limit(l.memlockHard(), true) + ")";
        if (t.rdmaDevices().isEmpty()) {
            return pass(id, have + "; no RDMA devices here, so nothing is registered against it");
        }
        if (l.memlockSoft() == Limits.UNKNOWN) {
            return skip(id, "/proc/self/limits could not be read");
        }
        if (l.memlockSoft() == Limits.UNLIMITED) {
            return pass(id, have + "; RDMA may register any buffer");
        }
        String fix = l.memlockHard() == Limits.UNLIMITED || l.memlockHard() > l.memlockSoft()
                ? "run ulimit -l " + limit(l.memlockHard(), false).replace(" ", "") + " in the job's shell before starting it"
                : limitsFix("memlock=-1", "* - memlock unlimited", "LimitMEMLOCK=infinity");
        String why = "; RDMA registers (pins) every communication buffer against it, so registrations fail"
                + " ('ibv_reg_mr: Cannot allocate memory') once it is used up";
        if (l.memlockSoft() < 64L << 20) {
            return fail(id, have + why, fix);
        }
        return warn(id, have + why + "; unlimited is the safe setting", fix);
    }

    Finding openFiles() {
        String id = "open-files";
        Limits l = t.limits();
        if (l.nofileSoft() == Limits.UNKNOWN) {
            return skip(id, "/proc/self/limits could not be read");
        }
        int world = world();
        int spp = socketsPerPeer();
        long need = 64 + (long) world * (spp + 2);
        String have = "max open files: " + limit(l.nofileSoft(), false) + " (hard " + limit(l.nofileHard(), false) + "); a rank of a "
                + world + "-rank job needs about " + need + " (" + spp + " socket(s) per peer, JCCL_SOCKET_NTHREADS x"
                + " JCCL_NSOCKS_PERTHREAD, twice with JCCL_SOCKET_SPLIT=1, plus doorbells and the JVM's own)";
        if (l.nofileSoft() == Limits.UNLIMITED || l.nofileSoft() >= 4 * need) {
            return pass(id, have);
        }
        String fix = l.nofileHard() == Limits.UNLIMITED || l.nofileHard() >= 4 * need
                ? "run ulimit -n " + (l.nofileHard() == Limits.UNLIMITED ? 1048576 : l.nofileHard()) + " in the job's shell"
                : limitsFix("nofile=1048576:1048576", "* - nofile 1048576", "LimitNOFILE=1048576");
        if (l.nofileSoft() < need) {
            return fail(id, have + ": connections fail with 'Too many open files'", fix);
        }
        return warn(id, have + ", with little headroom", fix);
    }

    Finding threads() {
        String id = "threads";
        Limits l = t.limits();
        int n = in.localRanks();
        // A JVM rank: GC and compiler threads grow with the CPUs, plus jccl's op, acceptor and init threads.
        long perRank = 40 + t.cpus();
        long need = n * perRank;
        StringBuilder have = new StringBuilder();
        Status st = Status.PASS;
        String fix = "";
        if (l.pidsMax() != Limits.UNKNOWN) {
            have.append("cgroup pids.max ").append(limit(l.pidsMax(), false));
            if (l.pidsMax() != Limits.UNLIMITED && l.pidsMax() < 2 * need) {
                st = l.pidsMax() < need ? Status.FAIL : Status.WARN;
                fix = t.container().kubernetes() ? "raise the kubelet's podPidsLimit (--pod-max-pids) for this node pool"
                        : t.container().docker() ? "restart the container with a larger --pids-limit (or -1)"
                        : "raise pids.max of the job's cgroup (systemd: TasksMax=infinity)";
            }
        }
        if (l.nprocSoft() != Limits.UNKNOWN) {
            have.append(have.isEmpty() ? "" : ", ").append("max user processes ").append(limit(l.nprocSoft(), false));
            if (l.nprocSoft() != Limits.UNLIMITED && l.nprocSoft() < 2 * need) {
                Status s2 = l.nprocSoft() < need ? Status.FAIL : Status.WARN;
                if (s2.compareTo(st) > 0 || fix.isEmpty()) {
                    fix = "run ulimit -u unlimited (or add '* - nproc unlimited' to /etc/security/limits.conf)";
                }
                st = s2.compareTo(st) > 0 ? s2 : st;
            }
        }
        if (have.isEmpty()) {
            return skip(id, "neither /proc/self/limits nor the cgroup's pids.max could be read");
        }
        String msg = have + "; " + n + " JVM ranks on " + t.cpus() + " CPUs start about " + need + " threads (" + perRank + " each)";
        return switch (st) {
            case FAIL -> fail(id, msg + ": thread creation fails with EAGAIN ('Resource temporarily unavailable', 'unable to create"
                    + " native thread')", fix);
            case WARN -> warn(id, msg + ", close to the limit: other processes of the user or pod count too", fix);
            default -> pass(id, msg);
        };
    }

    Finding listenBacklog() {
        String id = "listen-backlog";
        long cap = t.limits().somaxconn();
        if (cap == Limits.UNKNOWN) {
            return skip(id, "/proc/sys/net/core/somaxconn could not be read");
        }
        int world = world();
        long need = Math.max(world, (long) (world - 1) * socketsPerPeer());
        String msg = "net.core.somaxconn = " + cap + "; at initialisation up to " + need + " connections of a " + world
                + "-rank job arrive at one listener at once";
        if (cap < need) {
            return warn(id, msg + ": connections beyond the backlog are dropped and retried (slow start) or refused with EAGAIN"
                    + " ('Resource temporarily unavailable')", "sysctl -w net.core.somaxconn=" + Math.max(4096, Long.highestOneBit(need) << 1)
                    + (t.container().kubernetes() ? " (in a pod: securityContext.sysctls, net.core.somaxconn is a namespaced sysctl)" : ""));
        }
        return pass(id, msg);
    }

    Finding socketIfname() {
        String id = "socket-ifname";
        String spec = Settings.SOCKET_IFNAME.getString(config);
        Interfaces.Family fam = Interfaces.Family.parse(Settings.SOCKET_FAMILY.getString(config));
        Interfaces.Selection s;
        try {
            s = Interfaces.choose(spec, fam, in.interfaces());
        } catch (ConfigException e) {
            return fail(id, e.getMessage(), "set JCCL_SOCKET_IFNAME to one of the interfaces listed (names are exact; a trailing * matches by prefix)");
        }
        String label = "JCCL_SOCKET_IFNAME" + (spec == null ? " is unset" : "=" + spec) + ": bootstrap and TCP use " + s.interfaceName()
                + " (" + s.address().getHostAddress() + ")";
        // Names the spec reaches only because an entry is a prefix of them (eth1 -> eth10): asked of
        // Interfaces itself, one interface at a time, so this follows whatever its grammar is.
        List<String> surprises = new ArrayList<>();
        if (spec != null && !spec.isBlank()) {
            boolean exclude = spec.trim().startsWith("^");
            for (Interfaces.Nic x : in.interfaces()) {
                if (!x.up() || x.loopback()) {
                    continue;
                }
                List<String> shorter = in.interfaces().stream().map(Interfaces.Nic::name)
                        .filter(p -> x.name().startsWith(p) && !x.name().equals(p) && spec.contains(p)).toList();
                if (shorter.isEmpty()) {
                    continue;
                }
                boolean selected;
                try {
                    selected = Interfaces.choose(spec, fam, List.of(x)).interfaceName().equals(x.name());
                } catch (ConfigException e) {
                    selected = false;
                }
                if (selected != exclude) {
                    surprises.add(shorter.getFirst() + " is a prefix: it also " + (exclude ? "excludes " : "matches ") + x.name());
                }
            }
        }
        if (!surprises.isEmpty()) {
            return warn(id, label + "; " + String.join("; ", surprises), "write =" + spec.trim().replace("^", "").split(",")[0].trim()
                    + " (exact names) to mean only that interface" + (spec.trim().startsWith("^") ? ", after the ^" : ""));
        }
        boolean loopback = in.interfaces().stream().anyMatch(x -> x.name().equals(s.interfaceName()) && x.loopback());
        if (loopback && world() > in.localRanks()) {
            return fail(id, label + ", a loopback interface, but the job has " + world() + " ranks and only " + in.localRanks()
                    + " here: other hosts cannot reach it", "set JCCL_SOCKET_IFNAME to the interface other hosts reach this one on");
        }
        // Only when TCP carries the data (no RDMA): warn about a slow interface chosen while a faster one is up.
        if (NicAssignment.candidates(t, DeviceList.parse(Settings.IB_HCA.name(), null, true)).stream().noneMatch(NicAssignment.Nic::rdma)) {
            long chosen = t.netDevices().stream().filter(d -> d.name().equals(s.interfaceName())).mapToLong(NetDevice::speedMbps)
                    .findFirst().orElse(-1);
            NetDevice fastest = t.netDevices().stream().filter(d -> d.up() && d.pci().onPci())
                    .max(java.util.Comparator.comparingLong(NetDevice::speedMbps)).orElse(null);
            if (chosen > 0 && fastest != null && fastest.speedMbps() >= 4 * chosen && !fastest.name().equals(s.interfaceName())) {
                return warn(id, label + " at " + chosen + " Mb/s while " + fastest.name() + " is up at " + fastest.speedMbps()
                        + " Mb/s; TCP carries the data here", "set JCCL_SOCKET_IFNAME=" + fastest.name() + " if other hosts reach it");
            }
        }
        return pass(id, label);
    }

    Finding env() {
        String id = "env";
        EnvCheck.Result r = EnvCheck.check(in.env());
        String nccl = r.ncclOnly().isEmpty() ? "" : "; read by NCCL only (jccl perf --backend nccl): " + String.join(", ", r.ncclOnly());
        if (!r.badValues().isEmpty()) {
            List<String> all = new ArrayList<>(r.badValues());
            all.addAll(r.problems());
            return fail(id, String.join("; ", all) + nccl, "correct or unset the variables named above (jccl env lists every setting)");
        }
        if (!r.problems().isEmpty()) {
            return warn(id, String.join("; ", r.problems()) + nccl, "remove or rename the variables named above (jccl env lists every"
                    + " setting)");
        }
        return pass(id, "every JCCL_ variable is a known setting with an allowed value" + nccl);
    }
}
