package org.jccl.internal.topo;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;
import org.jccl.internal.util.NativeAccess;

/**
 * The one gate to NVML ({@code libnvidia-ml.so.1}, STYLE.md item 7), optional: loaded through FFM
 * the first time {@link #probe()} is called; a machine without the NVIDIA driver gets a
 * {@link GpuProbe} that answers nothing and says why ({@link GpuProbe#status()}), never an
 * exception. Only read-only queries are made: UUIDs, NVLink state and remote PCI info, P2P status.
 *
 * <p>Thread-safe: NVML's calls are; the handles are looked up once.
 */
public final class Nvml implements GpuProbe {

    static final String LIBRARY = "libnvidia-ml.so.1";
    private static final int SUCCESS = 0;
    /** NVML_NVLINK_MAX_LINKS in current headers. */
    private static final int MAX_LINKS = 18;
    /** NVML_DEVICE_UUID_V2_BUFFER_SIZE. */
    private static final int UUID_BYTES = 96;
    /** sizeof(nvmlPciInfo_t): char busIdLegacy[16]; unsigned domain, bus, device, pciDeviceId, pciSubSystemId; char busId[32]. */
    private static final int PCI_INFO_BYTES = 68;
    private static final int PCI_INFO_BUS_ID_OFFSET = 36;
    /** NVML_P2P_CAPS_INDEX_READ. */
    private static final int P2P_CAPS_READ = 0;
    private static final String[] P2P_STATUS = {"OK", "not supported by the chipset", "not supported by the GPU",
        "not supported by the IOH/PCIe topology", "disabled by a driver registry key", "not supported", "unknown"};

    private static volatile GpuProbe instance;

    private final MethodHandle getHandleByBusId;
    private final MethodHandle getUuid;
    private final MethodHandle getNvLinkState;
    private final MethodHandle getNvLinkRemotePci;
    private final MethodHandle getP2PStatus;

    private Nvml(SymbolLookup lib, Linker linker) {
        this.getHandleByBusId = fn(lib, linker, "nvmlDeviceGetHandleByPciBusId_v2", ADDRESS, ADDRESS);
        this.getUuid = fn(lib, linker, "nvmlDeviceGetUUID", ADDRESS, ADDRESS, JAVA_INT);
        // NVLink queries are optional: a driver without them still answers UUIDs and P2P.
        this.getNvLinkState = optional(lib, linker, "nvmlDeviceGetNvLinkState", ADDRESS, JAVA_INT, ADDRESS);
        this.getNvLinkRemotePci = optional(lib, linker, "nvmlDeviceGetNvLinkRemotePciInfo_v2", ADDRESS, JAVA_INT, ADDRESS);
        this.getP2PStatus = fn(lib, linker, "nvmlDeviceGetP2PStatus", ADDRESS, ADDRESS, JAVA_INT, ADDRESS);
    }

    /** NVML of this machine, or an absent probe saying why not (loaded and initialised once). */
    public static GpuProbe probe() {
        GpuProbe p = instance;
        if (p == null) {
            synchronized (Nvml.class) {
                p = instance;
                if (p == null) {
                    p = load(LIBRARY);
                    instance = p;
                }
            }
        }
        return p;
    }

    /** Loads {@code library} and calls nvmlInit_v2; any failure gives an absent probe naming it. */
    @SuppressWarnings("restricted")
    static GpuProbe load(String library) {
        SymbolLookup lib;
        Linker linker;
        try {
            linker = Linker.nativeLinker();
            lib = SymbolLookup.libraryLookup(library, Arena.global());
        } catch (IllegalArgumentException e) {
            return GpuProbe.absent(library + " (NVML, part of the NVIDIA driver) was not found: no NVIDIA driver here, or its"
                    + " library directory is not on the loader path; NVLink peers, UUIDs and P2P checks are skipped");
        } catch (IllegalCallerException e) {
            return GpuProbe.absent("native access is denied to jccl (run java with " + NativeAccess.flag() + ");"
                    + " NVML is not used");
        } catch (RuntimeException | LinkageError e) {
            return GpuProbe.absent(library + " could not be loaded: " + e);
        }
        try {
            MethodHandle init = fn(lib, linker, "nvmlInit_v2");
            int r = (int) init.invokeExact();
            if (r != SUCCESS) {
                return GpuProbe.absent("nvmlInit_v2 failed with NVML error " + r + " (is the NVIDIA kernel module loaded? try nvidia-smi)");
            }
            return new Nvml(lib, linker);
        } catch (Throwable t) {
            return GpuProbe.absent(library + " is unusable: " + t);
        }
    }

    @SuppressWarnings("restricted")
    private static MethodHandle fn(SymbolLookup lib, Linker linker, String name, java.lang.foreign.MemoryLayout... args) {
        MemorySegment sym = lib.find(name).orElseThrow(() -> new UnsatisfiedLinkError(LIBRARY + " has no " + name));
        return linker.downcallHandle(sym, FunctionDescriptor.of(JAVA_INT, args));
    }

    @SuppressWarnings("restricted")
    private static MethodHandle optional(SymbolLookup lib, Linker linker, String name, java.lang.foreign.MemoryLayout... args) {
        return lib.find(name).map(sym -> linker.downcallHandle(sym, FunctionDescriptor.of(JAVA_INT, args))).orElse(null);
    }

    @Override
    public boolean available() {
        return true;
    }

    @Override
    public String status() {
        return "ok";
    }

    private MemorySegment handle(Arena a, String busId) throws Throwable {
        MemorySegment out = a.allocate(ADDRESS);
        int r = (int) getHandleByBusId.invokeExact(a.allocateFrom(busId), out);
        return r == SUCCESS ? out.get(ADDRESS, 0) : null;
    }

    @Override
    public String uuid(String busId) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment h = handle(a, busId);
            if (h == null) {
                return "";
            }
            MemorySegment buf = a.allocate(UUID_BYTES);
            int r = (int) getUuid.invokeExact(h, buf, UUID_BYTES);
            return r == SUCCESS ? buf.getString(0) : "";
        } catch (Throwable t) {
            return "";
        }
    }

    @Override
    public List<String> nvlinkPeers(String busId) {
        List<String> out = new ArrayList<>();
        if (getNvLinkState == null || getNvLinkRemotePci == null) {
            return out;
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment h = handle(a, busId);
            if (h == null) {
                return out;
            }
            MemorySegment state = a.allocate(JAVA_INT);
            MemorySegment pci = a.allocate(PCI_INFO_BYTES);
            for (int link = 0; link < MAX_LINKS; link++) {
                int r = (int) getNvLinkState.invokeExact(h, link, state);
                if (r != SUCCESS || state.get(JAVA_INT, 0) == 0) {
                    continue;
                }
                r = (int) getNvLinkRemotePci.invokeExact(h, link, pci);
                if (r == SUCCESS) {
                    out.add(Topology.normaliseBusId(pci.getString(PCI_INFO_BUS_ID_OFFSET)));
                }
            }
        } catch (Throwable t) {
            // NVLink is an extra: a failing query leaves the list as far as it got.
        }
        return out;
    }

    @Override
    public String p2pRead(String busA, String busB) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment ha = handle(a, busA);
            MemorySegment hb = handle(a, busB);
            if (ha == null || hb == null) {
                return null;
            }
            MemorySegment st = a.allocate(JAVA_INT);
            int r = (int) getP2PStatus.invokeExact(ha, hb, P2P_CAPS_READ, st);
            if (r != SUCCESS) {
                return null;
            }
            int s = st.get(JAVA_INT, 0);
            return s >= 0 && s < P2P_STATUS.length ? P2P_STATUS[s] : "status " + s;
        } catch (Throwable t) {
            return null;
        }
    }
}
