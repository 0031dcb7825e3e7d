/**
 * What this host has: {@link org.jccl.internal.topo.SysfsDiscovery}
 * reads a {@link org.jccl.internal.topo.Topology} from sysfs/procfs under any root directory (tests
 * use synthetic trees) and from NVML when present ({@link org.jccl.internal.topo.Nvml}, an optional
 * FFM gate); {@link org.jccl.internal.topo.PciLocation} gives NCCL's PIX/PXB/PHB/SYS distances;
 * {@link org.jccl.internal.topo.NicAssignment} gives each local GPU its nearest NICs, balanced so
 * every HCA carries traffic; {@link org.jccl.internal.topo.GpuMapping} is the one rule for which GPU a
 * process drives, and {@link org.jccl.internal.topo.CpuBinding} the CPUs {@code jccl run} binds a rank
 * to. Whether the host is ready for a job is {@code org.jccl.internal.doctor} ({@code jccl doctor}),
 * built on this package. Nothing here throws because a file is missing: unknown stays unknown, and the
 * doctor says which check it could not make and why.
 */
package org.jccl.internal.topo;
